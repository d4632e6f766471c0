"""A local Spark session with the ``gnomon`` data source registered: what the example
pipeline, the tests and the benchmark run on, and a starting point for notebooks."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app: str, *, cores: int = 2, max_failures: int = 1, **conf: str) -> Any:
    """``local[cores]`` Spark on this machine's loopback, workers on this Python, UTC session
    time zone, no UI, few shuffle partitions; ``conf`` adds or overrides settings (keys with
    ``_`` for ``.``, e.g. ``spark_driver_memory="4g"``). A task is tried ``max_failures``
    times (local Spark takes it from the master URL alone, ``local[cores, max_failures]``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from gnomon_app.spark.datasource import register

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(cores),
        **{key.replace("_", "."): value for key, value in conf.items()},
    }
    builder = SparkSession.builder.master(f"local[{cores}, {max_failures}]").appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
