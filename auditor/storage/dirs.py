"""Where auditor keeps its caches: one directory, ``$AUDITOR_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/auditor``, else ``~/.cache/auditor``, with one subdirectory per store
(``index``, ``graphs``, ``counts``, ``results``, ``packs``...)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The directory every cache lives under."""
    configured = os.environ.get("AUDITOR_CACHE_DIR")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "auditor"


def cache_dir(store: str) -> Path:
    """The directory of one store, e.g. ``cache_dir("index")``."""
    return cache_root() / store
