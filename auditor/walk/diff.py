"""Diff: what a change touches, from git — changed files, their new-side line ranges, and
renames followed.

Inputs: the scan root (any directory inside a git work tree), a base revision and an
optional head revision (None: the working tree, tracked files). Output: ``Diff`` with one
``ChangedFile`` per added, modified, renamed or deleted file, paths relative to the scan
root (files outside it are left out), hunks as new-side line ranges (``git diff -M -U0``)
and the rename map from new to old path.

Two git calls share one file order: ``--name-status -z`` gives exact paths (no quoting)
and statuses, ``-U0`` gives the hunks; git emits one ``diff --git`` header per file pair
in the same order for both, so the hunks are matched to paths by position, never by
parsing quoted file names.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from auditor.errors import AuditorError, ExitCode


class GitError(AuditorError):
    """git is missing, the path is not in a work tree, or a revision does not resolve."""


class RevisionError(GitError):
    """The user named a revision this repository does not have, or a directory outside a
    git work tree: a usage error (exit 64)."""

    exit_code = ExitCode.USAGE


_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
_DIFF_OPTIONS = ("-M", "--no-color", "--no-ext-diff", "--no-textconv", "--relative", "--ignore-submodules")


@dataclass(frozen=True)
class Hunk:
    """New-side lines of one change: ``count`` lines from ``start``.

    A pure deletion has ``count`` 0 and ``start`` the line after which lines were removed
    (0 when removed at the top of the file), as git reports it.
    """

    start: int
    count: int

    @property
    def lines(self) -> range:
        """The new-side line numbers this hunk added or changed (empty for a deletion)."""
        return range(self.start, self.start + self.count)

    def overlaps(self, first: int, last: int) -> bool:
        """Whether this hunk changes the span ``first..last`` (a deletion counts inside it,
        including one right after its first line)."""
        if self.count:
            return self.start <= last and first <= self.start + self.count - 1
        return first <= self.start < last


@dataclass(frozen=True)
class ChangedFile:
    """One file of the diff: status "A", "M", "R", "D" or "T"; ``old_path`` differs from
    ``path`` for a rename; ``path`` is the old path for a deletion."""

    path: str
    old_path: str
    status: str
    hunks: tuple[Hunk, ...]

    @property
    def changed_lines(self) -> frozenset[int]:
        """Every new-side line added or changed."""
        return frozenset(line for hunk in self.hunks for line in hunk.lines)

    def touches_line(self, line: int) -> bool:
        """Whether ``line`` (new side) was added or changed."""
        return any(line in hunk.lines for hunk in self.hunks)

    def touches_span(self, first: int, last: int) -> bool:
        """Whether anything in lines ``first..last`` (new side) was added, changed or deleted."""
        return any(hunk.overlaps(first, last) for hunk in self.hunks)


@dataclass(frozen=True)
class Diff:
    """The change from ``base`` to ``head`` (a commit id, or "working tree at <HEAD>" when no
    head revision was given)."""

    base: str
    head: str
    files: tuple[ChangedFile, ...]

    @property
    def changed(self) -> tuple[ChangedFile, ...]:
        """Files present on the head side (everything but deletions), by path."""
        return tuple(changed for changed in self.files if changed.status != "D")

    @property
    def deleted(self) -> tuple[str, ...]:
        """Paths deleted by the change, sorted."""
        return tuple(sorted(changed.path for changed in self.files if changed.status == "D"))

    @property
    def renames(self) -> dict[str, str]:
        """New path -> old path for every renamed file."""
        return {changed.path: changed.old_path for changed in self.files if changed.status == "R"}

    def file(self, path: str) -> ChangedFile | None:
        """The head-side changed file at ``path``, or None when the change leaves it alone."""
        return next((changed for changed in self.changed if changed.path == path), None)

    def under(self, prefix: str) -> Diff:
        """The change to files under ``prefix`` (a directory ending in "/"; "" keeps all)."""
        if not prefix:
            return self
        return replace(self, files=tuple(changed for changed in self.files if changed.path.startswith(prefix)))


def run_git(root: Path, arguments: Sequence[str]) -> bytes:
    """Run ``git -C root …`` and return stdout; ``GitError`` with git's message on failure."""
    command = ["git", "-C", str(root), *arguments]
    try:
        completed = subprocess.run(command, capture_output=True, check=False)
    except FileNotFoundError as error:
        raise GitError("git is not installed or not on PATH") from error
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip() or f"exit status {completed.returncode}"
        raise GitError(f"git {' '.join(arguments[:2])} failed in {root}: {message}")
    return completed.stdout


