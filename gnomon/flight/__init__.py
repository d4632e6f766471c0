"""The Arrow Flight protocol of a gnomon node, shared by its server (``node/server/flight.py``)
and every client of it — the Spark data source, and other nodes reading remote tables or
sending rows on to an owner: the JSON forms of requests (``ticket.py``) and a small client
(``client.py``). Neither imports pyspark."""
