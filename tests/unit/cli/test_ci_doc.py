"""docs/ci.md's exit-code table names every code the CLI returns, and only those."""

from __future__ import annotations

import re

from auditor.errors import ExitCode
from auditor.walk.diff import GitError, RevisionError
from tests.support import REPO_ROOT


def documented_codes() -> dict[int, str]:
    text = (REPO_ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    table = text[text.index("| Code | Meaning |"):]
    table = table[: table.index("\n\n")]
    codes: dict[int, str] = {}
    for row in table.splitlines()[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        for code in re.findall(r"\d+", cells[0]):
            codes[int(code)] = cells[1]
    return codes


def test_the_exit_code_table_lists_every_exit_code():
    assert set(documented_codes()) == {int(code) for code in ExitCode}


def test_a_bad_revision_is_documented_where_the_code_puts_it():
    codes = documented_codes()
    assert RevisionError.exit_code == ExitCode.USAGE and "--base" in codes[int(ExitCode.USAGE)]
    assert "git work tree" in codes[int(ExitCode.USAGE)]
    assert GitError.exit_code == ExitCode.FATAL and "--base" not in codes[int(ExitCode.FATAL)]
    assert "recall" in codes[int(ExitCode.RECALL_DEGRADED)]
