"""Scan-many targets: the targets spec (a file of local paths or git URLs, one per line, or a
directory whose subdirectories are repositories) parsed into ``Target`` objects with
unique, filesystem-safe keys.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import AuditorError, UsageError


class TargetError(AuditorError):
    """One repository could not be checked out (missing path, failed clone, unknown revision)."""


@dataclass(frozen=True)
class Target:
    """One repository to audit.

    ``source`` is an absolute local path or a git URL; ``revision`` a branch, tag or
    commit (git sources only); ``key`` the repository's unique, filesystem-safe name in
    the run (report directory, request ids, state entries).
    """

    key: str
    source: str
    revision: str | None = None
    is_git: bool = False

    @property
    def label(self) -> str:
        """The source as the user wrote it, with its revision."""
        return f"{self.source}@{self.revision}" if self.revision else self.source


_SCP_LIKE = re.compile(r"^[\w.+-]+@[\w.-]+:")


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _looks_like_git_url(source: str) -> bool:
    return "://" in source or bool(_SCP_LIKE.match(source)) or source.endswith(".git")


def _split_revision(text: str) -> tuple[str, str | None]:
    """``url#rev`` or ``url@rev`` -> (url, rev). An ``@`` names a revision only after the last
    ``/`` and ``:`` (so ``git@host:org/repo.git`` has none); revisions with ``/`` need ``#``."""
    if "#" in text:
        source, revision = text.rsplit("#", 1)
        return source, revision or None
    at = text.rfind("@")
    if at > max(text.rfind("/"), text.rfind(":")):
        return text[:at], text[at + 1 :] or None
    return text, None


def parse_target_line(text: str, base_dir: Path) -> tuple[str, str | None, bool] | None:
    """(source, revision, is_git) for one line of a targets file; None for blanks and comments.

    A line starting with ``#`` is a comment, and so is anything after whitespace + ``#``.
    Relative paths are resolved against ``base_dir``. An existing local directory is taken
    as is (even with ``@`` in its name); a local path with a revision is cloned at it.
    """
    line = re.split(r"\s#", text, maxsplit=1)[0].strip()
    if not line or line.startswith("#"):
        return None
    local = (base_dir / line).expanduser()
    if not _looks_like_git_url(line) and local.is_dir():
        return str(local.resolve()), None, False
    source, revision = _split_revision(line)
    if _looks_like_git_url(source):
        return source, revision, True
    path = str((base_dir / source).expanduser().resolve())
    return path, revision, revision is not None


def _base_name(source: str) -> str:
    tail = source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    tail = tail.removesuffix(".git")
    return _UNSAFE.sub("-", tail).strip("-.") or "repository"


def assign_keys(entries: Sequence[tuple[str, str | None, bool]]) -> tuple[Target, ...]:
    """Targets with unique keys: the repository's name (plus its revision), and a short hash
    of the source where two targets would share a name. UsageError on a repeated target."""
    seen: set[tuple[str, str | None]] = set()
    for source, revision, _ in entries:
        if (source, revision) in seen:
            raise UsageError(f"target listed twice: {source}" + (f"@{revision}" if revision else ""))
        seen.add((source, revision))
    names = [
        _base_name(source) + (f"-{_UNSAFE.sub('-', revision).strip('-.')}" if revision else "")
        for source, revision, _ in entries
    ]
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    targets = []
    for name, (source, revision, is_git) in zip(names, entries):
        if counts[name] > 1:
            digest = hashlib.sha256(f"{source}#{revision or ''}".encode()).hexdigest()[:8]
            name = f"{name}-{digest}"
        targets.append(Target(key=name, source=source, revision=revision, is_git=is_git))
    return tuple(targets)


def parse_targets(spec: Path) -> tuple[Target, ...]:
    """The repositories named by ``spec``: a targets file, or a directory of repositories
    (each non-hidden subdirectory, sorted). UsageError when ``spec`` names none."""
    if spec.is_dir():
        entries: list[tuple[str, str | None, bool]] = [
            (str(child.resolve()), None, False)
            for child in sorted(spec.iterdir())
            if child.is_dir() and not child.name.startswith(".")
        ]
        if not entries:
            raise UsageError(f"{spec}: no repository directories in it")
        return assign_keys(entries)
    if not spec.is_file():
        raise UsageError(f"targets not found: {spec} (a file of paths or git URLs, or a directory of repositories)")
    try:
        lines = spec.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read targets file {spec}: {exc}") from exc
    entries = [parsed for line in lines if (parsed := parse_target_line(line, spec.parent)) is not None]
    if not entries:
        raise UsageError(f"{spec}: no targets (one local path or git URL per line)")
    return assign_keys(entries)
