"""Ingest: find a KB's documents (sources: folders, web sites, registered kinds), turn each into a
Document (parsers) and cut it into chunks."""
