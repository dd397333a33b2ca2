"""Inline ignore comments (Python, JavaScript, Go, SQL syntax) and baseline files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.findings.fingerprints import SCHEME, fingerprint, normalise_call
from auditor.findings.model import ChainStep, Finding
from auditor.findings.suppress import (
    BaselineError,
    apply_suppressions,
    find_ignore_comments,
    read_baseline,
    write_baseline,
)

TX = "tx-outside-transaction"
SQL = "sql-injection"
KNOWN = {TX, SQL}


def make_finding(path: str, line: int, function: str, text: str, rule: str = TX) -> Finding:
    return Finding(
        rule=rule,
        severity="high",
        title="write outside a transaction",
        path=path,
        line=line,
        function=function,
        chain=(ChainStep(path, line, function, True),),
        explanation="",
        found_by=("static",),
        fingerprint=fingerprint(rule, path, function, (normalise_call(path, [text], 1),)),
    )


PYTHON = """\
def save_order(order):
    order.save()  # auditor: ignore[tx-outside-transaction] idempotent, retried by the queue


def save_user(user):
    # auditor: ignore[tx-outside-transaction] single row, no partial state
    user.save()


def save_item(item):
    item.save()
"""

JAVASCRIPT = """\
function saveOrder(order) {
  // auditor: ignore[tx-outside-transaction] upsert is atomic
  return db.orders.insertOne(order);
}
function saveUser(user) {
  return db.users.insertOne(user); /* auditor: ignore[tx-outside-transaction] audit log only */
}
function saveItem(item) {
  return db.items.insertOne(item);
}
"""

GO = """\
func SaveOrder(db *sql.DB) error {
\t// auditor: ignore[tx-outside-transaction, sql-injection] constant statement
\t_, err := db.Exec("UPDATE orders SET seen = 1")
\treturn err
}
"""


def test_python_comments_on_the_sink_line_and_the_line_above():
    findings = [
        make_finding("app/store.py", 2, "save_order", "    order.save()"),
        make_finding("app/store.py", 7, "save_user", "    user.save()"),
        make_finding("app/store.py", 11, "save_item", "    item.save()"),
    ]
    outcome = apply_suppressions(findings, {"app/store.py": PYTHON}, KNOWN)
    assert [f.function for f in outcome.kept] == ["save_item"]
    reasons = {item.finding.function: (item.source, item.reason, item.location) for item in outcome.suppressed}
    assert reasons == {
        "save_order": ("inline", "ignore[tx-outside-transaction] idempotent, retried by the queue", "app/store.py:2"),
        "save_user": ("inline", "ignore[tx-outside-transaction] single row, no partial state", "app/store.py:6"),
    }
    assert outcome.warnings == ()


def test_javascript_line_and_block_comments():
    findings = [
        make_finding("web/store.js", 3, "saveOrder", "  return db.orders.insertOne(order);"),
        make_finding("web/store.js", 6, "saveUser", "  return db.users.insertOne(user);"),
        make_finding("web/store.js", 9, "saveItem", "  return db.items.insertOne(item);"),
    ]
    outcome = apply_suppressions(findings, {"web/store.js": JAVASCRIPT}, KNOWN)
    assert [f.function for f in outcome.kept] == ["saveItem"]
    reasons = sorted(item.reason for item in outcome.suppressed)
    # The block comment's closing "*/" is not part of the reason.
    assert reasons == ["ignore[tx-outside-transaction] audit log only", "ignore[tx-outside-transaction] upsert is atomic"]


def test_go_comment_naming_several_rules_covers_each_of_them():
    findings = [
        make_finding("svc/orders.go", 3, "SaveOrder", '\t_, err := db.Exec("UPDATE orders SET seen = 1")'),
        make_finding("svc/orders.go", 3, "SaveOrder", '\t_, err := db.Exec("UPDATE orders SET seen = 1")', rule=SQL),
    ]
    outcome = apply_suppressions(findings, {"svc/orders.go": GO}, KNOWN)
    assert outcome.kept == ()
    assert sorted(item.finding.rule for item in outcome.suppressed) == [SQL, TX]


def test_comment_for_another_rule_or_too_far_away_does_not_suppress():
    text = "# auditor: ignore[sql-injection] reviewed\n\ndef f(order):\n    order.save()  # auditor: ignore[sql-injection] x\n"
    finding = make_finding("a.py", 4, "f", "    order.save()")
    assert apply_suppressions([finding], {"a.py": text}, KNOWN).kept == (finding,)
    # A trailing comment on the line above belongs to that line, not to the sink below it.
    text = "x = 1  # auditor: ignore[tx-outside-transaction] x\norder.save()\n"
    finding = make_finding("b.py", 2, "<module>", "order.save()")
    assert apply_suppressions([finding], {"b.py": text}, KNOWN).kept == (finding,)


def test_sql_and_block_interior_comment_syntax_is_recognised():
    text = "UPDATE t SET a = 1; -- auditor: ignore[sql-injection] migration\n/*\n * auditor: ignore[tx-outside-transaction] doc\n */\n"
    comments = find_ignore_comments("m.sql", text)
    assert [(c.line, c.rules, c.reason, c.own_line) for c in comments] == [
        (1, (SQL,), "migration", False),
        (3, (TX,), "doc", True),
    ]
    # A decrement is not a comment.
    assert find_ignore_comments("c.c", "i--auditor: ignore[tx-outside-transaction]\n") == ()


def test_ignore_comment_naming_an_unknown_rule_warns_even_without_a_finding():
    texts = {"app/a.py": "x = 1  # auditor: ignore[tx-outside-transacton] typo\n", "app/b.py": "# auditor: ignore[] nothing\n"}
    outcome = apply_suppressions([], texts, KNOWN)
    assert outcome.warnings == (
        "app/a.py:1: ignore comment names unknown rule 'tx-outside-transacton'",
        "app/b.py:1: ignore comment names no rule (write auditor: ignore[rule-id] reason)",
    )


def test_baseline_round_trip_suppresses_by_fingerprint(tmp_path: Path):
    accepted = make_finding("app/store.py", 2, "save_order", "    order.save()")
    other = make_finding("app/store.py", 11, "save_item", "    item.save()")
    target = tmp_path / "ci" / "auditor-baseline.json"
    written = write_baseline(target, [accepted, accepted])
    data = json.loads(target.read_text(encoding="utf-8"))
    assert data == [{"fingerprint": accepted.fingerprint, "rule": TX, "path": "app/store.py", "function": "save_order", "scheme": SCHEME}]
    baseline = read_baseline(target)
    assert baseline.entries == written.entries and baseline.fingerprints == {accepted.fingerprint}

    # The same finding on another line (code moved) is still baselined: fingerprints have no line numbers.
    moved = make_finding("app/store.py", 40, "save_order", "        order.save()")
    outcome = apply_suppressions([moved, other], {}, KNOWN, baseline)
    assert outcome.kept == (other,)
    assert [(s.source, s.reason, s.location) for s in outcome.suppressed] == [("baseline", "baseline", str(target))]


def test_inline_comment_reason_wins_over_the_baseline(tmp_path: Path):
    finding = make_finding("app/store.py", 2, "save_order", "    order.save()")
    baseline = write_baseline(tmp_path / "b.json", [finding])
    outcome = apply_suppressions([finding], {"app/store.py": PYTHON}, KNOWN, baseline)
    assert [item.source for item in outcome.suppressed] == ["inline"]


def test_baseline_accepts_plain_fingerprints_and_json_reports(tmp_path: Path):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(["abc", " def "]), encoding="utf-8")
    assert read_baseline(plain).fingerprints == {"abc", "def"}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"version": 1, "findings": [{"fingerprint": "f1", "rule": TX}]}), encoding="utf-8")
    assert read_baseline(report).fingerprints == {"f1"}


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "not valid JSON"), ('{"a": 1}', "must be a JSON list"), ('[{"rule": "x"}]', "entry 1 has no fingerprint")],
)
def test_bad_baseline_files_raise_a_clear_error(tmp_path: Path, content: str, message: str):
    target = tmp_path / "baseline.json"
    target.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError, match=message):
        read_baseline(target)
    with pytest.raises(BaselineError, match="not found"):
        read_baseline(tmp_path / "missing.json")


def test_a_baseline_of_an_older_scheme_matches_by_rule_path_and_function(tmp_path: Path):
    # Written before fingerprints were structural: no "scheme", a fingerprint of the raw sink line.
    old = tmp_path / "old-baseline.json"
    old.write_text(json.dumps([{"fingerprint": "0" * 32, "rule": TX, "path": "app/store.py", "function": "save_order"}]))
    baseline = read_baseline(old)
    assert [entry.scheme for entry in baseline.entries] == [1]
    accepted = make_finding("app/store.py", 2, "save_order", "    order.save()")
    other = make_finding("app/store.py", 11, "save_item", "    item.save()")
    outcome = apply_suppressions([accepted, other], {}, KNOWN, baseline)
    assert outcome.kept == (other,) and [item.finding for item in outcome.suppressed] == [accepted]
    # A bare fingerprint or a current entry matches by fingerprint only.
    current = tmp_path / "current.json"
    current.write_text(json.dumps(["0" * 32, {"fingerprint": "1" * 32, "rule": TX, "path": "app/store.py", "function": "save_order", "scheme": SCHEME}]))
    assert apply_suppressions([accepted], {}, KNOWN, read_baseline(current)).kept == (accepted,)
