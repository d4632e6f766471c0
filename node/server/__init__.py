"""gnomon's servers: the HoraeDB-compatible gRPC service, the HTTP API and the standalone
process that runs both on one engine."""
