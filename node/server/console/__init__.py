"""The web console every node serves at ``/dashboard``: a query page (SQL answered as a table,
time series drawn as a line chart) and a cluster page (nodes, shards, procedures, compaction
nodes), from files shipped in this package (:mod:`.assets`) and one JSON endpoint,
``GET /api/cluster`` (:mod:`.cluster`). The page asks for nothing but this server: its
charting library (uPlot, MIT, its licence beside it) is vendored in ``static/``."""

from node.server.console.assets import API_CLUSTER, PREFIX, is_console, serve
from node.server.console.cluster import ClusterView

__all__ = ["API_CLUSTER", "PREFIX", "ClusterView", "is_console", "serve"]
