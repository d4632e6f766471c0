"""gnomon: a distributed time-series and analytics database."""

__version__ = "0.1.0"
