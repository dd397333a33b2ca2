"""Call graph stage: which function each call site of the index runs, as a graph with queries.

Input: the index (``FileIndex`` per path). Output: a ``CallGraph`` of ``Edge`` objects
between ``FunctionRef`` nodes, used by packing (windows grouped by connected files, call
chains), grounding (is a model's chain plausible?) and the static analyses (reachability
from entry points).

- ``graph``: ``CallGraph``, ``FunctionRef``, ``Edge`` and the queries (callers, callees,
  paths, components, ``resolve``, ``class_member``).
- ``resolve``: how a call site's callee text becomes an edge (scopes, classes, imports,
  the unique-name fallback).
- ``symbols``: the tables resolution reads (definitions by file, name and directory) and
  the lookups by name alone.
- ``imports``: what each file's imports bind, per language, and Python module names.
- ``languages``: what calls mean in each language, as data (``RULES``), not branches.
- ``names``: ``<module>``/``<main>``, ``python_module_name``, ``strip_arguments``.
- ``cache``: built graphs on disk, keyed by every file's path, language and content hash.

It imports the index and storage only: never the analyses built on it.
"""
