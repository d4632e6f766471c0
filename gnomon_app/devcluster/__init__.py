"""`gnomon dev-cluster`: a whole cluster on loopback under one data directory (etcd, a
Kafka-protocol broker, an S3 server and the gnomon services), for trying gnomon and for tests."""
