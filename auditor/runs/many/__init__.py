"""Scan many: audit a list of repositories in one resumable run.

Inputs: a ``ManyConfig`` (``stages``) — a targets file, an output directory (the run
directory), a ``ScanConfig`` template applied to every repository, the report formats, the
OpenAI-compatible endpoints and the Ray settings. Output: a ``ManyResult``, and on disk one
report set per repository plus an index::

    OUT/state.jsonl                      done and failed (repository, window, rules, prompt hash) items
    OUT/repos/<key>/report.{json,sarif,md}   the formats asked for
    OUT/index.json, OUT/index.md         every repository's status, windows, findings, tokens
    OUT/checkouts/<key>/                 shallow clones of git targets
    OUT/work/<key>.plan.pickle           per-repository plans handed between Ray stages

- ``targets``: the targets file parsed into keyed ``Target`` objects.
- ``checkout``: shallow clones of git targets.
- ``stages``: ``ManyConfig``, and plan and finish one repository through the scan's own
  ``plan_scan``/``finish_scan``, so each report is exactly ``auditor scan``'s.
- ``state``: the resumable ``state.jsonl``.
- ``outcomes``: per-repository outcomes, report files and the run index.
- ``runner``: ``run_many`` and the sequential in-process runner.
- ``ray_cluster``: the same stages as a Ray Data pipeline (generation actors hold the
  engine; for ``openai``, the endpoint pool of ``auditor.engine.pool``).

Request ids are ``<key>/window-<i>`` so that the windows of every repository can share
one engine batch (and one replay recording). A repository that cannot be checked out or
planned, or a window the engine fails, is recorded with its error and never stops the
other repositories.
"""
