"""The pandas the dev extra installs is one PySpark supports: with pandas 3, PySpark warns at
every start of Spark (the benchmark's, the example's, the tests')."""

from __future__ import annotations

import warnings

import pytest
from pyspark.sql.pandas.utils import require_minimum_pandas_version

pytestmark = pytest.mark.unit


def test_pyspark_takes_the_installed_pandas_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_minimum_pandas_version()