def resolve_revision(root: Path, revision: str) -> str:
    """The commit id ``revision`` names; ``GitError`` when it does not resolve."""
    if revision.startswith("-"):
        raise RevisionError(f"not a revision: {revision!r}")
    try:
        output = run_git(root, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"])
    except GitError as error:
        raise RevisionError(f"unknown revision {revision!r} in {root} (not a commit this repository has)") from error
    return output.decode("ascii").strip()


_HOSTED_REMOTE = re.compile(
    r"^(?:https://(?:[^@/]+@)?|ssh://git@|git@)(github\.com|gitlab\.com)[:/]([\w.-]+(?:/[\w.-]+)+)/?$"
)


def infer_link_base(root: Path, *, from_top: bool = False) -> str | None:
    """``https://host/owner/repo/blob/COMMIT/<root's path in the repository>/`` (with
    ``from_top``, the repository's top: for paths relative to it) when ``root`` is in a git work
    tree whose ``origin`` is on GitHub or GitLab; else None (links stay relative).
    Markdown links then work in a pull-request comment."""
    try:
        top = Path(run_git(root, ["rev-parse", "--show-toplevel"]).decode("utf-8").strip())
        commit = run_git(root, ["rev-parse", "HEAD"]).decode("ascii").strip()
        remote = run_git(root, ["remote", "get-url", "origin"]).decode("utf-8").strip()
    except (GitError, UnicodeDecodeError):
        return None
    match = _HOSTED_REMOTE.match(remote)
    if match is None:
        return None
    host, project = match.groups()
    project = project.removesuffix(".git")
    try:
        inside = root.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        return None
    blob = "blob" if host == "github.com" else "-/blob"
    prefix = "" if inside == "." or from_top else f"{inside}/"
    return f"https://{host}/{project}/{blob}/{commit}/{prefix}"


def repository_top(root: Path) -> tuple[Path, str]:
    """The top directory of the git work tree holding ``root``, and ``root``'s path inside
    it ("" at the top, else ending in "/"). Raises ``RevisionError`` when ``root`` is not in
    a git work tree."""
    try:
        top = run_git(root, ["rev-parse", "--show-toplevel"]).decode("utf-8", "surrogateescape").strip()
        prefix = run_git(root, ["rev-parse", "--show-prefix"]).decode("utf-8", "surrogateescape").strip()
    except GitError as error:
        if "not a git repository" not in str(error).lower():
            raise
        raise RevisionError(f"{root} is not inside a git work tree: review compares two revisions of one") from error
    return Path(top), prefix


def compute_diff(root: Path, base: str, head: str | None = None) -> Diff:
    """The change from ``base`` to ``head`` (or to the working tree) under ``root``.

    Renames are followed (``-M``), paths are relative to ``root`` and files outside it are
    left out. Raises ``GitError`` when ``root`` is not in a git work tree or a revision
    does not resolve.
    """
    try:
        run_git(root, ["rev-parse", "--is-inside-work-tree"])
    except GitError as error:
        if "not a git repository" not in str(error).lower():
            raise
        raise RevisionError(f"{root} is not inside a git work tree: review compares two revisions of one") from error
    base_commit = resolve_revision(root, base)
    revisions = [base_commit] if head is None else [base_commit, resolve_revision(root, head)]
    names = run_git(root, ["diff", *_DIFF_OPTIONS, "--name-status", "-z", *revisions, "--"])
    patch = run_git(root, ["diff", *_DIFF_OPTIONS, "-U0", *revisions, "--"])
    entries = _parse_name_status(names)
    hunks = _parse_hunks(patch)
    # A type change (file <-> symlink) is one name-status entry but two patches: the old
    # side deleted, then the new side created; the second one holds the new-side lines.
    type_changes = sum(1 for status, _, _ in entries if status == "T")
    split_type_changes = type_changes > 0 and len(hunks) == len(entries) + type_changes
    if len(hunks) != len(entries) and not split_type_changes:
        raise GitError(f"git diff listed {len(entries)} files but produced {len(hunks)} patches")
    files: list[ChangedFile] = []
    position = 0
    for status, old_path, path in entries:
        if status == "T" and split_type_changes:
            position += 1
        files.append(ChangedFile(path=path, old_path=old_path, status=status, hunks=hunks[position]))
        position += 1
    return Diff(
        base=base_commit,
        head=revisions[1] if head is not None else f"working tree at {resolve_revision(root, 'HEAD')[:12]}",
        files=tuple(sorted(files, key=lambda changed: (changed.path, changed.status))),
    )


def _parse_name_status(output: bytes) -> list[tuple[str, str, str]]:
    """(status letter, old path, new path) per file from ``--name-status -z`` output."""
    # A name that is not UTF-8 is shown escaped, as the walk shows it (reports are UTF-8 text).
    fields = [field.decode("utf-8", "backslashreplace") for field in output.split(b"\0")]
    entries: list[tuple[str, str, str]] = []
    position = 0
    while position < len(fields) and fields[position]:
        status = fields[position][0]
        if status in ("R", "C"):
            old_path, new_path = fields[position + 1], fields[position + 2]
            position += 3
        else:
            old_path = new_path = fields[position + 1]
            position += 2
        entries.append(("A" if status == "C" else status, old_path, new_path))
    return entries


def _parse_hunks(patch: bytes) -> list[tuple[Hunk, ...]]:
    """The hunks of each file of a ``-U0`` patch, one tuple per ``diff --git`` header."""
    files: list[list[Hunk]] = []
    for line in patch.split(b"\n"):
        if line.startswith(b"diff --git "):
            files.append([])
            continue
        match = _HUNK.match(line)
        if match is not None and files:
            count = int(match.group(2)) if match.group(2) is not None else 1
            files[-1].append(Hunk(start=int(match.group(1)), count=count))
    return [tuple(hunks) for hunks in files]
