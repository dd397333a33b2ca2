"""Typed errors, the exit codes they map to at the CLI boundary, and the exit-code ladder
of a scan-like run.

Core code raises these errors and says what kept a run from a clean pass (a ``Shortfall``);
only the CLI turns them into exit codes (``exit_code``) and messages.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class ExitCode(IntEnum):
    """Every exit code the CLI can return, named in one place."""

    OK = 0
    FINDINGS = 1
    FATAL = 2
    INVALID_RULE = 3
    ENGINE_UNAVAILABLE = 4
    INCOMPLETE = 5
    RECALL_DEGRADED = 6
    USAGE = 64
    HANGUP = 129  # 128 + SIGHUP: stopped as by Ctrl-C (auditor.cli.signals)
    INTERRUPTED = 130  # 128 + SIGINT (Ctrl-C)
    TERMINATED = 143  # 128 + SIGTERM: stopped as by Ctrl-C


class Shortfall(StrEnum):
    """What keeps a scan, review or scan-many run from a clean pass, worst first: windows not
    fully answered, canaries missed, part of the code not audited."""

    INCOMPLETE = "incomplete"
    RECALL_DEGRADED = "recall-degraded"
    PARTIAL = "partial"


def worst_shortfall(*, incomplete: bool, recall_degraded: bool, partial: bool) -> Shortfall | None:
    """The worst of the shortfalls that hold, or None for a clean pass."""
    if incomplete:
        return Shortfall.INCOMPLETE
    if recall_degraded:
        return Shortfall.RECALL_DEGRADED
    if partial:
        return Shortfall.PARTIAL
    return None


def exit_code(shortfall: Shortfall | None, *, blocking: bool, error: bool) -> ExitCode:
    """A scan-like run's documented exit code.

    Incomplete (5) comes first, since unread code must never pass as clean, then recall
    degraded (6); with ``--error`` (``error``), partial coverage is incomplete too (5), then
    blocking findings are 1. Anything else is 0.
    """
    if shortfall is Shortfall.INCOMPLETE:
        return ExitCode.INCOMPLETE
    if shortfall is Shortfall.RECALL_DEGRADED:
        return ExitCode.RECALL_DEGRADED
    if error and shortfall is Shortfall.PARTIAL:
        return ExitCode.INCOMPLETE
    if error and blocking:
        return ExitCode.FINDINGS
    return ExitCode.OK


class AuditorError(Exception):
    """Base of every error the CLI reports as a clean message and an exit code."""

    exit_code: ExitCode = ExitCode.FATAL


class UsageError(AuditorError):
    """The user asked for something that cannot be done (bad flag values, missing path)."""

    exit_code = ExitCode.USAGE


class TokenizerError(AuditorError):
    """A tokenizer or chat template was named but could not be loaded."""


class RuleError(AuditorError):
    """A rule file is missing, unreadable or malformed."""

    exit_code = ExitCode.INVALID_RULE


class EngineUnavailable(AuditorError):
    """The requested engine cannot run here (missing extra, no GPU, server down)."""

    exit_code = ExitCode.ENGINE_UNAVAILABLE


class PackError(AuditorError):
    """Packing cannot satisfy the budget (e.g. the scaffold alone exceeds the window)."""
