"""The configuration of one scan: a frozen ``ScanConfig`` that every scan-like command (scan,
pack, review, scan-many) builds from the same options, and the stage options derived from
it. Light on purpose: ``auditor pack`` builds one without importing the scan run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from auditor import defaults
from auditor.engine.base import EngineSettings
from auditor.rules.severity import Severity
from auditor.tokens.tokenizer import TokenizerRequest
from auditor.walk.walker import WalkOptions

if TYPE_CHECKING:
    from auditor.pack.change import ChangeScope
    from auditor.pack.packer import PackOptions


def tree_cache_scope(root: Path, name: str | None = None) -> str:
    """The name a tree's caches (index pack, token counts, relevance scores, seed chains) are
    kept under: ``name`` when given (review's temporary worktrees), else the resolved root.
    Never raises: a looping link resolves to itself here, and the walk names it."""
    return name or os.path.realpath(root)


@dataclass(frozen=True)
class WindowOptions:
    """How windows are cut and rendered (the window length itself is the model's, in
    ``EngineSettings.max_model_len``). ``seed_paths`` are carried first, in this order (a
    review's changed files); ``change`` makes a diff-scoped review's pack (only the change's
    subgraph, the changed lines listed in every prompt)."""

    output_tokens: int = defaults.OUTPUT_TOKENS
    probe_reserve_tokens: int = defaults.CANARY_RESERVE_TOKENS
    thinking: bool = True
    max_windows: int = defaults.MAX_WINDOWS
    seed_paths: tuple[str, ...] = ()
    # Stop before sending when the planned prompt tokens exceed this many times the tokens
    # of the code audited (auditor.pack.guard); 0: only a notice, above the default ratio.
    max_token_ratio: float = 0.0
    change: ChangeScope | None = None


@dataclass(frozen=True)
class ScanConfig:
    """Everything one scan needs, resolved from flags and configuration; each value lives in
    exactly one field (the model and its window length in ``engine_settings``, which the
    tokenizer and the packer read from there)."""

    root: Path
    rules: tuple[str, ...] = ()
    engine: str = "auto"
    engine_settings: EngineSettings = field(default_factory=EngineSettings)
    tokenizer: str | None = None  # an explicit tokenizer directory; else the model's
    window: WindowOptions = field(default_factory=WindowOptions)
    walk: WalkOptions = field(default_factory=WalkOptions)
    parse_budget_s: float | None = defaults.PARSE_BUDGET_S  # seconds one file's indexing may take (None: no limit)
    use_cache: bool = True
    static: bool = True
    # The lowest severity of static findings reported, and whether test code, fixtures and
    # dev-data commands are audited (entry points for the static pass, packed for the model).
    min_severity: Severity = Severity.HIGH
    include_tests: bool = False
    # The project's transaction-model files (relative to ``root`` unless absolute), read by
    # the static pass after the built-in ones.
    tx_models: tuple[Path, ...] = ()
    probes: int = defaults.CANARIES
    recall_threshold: float = defaults.RECALL_THRESHOLD
    baseline: Path | None = None
    # Whether disputed and unverified findings fail ``--error`` too (``--block-disputed``).
    block_disputed: bool = False
    # The name this tree's caches are kept under (default: its resolved root); review gives
    # its temporary worktrees stable names so that the next review finds them again.
    cache_scope: str | None = None
    # The directory under ``root`` ("" or ending in "/") whose findings, coverage and files
    # not audited are reported: a subdirectory scanned within its whole repository, whose
    # call graph sees the callers outside it (auditor.runs.scope). Paths stay root-relative.
    report_under: str = ""

    @property
    def scope(self) -> str:
        """The name this tree's caches are kept under (``tree_cache_scope``)."""
        return tree_cache_scope(self.root, self.cache_scope)

    @property
    def tx_model_paths(self) -> tuple[Path, ...]:
        """The project's transaction-model files, relative ones resolved against ``root``."""
        return tuple(path if path.is_absolute() else self.root / path for path in self.tx_models)

    @property
    def absolute_tx_models(self) -> tuple[Path, ...]:
        """``tx_model_paths`` resolved to absolute paths: what a scan of another root (the
        repository's top, a base worktree) reads the same rows from."""
        return tuple(path.resolve() for path in self.tx_model_paths)

    @property
    def pack(self) -> PackOptions:
        """The packer's options for this scan."""
        # Imported here: a memoized pack (auditor.runs.pack_memo) never loads the packer.
        from auditor.pack.packer import PackOptions

        window = self.window
        return PackOptions(
            max_model_len=self.engine_settings.max_model_len, output_tokens=window.output_tokens,
            probe_reserve_tokens=window.probe_reserve_tokens, thinking=window.thinking,
            max_windows=window.max_windows, seed_paths=window.seed_paths,
            include=("tests", "fixtures", "seed") if self.include_tests else (), change=window.change,
        )

    @property
    def tokenizer_request(self) -> TokenizerRequest:
        """Which tokenizer counts this scan's windows: ``tokenizer``, else the model's."""
        return TokenizerRequest(tokenizer=self.tokenizer, model=self.engine_settings.model)
