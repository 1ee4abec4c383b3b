"""Web sources: crawl a documentation site within its scope into a local page cache.

A crawl starts from the configured URL, the site's sitemaps and the pages the index already holds,
follows links breadth first within the scope (same host, below the start URL's folder, the
include/exclude globs, robots.txt), and stops at `max_pages` and `max_depth`. Every page is bounded
in bytes (also after decompression) and time. Pages the cache holds are asked for with their ETag /
Last-Modified, so an unchanged site answers 304 and costs no download, parse or embedding.

What the sync sees is the same as for folders: a SourceFile per page (its id the normalized URL,
its path the cached body) and a SkippedFile per page that was not read, marked `unreadable` unless
its site said it is gone (404/410): after a timeout, a 5xx, a 429 or a 401/403 the index keeps that
page's last version.

Modules: urls.py (normal forms, scope, suffixes), fetch.py (one bounded request), pagecache.py,
robots.py (robots.txt and sitemaps), links.py (a page's links), crawl.py, source.py (the Source).
"""
