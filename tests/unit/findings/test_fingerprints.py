"""Fingerprints survive edits that change nothing a finding is about (issue 23 item 2).

The edits are commits on a copy of a small Django app (fixtures/fingerprint_app): each must
leave ``Command.handle``'s fingerprint as it was, and the review of each edit that touches
the function against its parent must call the finding "existing"; a new write in the
sequence must make it "new". (Moving the function touches only the lines above it, so the
review leaves its finding out as outside the diff: its fingerprint is compared instead.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from auditor.config.scan import ScanConfig
from auditor.findings.fingerprints import LENGTH, normalise_call
from auditor.rules.loader import builtin_rules
from auditor.runs.review import ReviewConfig, run_review
from tests.support import FIXTURES, analyze_source, git

TX = "tx-outside-transaction"
COMMAND = "kiosk/management/commands/register_device.py"
CREATE = '        device = Device.objects.create(name=name, is_active=is_active, identifier=identifier)\n'
SAVE = '            device.save(update_fields=["identifier"])\n'
HANDLE = "    def handle(self, *args: Any, **options: Any) -> str | None:\n"


def _comment(text: str) -> str:
    return text.replace(SAVE, SAVE.rstrip("\n") + "  # persist\n")


def _moved(text: str) -> str:
    filler = "".join(f"        # line {number} of a longer docstring-free helper\n" for number in range(48))
    return text.replace(HANDLE, f"    def _helper(self) -> None:\n{filler}        return None\n\n{HANDLE}")


def _black(text: str) -> str:
    exploded = (
        "        device = Device.objects.create(\n"
        "            name=name,\n"
        "            is_active=is_active,\n"
        "            identifier=identifier,\n"
        "        )\n"
    )
    return text.replace(CREATE, exploded).replace(SAVE, "            device.save(update_fields=['identifier'])\n")


def _renamed_local(text: str) -> str:
    start = text.index(HANDLE)
    body = text[start:].replace("device.", "kiosk.").replace("device = ", "kiosk = ")
    return text[:start] + body


def _new_write(text: str) -> str:
    return text.replace(SAVE, SAVE + '            device.tokens.create(name="spare")\n')


KEEPS = {"comment": _comment, "moved": _moved, "black": _black, "renamed_local": _renamed_local}


@pytest.fixture
def kiosk_repo(tmp_path: Path) -> Path:
    root = tmp_path / "kiosk"
    shutil.copytree(FIXTURES / "fingerprint_app", root)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def _review_after(root: Path, edit) -> tuple[str, int]:
    path = root / COMMAND
    edited = edit(path.read_text(encoding="utf-8"))
    assert edited != path.read_text(encoding="utf-8")
    path.write_text(edited, encoding="utf-8")
    git(root, "commit", "-q", "-am", edit.__name__)
    scan = ScanConfig(root=root, engine="static", rules=(TX,), min_severity="low")
    reviewed = run_review(ReviewConfig(scan=scan, base="HEAD~1"))
    review = reviewed.result.review
    assert review is not None
    handle = [f for f in reviewed.result.findings if f.path == COMMAND and f.function == "Command.handle"]
    assert len(handle) == 1
    assert len(handle[0].fingerprint) == LENGTH
    return review.reviewed(handle[0].fingerprint).status, reviewed.blocking


def _handle_fingerprint(command_text: str, writes: int = 4) -> str:
    files = {path: (FIXTURES / "fingerprint_app" / path).read_text(encoding="utf-8") for path in ("kiosk/models.py", COMMAND)}
    result = analyze_source({**files, COMMAND: command_text}, builtin_rules()[TX])
    (finding,) = [f for f in result.findings if f.path == COMMAND and f.function == "Command.handle"]
    assert len(finding.sequence) == writes  # create, save, permissions.set, tokens.create (and the new one)
    return finding.fingerprint


@pytest.mark.parametrize("edit", KEEPS.values(), ids=KEEPS.keys())
def test_an_edit_that_changes_no_write_keeps_the_fingerprint(edit):
    original = (FIXTURES / "fingerprint_app" / COMMAND).read_text(encoding="utf-8")
    assert _handle_fingerprint(edit(original)) == _handle_fingerprint(original)


@pytest.mark.parametrize("edit", [_comment, _black, _renamed_local], ids=["comment", "black", "renamed_local"])
def test_the_review_of_such_an_edit_calls_the_finding_existing(kiosk_repo: Path, edit):
    status, blocking = _review_after(kiosk_repo, edit)
    assert (status, blocking) == ("existing", 0)


def test_a_write_added_to_the_sequence_makes_the_finding_new(kiosk_repo: Path):
    original = (FIXTURES / "fingerprint_app" / COMMAND).read_text(encoding="utf-8")
    assert _handle_fingerprint(_new_write(original), writes=5) != _handle_fingerprint(original)
    status, blocking = _review_after(kiosk_repo, _new_write)
    assert (status, blocking) == ("new", 1)


def test_normalise_call_drops_comments_layout_quotes_and_local_names():
    one_line = ['x = Order.objects.create(order=order, total=total)  # persist']
    exploded = ["y = Order.objects.create(", "    order=o,", "    total=t,  # the sum", ")"]
    assert normalise_call("a.py", one_line, 1) == normalise_call("a.py", exploded, 1) == "_=_.objects.create(order=_,total=_)"
    assert normalise_call("a.py", ["order.save(update_fields=['status'])"], 1) == '_.save(update_fields=["status"])'
    # ``//`` divides in Python and starts a comment elsewhere; ``self`` is never a local.
    assert normalise_call("a.py", ["self.save(n // 2)"], 1) == "self.save(_//2)"
    assert normalise_call("a.go", ['tx.Exec("UPDATE t SET a = 1") // done'], 1) == '_.Exec("UPDATE t SET a = 1")'
    triple = ['cursor.execute("""', "    UPDATE t SET a = 1", '""")']
    assert normalise_call("a.py", triple, 1) == '_.execute("\n    UPDATE t SET a = 1\n")'
    assert normalise_call("a.py", one_line, 2) == ""
