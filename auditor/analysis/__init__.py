"""Analysis stage: what the static pass finds on the index and the call graph, per rule.

Inputs: the index (``FileIndex`` per path), the ``CallGraph`` and a rule. Outputs: entry
points, and static findings (``auditor.findings.model.Finding``) with their call chains.

- ``entrypoints``: the functions outside code calls into (HTTP handlers, tasks, commands,
  consumers, ``main``), detected per language from a table.
- ``registry``: which static analysis a rule id runs (``static_analysis_for``).
- ``tx_outside_transaction``: the rule's entry point into ``transactions``.
- ``transactions/``: the tx-outside-transaction analysis, one transaction model per
  framework (Django, SQLAlchemy, Spring, Go's database/sql...).
"""
