"""Git repositories as a KB source (`[[kb.repos]]`): fetched by commit, synced by diff."""
