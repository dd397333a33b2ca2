"""Walk stage: which files of the repository a scan reads, and what changed in them.

- ``walker``: ``walk`` and ``WalkOptions``: the repository's files (ignore files, excludes,
  binary and size limits, decoding) with their text and language.
- ``diff``: what a change touches, from git (changed files, new-side hunks, renames), and
  the Markdown link base inferred from the git remote.
"""
