"""The index: the one schema, the store contract and its LanceDB backend, sync state, filter predicates
and keyword analysis.

The only package that imports lancedb.
"""
