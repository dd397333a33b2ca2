"""Pre-merge review on a git repository built in the test: only findings on the diff's
chains are reported, pre-existing ones are "existing", renames keep fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.cli.console import exit_on_error
from auditor.cli.review import review_command
from auditor.config.scan import ScanConfig
from auditor.findings.fingerprints import fingerprint
from auditor.findings.model import ChainStep, EffectSite, Finding
from auditor.report import render
from auditor.report.markdown import REVIEW_MARKER
from auditor.report.model import Coverage
from auditor.runs.diffscope import locate_touch
from auditor.runs.review import ReviewConfig, change_coverage, run_review
from auditor.walk.diff import ChangedFile, Diff, GitError, Hunk, compute_diff
from tests.support import REPO_ROOT, SHARED, commit_all, git, write_source

TX = "tx-outside-transaction"

VIEWS = '''
from flask import Flask
from app.store import save_order, save_user
from app.billing import charge

app = Flask(__name__)


@app.route("/orders")
def create_order(request):
    order = request
    save_order(order)
    return "ok"


@app.route("/users")
def create_user(request):
    save_user(request)
    return "ok"


@app.route("/charge")
def charge_view(request):
    charge(request)
    return "ok"
'''

STORE = '''
def save_order(order):
    order.save()


def save_user(user):
    user.save()
'''

BILLING = '''
def charge(payment):
    amount = payment.amount
    payment.save()
    return amount


def refund_amount(value):
    return value + 1


def tax(value):
    return value * 2


def discount(value):
    return value - 3


def rounding(value):
    return value // 4
'''

UTIL = '''
def normalise(value):
    return value
'''

NEW_ROUTES = '''

@app.route("/invoices")
def create_invoice(request):
    save_invoice(normalise(request))
    return "ok"


@app.route("/audit")
def create_audit(request):
    save_audit(request)
    return "ok"
'''

NEW_STORE = '''

def save_invoice(invoice):
    invoice.save()


def save_audit(entry):
    # auditor: ignore[tx-outside-transaction] append-only audit log, one row
    entry.save()
    # auditor: ignore[tx-outside-transacton] misspelt rule id
'''





@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """base: three routes, each reaching a write with no transaction.
    touch: create_order gains a line (its pre-existing finding is now on the diff's chain).
    head: a new route with a new write, billing.py renamed to payments.py with a changed line
    in charge, and a suppressed new write. Built once: reviews leave the repository as it was."""
    root = tmp_path_factory.mktemp("review") / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "app/__init__.py", "")
    write_source(root, "app/views.py", VIEWS)
    write_source(root, "app/store.py", STORE)
    write_source(root, "app/billing.py", BILLING)
    write_source(root, "app/util.py", UTIL)
    base = commit_all(root, "base")

    views = VIEWS.replace("    order = request\n", "    order = request\n    order.note = 'checked'\n")
    write_source(root, "app/views.py", views)
    touch = commit_all(root, "touch create_order")

    views = views.replace("from app.billing import charge", "from app.payments import charge\nfrom app.util import normalise")
    views = views.replace("import save_order, save_user", "import save_audit, save_invoice, save_order, save_user")
    write_source(root, "app/views.py", views + NEW_ROUTES)
    write_source(root, "app/store.py", STORE + NEW_STORE)
    git(root, "mv", "app/billing.py", "app/payments.py")
    write_source(root, "app/payments.py", BILLING.replace("    amount = payment.amount\n", "    amount = payment.amount * 100\n"))
    head = commit_all(root, "head")
    return {"root": root, "base": base, "touch": touch, "head": head}


def static_review(root: Path, base: str, head: str | None = None, baseline: Path | None = None, **options: object):
    scan = ScanConfig(root=root, engine="static", rules=(TX,), baseline=baseline, min_severity="low")
    return run_review(ReviewConfig(scan=scan, base=base, head=head, **options))


def test_only_findings_on_the_diffs_chains_are_reported(repo):
    reviewed = static_review(repo["root"], repo["base"])
    result, review = reviewed.result, reviewed.result.review
    assert review is not None
    functions = sorted(finding.function for finding in result.findings)
    # save_user's chain (create_user -> save_user) is untouched: left out, but counted.
    assert functions == ["charge", "save_invoice", "save_order"]
    assert review.outside_diff == 1

    status = {finding.function: review.reviewed(finding.fingerprint) for finding in result.findings}
    assert status["save_invoice"].status == "new"
    assert (status["save_invoice"].path, status["save_invoice"].line) == ("app/store.py", 10)
    assert status["save_invoice"].touched_by == "sink line changed"
    # The pre-existing bug whose sink did not change is "existing"; its primary location
    # moves to the changed line in create_order so a PR view shows it there.
    assert status["save_order"].status == "existing"
    assert (status["save_order"].path, status["save_order"].line, status["save_order"].function) == (
        "app/views.py", 12, "create_order",
    )
    assert (review.new_count, review.existing_count, review.blocking_count) == (1, 2, 1)
    assert reviewed.blocking == 1


def test_a_renamed_file_keeps_its_findings_fingerprints(repo):
    reviewed = static_review(repo["root"], repo["base"])
    charge = next(f for f in reviewed.result.findings if f.function == "charge")
    assert charge.path == "app/payments.py"
    entry = f"{charge.chain[0].path}:{charge.chain[0].function}"
    assert charge.fingerprint == fingerprint(TX, "app/payments.py", "charge", ("_.save()",), entry)
    # The base reported it under the old path; mapped through the rename it is the same finding.
    assert reviewed.result.review.reviewed(charge.fingerprint).status == "existing"
    assert reviewed.result.review.renamed == (("app/billing.py", "app/payments.py"),)
    assert reviewed.result.review.reviewed(charge.fingerprint).touched_by == "the sink's function changed"


def test_without_the_base_scan_every_finding_on_the_change_is_new(repo):
    review = static_review(repo["root"], repo["base"], compare_base=False).result.review
    assert (review.new_count, review.existing_count, review.base_compared) == (3, 0, False)


def test_ignore_comments_suppress_and_misspelt_rules_warn(repo):
    result = static_review(repo["root"], repo["base"]).result
    assert [(item.finding.function, item.source) for item in result.suppressed] == [("save_audit", "inline")]
    assert "append-only audit log" in result.suppressed[0].reason
    assert result.warnings == ("app/store.py:16: ignore comment names unknown rule 'tx-outside-transacton'",)


def test_baseline_suppresses_a_new_finding(repo, tmp_path: Path):
    from auditor.findings.suppress import write_baseline

    first = static_review(repo["root"], repo["base"]).result
    invoice = next(f for f in first.findings if f.function == "save_invoice")
    baseline = write_baseline(tmp_path / "baseline.json", [invoice])
    result = static_review(repo["root"], repo["base"], baseline=Path(baseline.source)).result
    assert invoice.fingerprint not in {f.fingerprint for f in result.findings}
    assert ("save_invoice", "baseline") in [(s.finding.function, s.source) for s in result.suppressed]
    assert result.review.new_count == 0


def test_head_revision_is_scanned_in_a_temporary_worktree(repo):
    reviewed = static_review(repo["root"], repo["base"], head=repo["touch"])
    review = reviewed.result.review
    assert [f.function for f in reviewed.result.findings] == ["save_order"]
    assert (review.new_count, review.existing_count, review.head) == (0, 1, repo["touch"])
    assert (review.outside_diff, review.changed_files) == (2, ("app/views.py",))
    # Temporary worktrees are gone afterwards.
    assert len(git(repo["root"], "worktree", "list").splitlines()) == 1


def test_coverage_lists_changed_files_and_their_call_graph_neighbours(repo):
    review = static_review(repo["root"], repo["base"]).result.review
    coverage = {(item.path, item.role): item.tier for item in review.coverage}
    assert coverage == {
        ("app/payments.py", "changed"): "full",
        ("app/store.py", "changed"): "full",
        ("app/views.py", "changed"): "full",
        ("app/util.py", "neighbour"): "full",
    }


def test_coverage_tiers_follow_the_pack(repo):
    root = repo["root"]
    diff = compute_diff(root, repo["base"])
    from auditor.runs.prepare import prepare_repository

    prepared = prepare_repository(root, use_cache=False)
    coverage = Coverage(full=("app/views.py",), skeleton=("app/util.py",), omitted=("app/store.py",))
    tiers = {item.path: item.tier for item in change_coverage(diff, coverage, prepared.graph, prepared.texts)}
    assert tiers == {"app/views.py": "full", "app/util.py": "skeleton", "app/store.py": "not packed", "app/payments.py": "not packed"}


def test_diff_follows_renames_and_reports_new_side_hunks(repo):
    diff = compute_diff(repo["root"], repo["base"], repo["head"])
    by_path = {changed.path: changed for changed in diff.files}
    payments = by_path["app/payments.py"]
    assert (payments.status, payments.old_path, payments.hunks) == ("R", "app/billing.py", (Hunk(2, 1),))
    assert by_path["app/store.py"].hunks == (Hunk(7, 10),)
    assert diff.renames == {"app/payments.py": "app/billing.py"}
    # Paths are relative to the scan root, and files outside it are left out.
    sub = compute_diff(repo["root"] / "app", repo["base"], repo["head"])
    assert sorted(changed.path for changed in sub.files) == ["payments.py", "store.py", "views.py"]


def test_deleted_lines_touch_the_function_around_them(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "a.py", "def f(x):\n    a = 1\n    b = 2\n    x.save()\n\n\ndef g():\n    pass\n")
    base = commit_all(root, "base")
    write_source(root, "a.py", "def f(x):\n    a = 1\n    x.save()\n\n\ndef g():\n    pass\n")
    [changed] = compute_diff(root, base).files
    assert changed.hunks == (Hunk(2, 0),)
    assert changed.touches_span(1, 3) and not changed.touches_span(6, 7) and not changed.touches_line(2)


def test_a_file_turned_into_a_symlink_is_one_type_change_not_a_failed_diff(tmp_path: Path):
    # git prints a type change as two patches (old side deleted, new side created).
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "a.py", "def f():\n    return 1\n")
    write_source(root, "b.py", "X = 1\n")
    write_source(root, "c.py", "Y = 1\n")
    base = commit_all(root, "base")
    (root / "b.py").unlink()
    (root / "b.py").symlink_to("a.py")
    write_source(root, "c.py", "Y = 2\n")
    head = commit_all(root, "head")
    files = {changed.path: changed for changed in compute_diff(root, base, head).files}
    assert sorted(files) == ["b.py", "c.py"]
    assert files["b.py"].status == "T" and files["b.py"].hunks == (Hunk(1, 1),)
    assert files["c.py"].status == "M" and files["c.py"].hunks == (Hunk(1, 1),)


def test_reviewing_a_directory_the_change_adds_reports_its_findings_as_new(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "top.py", "X = 1\n")
    base = commit_all(root, "base")
    write_source(root, "newpkg/views.py", "from flask import Flask\napp = Flask(__name__)\n\n\n@app.route('/x')\ndef view():\n    Order.objects.create(total=1)\n")
    head = commit_all(root, "head")
    for revision in (head, None):
        review = static_review(root / "newpkg", base, revision).result.review
        assert [(finding.path, finding.status) for finding in review.findings] == [("newpkg/views.py", "new")]  # repository-relative


def test_unknown_revision_is_a_git_error_naming_it(repo):
    with pytest.raises(GitError, match="unknown revision 'no-such-branch'"):
        compute_diff(repo["root"], "no-such-branch")


def test_reports_carry_the_review(repo):
    result = static_review(repo["root"], repo["base"]).result
    markdown = render(result, "markdown")
    assert markdown.splitlines()[0] == REVIEW_MARKER
    assert markdown.splitlines()[1] == "## auditor review: 1 new · 2 existing (not blocking) · 1 suppressed"
    assert "### New findings (1)" in markdown and "### Existing findings (also on the base) (2)" in markdown
    assert "Suppressed findings (1)" in markdown and "misspelt" not in markdown.split("**Warnings**")[0]
    assert markdown.count("<details>\n<summary>") == 3

    data = json.loads(render(result, "json"))
    assert (data["review"]["new"], data["review"]["existing"], data["summary"]["suppressed"]) == (1, 2, 1)

    from auditor.report.sarif import render_sarif

    log = json.loads(render_sarif(result, "auditor-review/tx"))
    run = log["runs"][0]
    assert run["automationDetails"] == {"id": "auditor-review/tx/"}
    results = {r["properties"].get("review", "suppressed"): r for r in run["results"]}
    assert results["new"]["baselineState"] == "new"
    existing = [r for r in run["results"] if r.get("baselineState") == "unchanged"]
    moved = next(r for r in existing if r["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "app/store.py")
    assert moved["locations"][0]["physicalLocation"]["region"] == {"startLine": 12}
    assert results["suppressed"]["suppressions"][0]["kind"] == "inSource"


def test_sarif_of_a_review_is_valid_against_the_schema(repo):
    schema_path = SHARED / "schemas" / "sarif-schema-2.1.0.json"
    if not schema_path.is_file():
        pytest.skip("../shared/schemas/sarif-schema-2.1.0.json is not present")
    from jsonschema import Draft4Validator

    from auditor.report.sarif import render_sarif

    result = static_review(repo["root"], repo["base"]).result
    validator = Draft4Validator(json.loads(schema_path.read_text(encoding="utf-8")))
    assert [error.message for error in validator.iter_errors(json.loads(render_sarif(result, "review")))] == []


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("review")(exit_on_error(review_command))
    app.command("other")(lambda: None)  # keep "review" a named subcommand
    return app


def test_cli_exits_1_only_for_new_findings_with_error(repo, tmp_path: Path):
    runner = CliRunner()
    root = str(repo["root"])
    common = ["review", root, "--engine", "static", "--min-severity", "low", "--rule", TX, "--base", repo["base"], "--error"]
    only_existing = runner.invoke(_cli(), [*common, "--head", repo["touch"], "-f", "json"])
    assert only_existing.exit_code == 0, only_existing.output
    assert json.loads(only_existing.stdout)["review"]["existing"] == 1
    assert runner.invoke(_cli(), [*common, "--head", repo["touch"], "--all", "-f", "json"]).exit_code == 1

    sarif, comment = tmp_path / "review.sarif", tmp_path / "comment.md"
    new = runner.invoke(
        _cli(),
        [*common, "-f", "text", "--sarif-output", str(sarif), "--sarif-category", "auditor/tx",
         "--markdown-output", str(comment), "--link-base", "https://github.com/o/r/blob/abc/"],
    )
    assert new.exit_code == 1, new.output
    assert json.loads(sarif.read_text(encoding="utf-8"))["runs"][0]["automationDetails"]["id"] == "auditor/tx/"
    markdown = comment.read_text(encoding="utf-8")
    assert markdown.startswith(REVIEW_MARKER) and "(https://github.com/o/r/blob/abc/app/store.py#L10)" in markdown


def test_cli_reports_a_bad_base_as_an_error(repo):
    outcome = CliRunner().invoke(_cli(), ["review", str(repo["root"]), "--engine", "static", "--min-severity", "low", "--base", "nope"])
    assert outcome.exit_code == 64  # a revision the repository does not have is a usage error
    assert "unknown revision 'nope'" in " ".join(outcome.output.split())


def _replay_dir(directory: Path) -> Path:
    """A recording that answers every window with no findings and no canary answers."""
    directory.mkdir(parents=True)
    (directory / "window-0.txt").write_text('</think>{"findings": [], "probes": []}', encoding="utf-8")
    (directory / "window-0.json").write_text('{"finish_reason": "stop", "completion_tokens": 12}', encoding="utf-8")
    return directory


def test_cli_exits_6_when_the_models_canary_recall_is_degraded(tmp_path: Path, tiny_tokenizer_dir: Path):
    """A review whose window missed every canary is not a clean "no findings" (README: exit 6)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "app/store.py", STORE)
    base = commit_all(root, "base")
    write_source(root, "app/store.py", STORE + NEW_STORE)
    commit_all(root, "head")
    recording = _replay_dir(tmp_path / "recording")
    common = ["review", str(root), "--base", base, "--engine", "replay", "--replay", str(recording), "--no-static",
              "--rule", TX, "--tokenizer", str(tiny_tokenizer_dir), "--max-model-len", "65536",
              "--output-tokens", "4096", "-f", "json"]
    degraded = CliRunner().invoke(_cli(), common)
    assert degraded.exit_code == 6, degraded.output
    assert json.loads(degraded.stdout)["summary"]["recall_degraded"] is True
    without_canaries = CliRunner().invoke(_cli(), [*common, "--probes", "0"])
    assert without_canaries.exit_code == 0, without_canaries.output
    assert json.loads(without_canaries.stdout)["summary"]["recall_degraded"] is False


