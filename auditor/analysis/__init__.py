"""Analysis stage: what the static pass finds on the index and the call graph, per rule.

Inputs: the index (``FileIndex`` per path), the ``CallGraph`` and a rule. Outputs: entry
points, and static findings (``auditor.findings.model.Finding``) with their call chains.

- ``entrypoints``: the functions outside code calls into (HTTP handlers, tasks, commands,
  consumers, ``main``), detected per language from a table.
- ``registry``: which static analysis a rule id runs (``static_analysis_for``).
- ``transactions/``: the tx-outside-transaction analysis (its modules are listed in its
  ``__init__``), one transaction model per framework (Django, SQLAlchemy, Spring, Go's
  database/sql...), and ``explain``: why one function was or was not reported.
"""
