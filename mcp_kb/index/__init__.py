"""The index: the one schema, the LanceDB store, sync state, filter predicates and keyword analysis.

The only package that imports lancedb.
"""
