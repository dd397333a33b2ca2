"""The walk stage: which files of a repository are audited, read once, and what changed in them.

- :mod:`auditor.walk.walker`: the entry point, :func:`~auditor.walk.walker.walk` with its
  :class:`~auditor.walk.walker.WalkOptions` and :class:`~auditor.walk.walker.WalkResult`;
  it applies the exclusions below in order.
- :mod:`auditor.walk.files`: what the walk yields per candidate (``FileEntry``,
  ``SkippedFile``, ``SkipReason``).
- :mod:`auditor.walk.listing`: enumerating candidates (``git ls-files``, or a filesystem
  walk applying ``.gitignore`` without git).
- :mod:`auditor.walk.ignore`: ignore files (``.gitignore``, ``.auditorignore``,
  ``.git/info/exclude``) evaluated per directory as git does;
  :mod:`auditor.walk.wildmatch`: git's wildmatch for one pattern (why not ``pathspec``:
  its docstring).
- :mod:`auditor.walk.globs`: ``--include``/``--exclude`` globs, pathspec's semantics,
  compiled into one matcher.
- :mod:`auditor.walk.classify`: default exclusions (vendored, lockfile, minified,
  generated, binary type) as tables of rules with reasons.
- :mod:`auditor.walk.placeholders`: submodules, nested repositories and stand-in files (Git
  LFS and git-annex pointers, git-crypt ciphertext), named as not audited, never read as
  clean code.
- :mod:`auditor.walk.reading`: reading a candidate off disk (links, non-files, size
  limit) and decoding its text (UTF-8, UTF-16/32 with BOM, cp1252; binary, non-utf8).
- :mod:`auditor.walk.diff`: what a change touches, from git (changed files, new-side hunks,
  renames), and the Markdown link base inferred from the git remote.
"""
