"""Temporary git worktrees for a review, and the ones a killed review left behind.

``auditor review --head REV`` checks revisions out in detached worktrees under
``$TMPDIR/auditor-review-*/tree``, registered in the repository's ``.git/worktrees``. A
review ended by a signal removes its worktree on the way out; one killed outright (SIGKILL,
a lost machine) cannot. Each review therefore writes its process id next to its worktree,
and the next review removes every auditor worktree whose owner is no longer running, then
prunes registrations whose directory is gone. Worktrees of a live review are left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from auditor.walk.diff import GitError, run_git

_PREFIX = "auditor-review-"
_OWNER = "owner.pid"
_TREE = "tree"


@contextlib.contextmanager
def review_worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``root``'s repository at ``commit``, removed (and its
    registration pruned) on exit, also after an error or a signal. Stale worktrees of
    earlier, killed reviews are removed first. Raises ``GitError`` when git fails."""
    prune_stale_worktrees(root)
    with tempfile.TemporaryDirectory(prefix=_PREFIX) as temporary:
        Path(temporary, _OWNER).write_text(f"{os.getpid()}\n", encoding="ascii")
        tree = Path(temporary) / _TREE
        run_git(root, ["worktree", "add", "--detach", "--quiet", str(tree), commit])
        try:
            yield tree
        finally:
            try:
                run_git(root, ["worktree", "remove", "--force", str(tree)])
            except GitError:
                run_git(root, ["worktree", "prune"])


def prune_stale_worktrees(root: Path) -> tuple[Path, ...]:
    """Remove the auditor review worktrees of ``root``'s repository whose owning process
    is gone, and prune registrations whose directory no longer exists; the removed paths."""
    removed = []
    for tree in _registered_worktrees(root):
        if tree.name != _TREE or not tree.parent.name.startswith(_PREFIX) or _owner_alive(tree.parent):
            continue
        with contextlib.suppress(GitError):
            run_git(root, ["worktree", "remove", "--force", str(tree)])
        shutil.rmtree(tree.parent, ignore_errors=True)
        removed.append(tree)
    run_git(root, ["worktree", "prune"])
    return tuple(removed)


def _registered_worktrees(root: Path) -> list[Path]:
    output = run_git(root, ["worktree", "list", "--porcelain", "-z"])
    return [Path(os.fsdecode(field[len(b"worktree "):])) for field in output.split(b"\0") if field.startswith(b"worktree ")]


def _owner_alive(directory: Path) -> bool:
    """Whether the process that wrote ``directory``'s owner file still runs (a worktree
    without one, from before owners were written or half made, counts as stale)."""
    try:
        pid = int((directory / _OWNER).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True
