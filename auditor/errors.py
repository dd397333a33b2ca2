"""Typed errors and the exit codes they map to at the CLI boundary.

Core code raises these; only the CLI turns them into exit codes and messages.
"""

from __future__ import annotations

from enum import IntEnum


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
