"""Checkouts of git targets: shallow clones under the run directory, reused when present
and whole, discarded and re-cloned when a previous clone was cut short.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from auditor.runs.many.targets import Target, TargetError

logger = logging.getLogger(__name__)

GIT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Checkout:
    """Where a target's files are, and the commit checked out (None for a plain local path)."""

    root: Path
    commit: str | None


# git's whole message is shown (the cause is often on the first line, e.g. "fatal: could not
# read Username", the last one only says "Could not read from remote repository"), bounded.
_GIT_MESSAGE_CHARS = 2000


def git_failure(stderr: str, returncode: int) -> str:
    """git's stderr as one line (its lines joined with " | "), cut to a bound; the exit
    status when git said nothing."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return f"exit {returncode}"
    message = " | ".join(lines)
    return message if len(message) <= _GIT_MESSAGE_CHARS else message[: _GIT_MESSAGE_CHARS - 3] + "..."


def _git(args: Sequence[str], cwd: Path) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"git {args[0]} failed: {exc}") from exc
    if done.returncode != 0:
        raise TargetError(f"git {args[0]} failed: {git_failure(done.stderr, done.returncode)}")
    return done.stdout.strip()


def checkout_target(target: Target, checkouts_dir: Path) -> Checkout:
    """The target's files on disk: a local path as is, a git source fetched shallowly
    (depth 1, at its revision or the remote HEAD) into ``checkouts_dir/<key>``.

    A checkout left by an earlier run of the same run directory is reused. Raises
    ``TargetError`` when the path is missing or git fails.
    """
    if not target.is_git:
        root = Path(target.source)
        if not root.is_dir():
            raise TargetError(f"{target.source}: not a directory")
        return Checkout(root=root, commit=None)
    destination = checkouts_dir / target.key
    if (destination / ".git").is_dir():
        try:
            return Checkout(root=destination, commit=_git(["rev-parse", "HEAD"], destination))
        except TargetError:
            logger.info("discarding the unfinished checkout %s", destination)
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    try:
        _git(["init", "--quiet"], destination)
        _git(["fetch", "--quiet", "--depth", "1", target.source, target.revision or "HEAD"], destination)
        _git(["checkout", "--quiet", "--detach", "FETCH_HEAD"], destination)
        commit = _git(["rev-parse", "HEAD"], destination)
    except TargetError:
        shutil.rmtree(destination, ignore_errors=True)
        raise
    return Checkout(root=destination, commit=commit)
