"""Index stage: what each source file defines, calls, imports and opens as a context.

Input: ``(path, text, language, content_hash)`` for every file the walk kept. Output: one
``FileIndex`` per path (definitions with qualified names and spans, call sites with callee
chains and their enclosing function, ``with``/try-with-resources blocks, imports, and a few
Python module-level facts), used by the call graph, packing (skeletons), grounding and
entry-point detection.

- ``model``: the value objects and the line/hash conventions.
- ``extract``: tree-sitter extraction of one file, driven by the query files in
  ``auditor/languages`` (two per-language facts are code; see its docstring).
- ``cache``: the persistent, content-addressed index cache.
- ``indexer``: ``index_files``, cache first, misses parsed by worker processes.
- ``locator``: which function holds a line, and where a named function is, as grounding
  asks it.
"""
