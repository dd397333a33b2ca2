"""Source whose path is in the tree but whose content is not: the walk names it, never
reads it as code.

A path can stand in for source that was never checked out here:

- a **git submodule** (a gitlink: git lists the directory, not its files), initialised or
  not, and an untracked **nested repository** (a clone inside the work tree, which git
  lists as one directory);
- a **placeholder file**: a Git LFS pointer (``version https://git-lfs.github.com/spec/v1``)
  whose object was not fetched, a git-annex pointer (an unlocked pointer file, or a link
  into ``.git/annex/objects`` whose content is absent), or a file git-crypt left encrypted.

Such a path is not audited, and since it holds (or stands for) source, the scan's
coverage is partial: auditor does not descend into submodules or nested repositories (each
is its own repository with its own history; scan it on its own), and it cannot audit what
was not fetched. Input: the walk's outcome for one path; output: a :class:`StandIn` saying
why the path is not audited, or None for an ordinary file.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SUBMODULE = "submodule"
NESTED_REPOSITORY = "nested-repository"
PLACEHOLDER = "placeholder"

# The LFS specification caps a pointer file at 1024 bytes; git-annex pointers are shorter.
_POINTER_MAX_CHARS = 1024
_LFS_POINTER = re.compile(r"\Aversion https://(?:git-lfs\.github\.com|hawser\.github\.com)/spec/v\d+\r?\n")
# "/annex/objects/" and a key: backend, fields such as "-s<size>", "--", then the name.
_ANNEX_POINTER = re.compile(r"\A/annex/objects/[A-Z0-9]+(?:-[a-zA-Z]\d+)*--[^\s/]+\r?\n?\Z")
_GIT_CRYPT_HEADER = b"\x00GITCRYPT\x00"
_GITLINK_MODE = "160000"


class WalkOutcome(Protocol):
    """The walk's outcome for one path (a ``FileEntry`` with ``text``, or a ``SkippedFile``
    with ``reason`` and ``detail``): this module reads it without importing the walker."""

    path: str


@dataclass(frozen=True)
class StandIn:
    """Why a path is not audited: ``reason`` is the skip reason's value, ``detail`` the words."""

    reason: str
    detail: str


def recognise_stand_in(root: Path, outcome: WalkOutcome) -> StandIn | None:
    """A :class:`StandIn` when the walk's ``outcome`` for a path under ``root`` is a
    submodule, a nested repository or a placeholder file, else None (cheap for the common
    case: only small files, directories, binaries and broken links are looked at)."""
    text = getattr(outcome, "text", None)
    if text is not None:
        return _placeholder_text(text)
    reason = getattr(getattr(outcome, "reason", None), "value", "")
    absolute = os.path.join(root, outcome.path)
    if reason == "not-a-file" and getattr(outcome, "detail", "") == "directory":
        return _nested_tree(root, outcome.path, absolute)
    if reason == "vanished" and not os.path.lexists(absolute) and _is_gitlink(root, outcome.path):
        return StandIn(SUBMODULE, "git submodule whose directory is missing: run `git submodule update --init`, "
                                  f"then scan it on its own (`auditor scan {outcome.path}` run in the scanned directory)")
    if reason == "binary" and _starts_with(absolute, _GIT_CRYPT_HEADER):
        return StandIn(PLACEHOLDER, "encrypted by git-crypt: run `git-crypt unlock` to audit it")
    if reason == "symlink-loop" and "/annex/objects/" in _link_target(absolute):
        return StandIn(PLACEHOLDER, "git-annex content not present: run `git annex get` to audit it")
    return None


def _placeholder_text(text: str) -> StandIn | None:
    """The stand-in a small decoded file is, if it is an LFS or git-annex pointer."""
    if len(text) > _POINTER_MAX_CHARS:
        return None
    if _LFS_POINTER.match(text):
        return StandIn(PLACEHOLDER, "Git LFS pointer, content not fetched: run `git lfs pull` to audit it")
    if _ANNEX_POINTER.match(text):
        return StandIn(PLACEHOLDER, "git-annex pointer, content not present: run `git annex get` to audit it")
    return None


def _nested_tree(root: Path, path: str, absolute: str) -> StandIn | None:
    """A directory git listed as one entry: a submodule or a nested repository."""
    try:
        if not stat.S_ISDIR(os.lstat(absolute).st_mode):
            return None  # a link to a directory: not a tree of its own
    except OSError:
        return None
    scan_alone = f"scan it on its own (`auditor scan {path}` run in the scanned directory)"
    if _is_gitlink(root, path):
        if not os.path.lexists(os.path.join(absolute, ".git")):
            return StandIn(SUBMODULE, f"git submodule, not checked out: run `git submodule update --init`, then {scan_alone}")
        return StandIn(SUBMODULE, f"git submodule, not audited with this repository: {scan_alone}")
    if os.path.lexists(os.path.join(absolute, ".git")):
        return StandIn(NESTED_REPOSITORY, f"nested git repository, not audited with this repository: {scan_alone}")
    return None


def _is_gitlink(root: Path, path: str) -> bool:
    """Whether git's index records ``path`` as a submodule (mode 160000)."""
    try:
        completed = subprocess.run(
            ["git", "-C", str(root), "--literal-pathspecs", "ls-files", "--stage", "-z", "--", path],
            capture_output=True, check=False, stdin=subprocess.DEVNULL, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(record.startswith(_GITLINK_MODE.encode()) for record in completed.stdout.split(b"\0"))


def _starts_with(absolute: str, header: bytes) -> bool:
    """Whether the file at ``absolute`` begins with ``header`` (False when unreadable)."""
    try:
        descriptor = os.open(absolute, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        return os.read(descriptor, len(header)) == header
    except OSError:
        return False
    finally:
        os.close(descriptor)


def _link_target(absolute: str) -> str:
    """What the link at ``absolute`` points to ('' when it is not a readable link)."""
    try:
        return os.readlink(absolute)
    except OSError:
        return ""
