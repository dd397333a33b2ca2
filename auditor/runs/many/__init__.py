"""Scan many: audit a list of repositories in one resumable run.

Inputs: a ``ManyConfig`` — a targets spec, an output directory (the run directory) and a
``ScanConfig`` template applied to every repository. Output: a ``ManyResult``, and on disk
one report set per repository plus an index::

    OUT/state.jsonl                      done and failed (repository, window, rules, prompt hash) items
    OUT/repos/<key>/report.{json,sarif,md}
    OUT/index.json, OUT/index.md         every repository's status, windows, findings, tokens
    OUT/checkouts/<key>/                 shallow clones of git targets
    OUT/work/                            per-repository plans handed between Ray stages

- ``targets``: the targets spec parsed into keyed ``Target`` objects.
- ``checkout``: shallow clones of git targets.
- ``stages``: plan and finish one repository (through ``run_scan`` itself).
- ``state``: the resumable ``state.jsonl``.
- ``pool``: the run's engine and the endpoint pool.
- ``outcomes``: per-repository outcomes, report files and the run index.
- ``runner``: ``run_many`` and the sequential in-process runner.
- ``ray_cluster``: the same stages as a Ray Data pipeline.

Request ids are ``<key>/window-<i>`` so that the windows of every repository can share
one engine batch (and one replay recording). A repository that cannot be checked out or
planned, or a window the engine fails, is recorded with its error and never stops the
other repositories.
"""
