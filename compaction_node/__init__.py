"""A compaction node: merges the compaction tasks data nodes offload to it."""
