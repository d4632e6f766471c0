"""The composition root: the ``gnomon`` command, the dev cluster, the SQL shell and the Spark
data source, each assembling the meta service, data nodes and compaction nodes from their
packages. Nothing below imports this package."""
