"""Storage: where auditor keeps its caches, and the on-disk conventions they share.

- ``dirs``: the cache directory (``$AUDITOR_CACHE_DIR``, else XDG's) and its stores.
- ``sealed``: sealed (magic, checksum) values written atomically, and least-recently-used
  pruning.
- ``digests``: a persistent map from a content digest to a small integer (token counts,
  relevance scores).
"""

