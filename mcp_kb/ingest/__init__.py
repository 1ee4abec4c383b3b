"""Ingest: find a KB's files (sources), turn each into a Document (parsers) and cut it into chunks."""
