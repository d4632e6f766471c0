"""The meta service: cluster topology, liveness, placement, failover and balancing."""
