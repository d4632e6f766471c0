"""gnomon as a Spark source and sink (DESIGN §9): the ``gnomon`` PySpark data source
(``datasource.py``, imports pyspark), on the node's Arrow Flight protocol (``gnomon.flight``:
its request forms and client, shared with the server and with other nodes).

Use: ``from gnomon.spark.datasource import register; register(spark)``, then
``spark.read.format("gnomon").option("endpoint", "127.0.0.1:8832").option("table", "cpu")``.
"""
