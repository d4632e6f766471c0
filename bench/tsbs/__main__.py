"""``python -m bench.tsbs``: the same as ``gnomon bench tsbs``."""

from bench.tsbs.cli import tsbs

tsbs(prog_name="python -m bench.tsbs")
