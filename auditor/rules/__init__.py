"""Rules: what an audit looks for, as data.

- ``loader``: ``Rule``, and rule files (Markdown with YAML front matter telling the model,
  the packer and the static pass what to look for): the built-in ones by id
  (``builtin_rules``) or a user's file.
- ``severity``: ``Severity``, the five names in one ordered enum.
- ``patterns``: rule patterns compiled for linear-time matching (RE2).
- ``builtin/``: the built-in rule files, shipped as package data.
"""

