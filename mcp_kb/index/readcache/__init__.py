"""A read-through disk cache for an index on S3-compatible storage.

LanceDB keeps no local copy of what it reads from object storage (lancedb#3106): against a local
S3 server a hybrid search made ~60 ranged GETs of data and index files and took 10× a folder's
time. Lance never rewrites a data, index or deletion file (their names carry a fresh random id), so
their bytes can be kept by name forever; everything else (listings, manifests, version hints) says
what is current and always goes to the store, so a cache can never make a reader stale.

LanceDB has no hook for its object store, so the cache is a small S3 endpoint on 127.0.0.1: a
reader's connection uses it (`ReadCache.lancedb_options`), it serves the pages it holds and
forwards the rest to the real store, signed with the real credentials. It answers only GET and
HEAD, only for the configured bucket, only to a caller presenting this process's random key.

Modules: upstream.py (the store and its signatures), pages.py (pages on disk), cache.py (what is
answered from pages and what forwarded), endpoint.py (the HTTP server on the loopback address).
"""
