"""A data node in a cluster: its lease with the meta service and the shards it serves."""
