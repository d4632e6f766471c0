"""Security of a gnomon server: accounts (users, tokens, grants) in the catalog, the
authentication of requests, the authorisation of what they do, and TLS."""
