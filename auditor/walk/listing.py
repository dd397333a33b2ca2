"""Listing: the candidate paths below a scan root, before any is classified.

Inside a git work tree the candidates are exactly what ``git ls-files -co
--exclude-standard`` lists (tracked plus untracked-but-not-ignored); outside git, or when
git fails, a filesystem walk applies the same ``.gitignore`` rules through
:class:`~auditor.walk.ignore.IgnoreTree`. Gitignored paths are not candidates and are not
reported; directories that cannot be listed are (as :class:`SkippedFile`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import UsageError
from auditor.progress import ProgressCallback, ProgressEvent
from auditor.walk.files import SkippedFile, SkipReason
from auditor.walk.ignore import GITIGNORE, IgnoreFile, IgnoreTree, parse_ignore_file, read_ignore_file

__all__ = ["Listing", "list_candidates"]

_STAGE = "walk"


@dataclass(frozen=True)
class Listing:
    """Candidate paths (root-relative) plus directories that could not be listed, and
    whether git listed them (so none is a device, a pipe or a socket)."""

    git_root: Path | None
    candidates: tuple[str, ...]
    skipped: tuple[SkippedFile, ...]
    listed_by_git: bool = False


class _GitUnavailable(Exception):
    """git could not give its view of the tree; the message says why."""


class _GitMissing(_GitUnavailable):
    """The git executable could not be started at all."""


def _run_git(root: Path, *arguments: str) -> bytes:
    """Run git in ``root`` and return its stdout, or raise :class:`_GitUnavailable`."""
    environment = {**os.environ, "LC_ALL": "C", "LANGUAGE": "C"}
    try:
        completed = subprocess.run(
            ["git", "-C", str(root), *arguments],
            capture_output=True,
            check=False,
            env=environment,
            stdin=subprocess.DEVNULL,
        )
    except OSError as error:
        raise _GitMissing(f"git could not be run: {error.strerror or error}") from error
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _GitUnavailable(message[0] if message else f"git exited with status {completed.returncode}")
    return completed.stdout


def _git_toplevel(root: Path) -> Path | None:
    """The work-tree top containing ``root``, None outside git; raises :class:`_GitUnavailable`
    when git fails for another reason (missing, dubious ownership, ...)."""
    try:
        output = _run_git(root, "rev-parse", "--show-toplevel")
    except _GitMissing:
        # Without git, only a .git entry says whether git's view was wanted.
        if _looks_like_git(root):
            raise
        return None
    except _GitUnavailable as error:
        if "not a git repository" in str(error).lower():
            return None
        raise
    top = os.fsdecode(output.rstrip(b"\n"))
    if not top:
        raise _GitUnavailable("git did not report a work-tree top")
    return Path(top).resolve()


def _looks_like_git(root: Path) -> bool:
    """Whether ``root`` or a directory above it has a ``.git`` entry."""
    return any(os.path.lexists(directory / ".git") for directory in (root, *root.parents))


def _list_with_git(root: Path) -> tuple[str, ...]:
    """Paths git lists below ``root``: tracked plus untracked-but-not-ignored."""
    output = _run_git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    paths = {os.fsdecode(item).rstrip("/") for item in output.split(b"\0") if item}
    # Unmerged files are listed once per stage; the set removes the duplicates.
    return tuple(sorted(paths))


def _list_with_filesystem(root: Path, use_gitignore: bool) -> Listing:
    """Walk the tree (never following directory links, never entering ``.git``), pruning
    what the ``.gitignore`` files (and ``.git/info/exclude`` at the root) exclude."""
    root_text = str(root)
    gitignore: IgnoreTree | None = None
    if use_gitignore:
        extra: tuple[IgnoreFile, ...] = ()
        info_exclude = ".git/info/exclude"
        raw = read_ignore_file(os.path.join(root_text, info_exclude))
        if raw is not None:
            extra = (parse_ignore_file(info_exclude, raw),)
        gitignore = IgnoreTree(root_text, GITIGNORE, extra)
    candidates: list[str] = []
    skipped: list[SkippedFile] = []
    pending = [""]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(os.path.join(root_text, directory) if directory else root_text) as scan:
                entries = list(scan)
        except FileNotFoundError:
            skipped.append(SkippedFile(directory, SkipReason.VANISHED, "directory disappeared during the walk"))
            continue
        except OSError as error:
            if not directory:
                raise UsageError(f"cannot read directory {root}: {error.strerror or error}") from error
            skipped.append(SkippedFile(directory, SkipReason.UNREADABLE, f"cannot list directory: {error.strerror}"))
            continue
        for entry in entries:
            if entry.name == ".git":
                continue
            path = f"{directory}/{entry.name}" if directory else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if gitignore is not None and gitignore.match(path, is_dir) is not None:
                continue
            if is_dir:
                pending.append(path)
            else:
                candidates.append(path)
    return Listing(None, tuple(sorted(candidates)), tuple(skipped))


def list_candidates(root: Path, use_gitignore: bool, progress: ProgressCallback) -> Listing:
    """git's view of the candidates when ``root`` is in a work tree, else the filesystem's."""
    try:
        git_root = _git_toplevel(root)
    except _GitUnavailable as error:
        progress(
            ProgressEvent(
                _STAGE,
                message=f"git is unavailable ({error}); applying .gitignore rules without it",
            )
        )
        return _list_with_filesystem(root, use_gitignore)
    if git_root is None or not use_gitignore:
        listing = _list_with_filesystem(root, use_gitignore)
        return Listing(git_root, listing.candidates, listing.skipped)
    try:
        candidates = _list_with_git(root)
    except _GitUnavailable as error:
        progress(
            ProgressEvent(
                _STAGE,
                message=f"git ls-files failed ({error}); applying .gitignore rules without it",
            )
        )
        listing = _list_with_filesystem(root, use_gitignore)
        return Listing(git_root, listing.candidates, listing.skipped)
    if not candidates:
        progress(ProgressEvent(_STAGE, message=f"git lists no files under {root} (is it ignored?)"))
    return Listing(git_root, candidates, (), listed_by_git=True)

