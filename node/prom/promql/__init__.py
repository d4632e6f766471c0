"""PromQL, parsed by promql-parser and evaluated over gnomon's tables on numpy arrays: every
value is a matrix of series by evaluation steps (see values.py)."""
