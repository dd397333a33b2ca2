"""Fingerprint stability on a real repository's history: do edits that change no write keep
every finding "existing"?

For each edit the script clones REPO (a git work tree, e.g. saleor) into a temporary
directory, applies the edit across the repository as one commit, and reviews it with the
static pass (``auditor review --base HEAD~1``, as CI does). It prints, per edit, the
findings the review calls new and existing, and how many head findings have a fingerprint
the base lacks (the review only lists findings on the change; this counts all of them).

    python benchmarks/bench_fingerprint_edits.py REPO [--edit comment --edit moved ...]

Edits:
- ``comment``: ``  # persist`` appended to every ``.save(...)`` line without a comment
  (issue 23's report: one saleor finding became new and failed ``--error``);
- ``moved``: 50 comment lines inserted at the top of every file with a ``.save(`` call,
  moving every function in it 50 lines down;
- ``new-write``: the control — ``AuditEvent.objects.create(...)`` added below the first
  ``.save(`` line of each of the first 20 such files (a write added to the sequence: the
  findings whose path runs through it must turn new). A repeated write of the same object
  would not do: the static pass counts it once.

Not a timed benchmark. A run on saleor is reported in the lead's notes for issue 23.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from auditor.config.scan import ScanConfig
from auditor.runs.review import ReviewConfig, run_review
from auditor.runs.scan import run_scan

SAVE_LINE = re.compile(r"^(?P<indent>\s*)[^#\n]*\.save\([^#\n]*\)\s*$")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout


def _python_files(root: Path) -> list[Path]:
    return [root / path for path in _git(root, "ls-files", "*.py").split() if "/tests/" not in f"/{path}"]


def _comment(lines: list[str]) -> list[str]:
    return [line + "  # persist" if SAVE_LINE.match(line) else line for line in lines]


def _moved(lines: list[str]) -> list[str]:
    return [f"# moved: line {number} of 50" for number in range(50)] + lines


def _new_write(lines: list[str]) -> list[str]:
    for index, line in enumerate(lines):
        match = SAVE_LINE.match(line)
        if match:
            added = f'{match.group("indent")}AuditEvent.objects.create(note="bench")'
            return [*lines[: index + 1], added, *lines[index + 1 :]]
    return lines


EDITS: dict[str, tuple[Callable[[list[str]], list[str]], int | None]] = {
    "comment": (_comment, None),
    "moved": (_moved, None),
    "new-write": (_new_write, 20),
}


def _apply(root: Path, edit: Callable[[list[str]], list[str]], limit: int | None) -> int:
    changed = 0
    for path in _python_files(root):
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        if ".save(" not in text:
            continue
        lines = text.split("\n")
        edited = edit(lines)
        if edited != lines:
            path.write_text("\n".join(edited), encoding="utf-8", errors="surrogateescape")
            changed += 1
            if limit is not None and changed >= limit:
                break
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--edit", action="append", choices=sorted(EDITS), help="edits to try (default: all)")
    args = parser.parse_args()
    for name in args.edit or list(EDITS):
        edit, limit = EDITS[name]
        with tempfile.TemporaryDirectory(prefix="fingerprint-edits-") as scratch:
            root = Path(scratch) / "repo"
            subprocess.run(["git", "clone", "-q", "--shared", str(args.repo.resolve()), str(root)], check=True)
            files = _apply(root, edit, limit)
            _git(root, "commit", "-q", "-am", f"bench: {name}")
            scan = ScanConfig(root=root, engine="static", rules=("tx-outside-transaction",), min_severity="low")
            reviewed = run_review(ReviewConfig(scan=scan, base="HEAD~1"))
            review = reviewed.result.review
            assert review is not None
            base_tree = Path(scratch) / "base"
            _git(root, "worktree", "add", "-q", str(base_tree), "HEAD~1")
            base = {finding.fingerprint for finding in run_scan(replace(scan, root=base_tree)).findings}
            head = {finding.fingerprint for finding in run_scan(scan).findings}
            print(f"{name}: {files} file(s) edited; review: {review.new_count} new, {review.existing_count} existing, "
                  f"{review.outside_diff} elsewhere; {len(head - base)} of {len(head)} head fingerprint(s) not on the base")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
