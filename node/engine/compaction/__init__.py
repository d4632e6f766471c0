"""Compaction: the picker plans (a pure function of SST metas and options), the runner merges
one serialisable task, the compactor commits results and the scheduler runs them in the
background. See node/engine/README.md."""
