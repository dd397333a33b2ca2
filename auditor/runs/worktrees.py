"""Temporary git worktrees for a review, and the ones a killed review left behind.

``auditor review --head REV`` checks revisions out in detached worktrees under
``$TMPDIR/auditor-review-*/tree``, registered in the repository's ``.git/worktrees``. A
review ended by a signal removes its worktree on the way out; one killed outright (SIGKILL,
a lost machine) cannot. Each review therefore writes its process id and host name next to
its worktree, and the next review removes every auditor worktree whose owner is no longer
running, with its registration only: the user's own worktrees, even ones whose directory
is missing for a while (an unmounted disk), are never pruned. An owner on another host or
PID namespace (another container on a shared checkout) cannot be asked whether it runs; its
worktree is left alone until its owner file is a day old.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from auditor.walk.diff import GitError, run_git

_PREFIX = "auditor-review-"
_OWNER = "owner.pid"
_TREE = "tree"
# How long a worktree whose owner cannot be asked (another host or PID namespace) is kept.
_FOREIGN_OWNER_TTL_S = 24 * 3600


@contextlib.contextmanager
def review_worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``root``'s repository at ``commit``, removed (and its
    registration pruned) on exit, also after an error or a signal. Stale worktrees of
    earlier, killed reviews are removed first. Raises ``GitError`` when git fails."""
    prune_stale_worktrees(root)
    with tempfile.TemporaryDirectory(prefix=_PREFIX) as temporary:
        Path(temporary, _OWNER).write_text(f"{os.getpid()}\n{socket.gethostname()}\n", encoding="utf-8")
        tree = Path(temporary) / _TREE
        run_git(root, ["worktree", "add", "--detach", "--quiet", str(tree), commit])
        try:
            yield tree
        finally:
            try:
                run_git(root, ["worktree", "remove", "--force", str(tree)])
            except GitError:
                _forget(root, tree)


def prune_stale_worktrees(root: Path) -> tuple[Path, ...]:
    """Remove the auditor review worktrees of ``root``'s repository whose owning process
    is gone, with their registrations (no other registration is touched); the removed paths."""
    removed = []
    for tree in _registered_worktrees(root):
        if tree.name != _TREE or not tree.parent.name.startswith(_PREFIX) or _owner_alive(tree.parent):
            continue
        try:
            run_git(root, ["worktree", "remove", "--force", str(tree)])
        except GitError:
            _forget(root, tree)
        shutil.rmtree(tree.parent, ignore_errors=True)
        removed.append(tree)
    return tuple(removed)


def _forget(root: Path, tree: Path) -> None:
    """Drop git's registration of the worktree at ``tree`` alone (its administrative
    directory under the common git dir), where ``git worktree remove`` could not."""
    common = Path(os.fsdecode(run_git(root, ["rev-parse", "--git-common-dir"]).strip()))
    if not common.is_absolute():
        common = Path(root) / common
    for admin in (common / "worktrees").glob("*"):
        try:
            registered = Path((admin / "gitdir").read_text(encoding="utf-8").strip()).parent
        except OSError:
            continue
        if os.path.normpath(registered) == os.path.normpath(tree):
            shutil.rmtree(admin, ignore_errors=True)


def _registered_worktrees(root: Path) -> list[Path]:
    output = run_git(root, ["worktree", "list", "--porcelain", "-z"])
    return [Path(os.fsdecode(field[len(b"worktree "):])) for field in output.split(b"\0") if field.startswith(b"worktree ")]


def _owner_alive(directory: Path) -> bool:
    """Whether the process that wrote ``directory``'s owner file still runs (a worktree
    without one, from before owners were written or half made, counts as stale)."""
    owner = directory / _OWNER
    try:
        lines = owner.read_text(encoding="utf-8").split()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return False
    host = lines[1] if len(lines) > 1 else socket.gethostname()
    if host != socket.gethostname():
        try:
            return time.time() - owner.stat().st_mtime < _FOREIGN_OWNER_TTL_S
        except OSError:
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
