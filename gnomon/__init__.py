"""gnomon: a distributed time-series and analytics database."""

from gnomon.allocators import defer_purge

__version__ = "0.1.0"

# Before Arrow or DataFusion load: their allocator reads its settings then.
defer_purge()
