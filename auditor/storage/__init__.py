"""Storage: where auditor keeps its caches, and the on-disk conventions they share.

- ``dirs``: the cache directory (``$AUDITOR_CACHE_DIR``, else XDG's) and its stores.
- ``sealed``: sealed (magic, checksum) values written atomically, and least-recently-used
  pruning.
- ``digests``: a persistent map from a content digest to a small integer (token counts,
  relevance scores).
- ``atomic``: report outputs written whole or not at all, never through a link planted at
  the output path (devices and pipes the user names are written in place).
- ``jsonl``: JSON Lines split on "\n" only (U+2028 and friends stay inside their record).
"""

