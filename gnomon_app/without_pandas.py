"""Servers run without pandas, as they do where only gnomon's own dependencies are installed
(pandas comes with the dev extra, for Spark). pyarrow imports pandas, when it can, on the
first array it builds from Python values, only to ask whether those values are pandas
objects: a server would pay about 0.2 s of CPU at every start and some 35 MiB of memory for
an answer that is always no."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _WithoutPandas:
    """A finder first on ``sys.meta_path`` that answers every import of pandas as a
    package that is not installed."""

    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def keep_pandas_out() -> None:
    """From now on, importing pandas in this process fails as if it were not installed;
    nothing if it was imported already."""
    if "pandas" not in sys.modules and _WithoutPandas not in sys.meta_path:
        sys.meta_path.insert(0, _WithoutPandas)  # type: ignore[arg-type]
