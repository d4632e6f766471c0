"""gnomon as a Spark source and sink: the ``gnomon`` PySpark data source
(``datasource.py``, imports pyspark), on the node's Arrow Flight protocol (``gnomon.flight``:
its request forms and client, shared with the server and with other nodes); reads planned at
every owner (``planning.py``, no pyspark); the hybrid read (``hybrid.py``): flushed SSTs that
need no merge read by Spark's own Parquet reader, the rest over Flight.

Use: ``gnomon_app.spark.read(spark, "cpu", endpoint="127.0.0.1:8832")`` (the hybrid read), or
``from gnomon_app.spark.datasource import register; register(spark)``, then
``spark.read.format("gnomon").option("endpoint", "127.0.0.1:8832").option("table", "cpu")``
(everything over Flight: a Python data source cannot hand Spark a Parquet scan).
"""

from __future__ import annotations

from typing import Any


def read(spark: Any, table: str, **options: Any) -> Any:
    """The hybrid read of ``table`` as a DataFrame; see :func:`gnomon_app.spark.hybrid.read`."""
    # Imported here: importing gnomon_app.spark must not need pyspark.
    from gnomon_app.spark.hybrid import read as hybrid_read

    return hybrid_read(spark, table, **options)