def test_cli_prints_warnings_with_brackets_verbatim(tmp_path: Path):
    """Warnings are plain text on stderr: "ignore[rule-id]" must not be eaten as console markup."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "app/store.py", STORE)
    base = commit_all(root, "base")
    write_source(root, "app/store.py", STORE + "\n\ndef save_note(note):\n    # auditor: ignore[] no rule named\n    note.save()\n")
    commit_all(root, "head")
    outcome = CliRunner().invoke(_cli(), ["review", str(root), "--base", base, "--engine", "static", "--min-severity", "low", "--rule", TX])
    assert outcome.exit_code == 0, outcome.output
    assert "ignore comment names no rule (write auditor: ignore[rule-id] reason)" in " ".join(outcome.stderr.split())


def test_a_repeated_review_reuses_the_caches_of_its_temporary_worktrees(repo, monkeypatch, tmp_path: Path):
    import auditor.index.indexer as index_module

    first = static_review(repo["root"], repo["base"], head=repo["touch"])
    parsed: list[str] = []
    real_index_source = index_module.index_source

    def counting(path: str, *args: object):
        parsed.append(path)
        return real_index_source(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module, "index_source", counting)
    second = static_review(repo["root"], repo["base"], head=repo["touch"])
    assert parsed == []  # head and base worktrees are new directories, their caches are not
    assert [f.fingerprint for f in second.result.findings] == [f.fingerprint for f in first.result.findings]
    packs = list((tmp_path / "cache" / "index").rglob("*.pack"))
    assert len(packs) == 1  # one pack for the repository, not one per temporary worktree


def test_a_change_to_a_write_further_down_the_sequence_puts_the_finding_on_the_diff():
    # The finding sits at the view; the helper two calls down that makes one of its writes
    # is neither the sink nor on the chain, but a change to it changes the sequence.
    finding = Finding(
        rule=TX, severity="critical", title="2 database writes", path="app/views.py", line=8, function="checkout",
        chain=(ChainStep("app/views.py", 8, "checkout", verified=True),), explanation="", found_by=("static",),
        fingerprint="f",
        sequence=(EffectSite("app/views.py", 8, "checkout", "write"), EffectSite("app/ledger.py", 21, "post_entry", "write")),
    )
    helper = ChangedFile("app/ledger.py", "app/ledger.py", "M", (Hunk(21, 1),))
    touch = locate_touch(finding, Diff("base", "head", (helper,)), {})
    assert touch is not None
    assert (touch.path, touch.line, touch.function) == ("app/ledger.py", 21, "post_entry")
    assert touch.reason == "post_entry (a write on the sequence) changed at line 21"
    # A change elsewhere in the helper's function still counts, at its first changed line.
    elsewhere = ChangedFile("app/ledger.py", "app/ledger.py", "M", (Hunk(25, 2),))
    touch = locate_touch(finding, Diff("base", "head", (elsewhere,)), {("app/ledger.py", "post_entry"): (18, 30)})
    assert touch is not None and (touch.line, touch.reason) == (25, "post_entry (a write on the sequence) changed")
    # Not on the sequence, not on the chain: not on the diff.
    other = ChangedFile("app/ledger.py", "app/ledger.py", "M", (Hunk(40, 1),))
    assert locate_touch(finding, Diff("base", "head", (other,)), {("app/ledger.py", "void_entry"): (38, 45)}) is None


def test_a_change_adding_a_non_utf8_file_name_reviews_to_valid_utf8(tmp_path: Path) -> None:
    """Issue 22 item 4: the name is escaped as the walk escapes it, stdout and -o are UTF-8 JSON."""
    import json
    import os
    import subprocess
    import sys

    root = tmp_path / "bytes"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "shop/views.py", VIEWS)
    base = commit_all(root, "base")
    (root / "shop").joinpath(os.fsdecode(b"bad\xff.py")).write_bytes(b"x = 1\n")
    commit_all(root, "a file whose name is not UTF-8")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "AUDITOR_CACHE_DIR": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "auditor", "review", str(root), "--base", base, "--engine", "static", "-f", "json"]
    shown = subprocess.run(argv, capture_output=True, env=env, check=False)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout.decode("utf-8"))
    assert "shop/bad\\xff.py" in report["review"]["changed_files"]
    written = subprocess.run([*argv, "-o", str(tmp_path / "review.json")], capture_output=True, env=env, check=False)
    assert written.returncode == 0 and json.loads((tmp_path / "review.json").read_text(encoding="utf-8"))["review"]
