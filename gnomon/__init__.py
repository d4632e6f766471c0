"""gnomon: a distributed time-series and analytics database."""

import os

__version__ = "0.1.0"

# Arrow's and DataFusion's allocator (mimalloc) hands freed memory back to the system 10 ms
# after it is freed, so a query's large buffers fault in again page by page in the next
# query, or later in the same one. Held for a second, large scans measured 1.3-1.8x faster.
# Set before Arrow allocates (importing gnomon comes first in every gnomon process); an
# explicit setting in the environment wins.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "1000")
