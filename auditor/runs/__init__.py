"""Runs: the orchestration of a scan, a review and many scans, over the stages.

- ``prepare``: walk, index and call graph for one tree (``prepare_repository``), and
  packing a prepared tree.
- ``scan``: ``plan_scan`` / ``finish_scan`` / ``run_scan``: one repository end to end.
- ``judge``: the model as judge of the static candidates (verdicts applied to findings).
- ``review``: a change reviewed: the base and head trees scanned, findings the change
  touches (the git diff itself is ``auditor.walk.diff``); ``worktrees``: the temporary
  worktrees it checks revisions out in, and those a killed review left behind.
- ``many/``: scan-many, sequential or as a Ray pipeline.

The configuration a run is given is ``auditor.config``; the command line that builds it,
``auditor.cli``. Only the CLI imports this package.
"""
