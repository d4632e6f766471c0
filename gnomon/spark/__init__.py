"""gnomon as a Spark source and sink (DESIGN §9): the ``gnomon`` PySpark data source
(``datasource.py``, imports pyspark), the Arrow Flight client it uses (``client.py``) and the
JSON forms it shares with the node's Flight endpoint (``ticket.py``, standard library only, so
the server can import it without pyspark).

Use: ``from gnomon.spark.datasource import register; register(spark)``, then
``spark.read.format("gnomon").option("endpoint", "127.0.0.1:8832").option("table", "cpu")``.
"""
