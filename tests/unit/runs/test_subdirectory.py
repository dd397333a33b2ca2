"""A subdirectory of a repository (a monorepo's project): its review sees callers outside
it, and its SARIF resolves every location from the repository's top (issue 23, item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.cli.console import exit_on_error
from auditor.cli.scan import scan_command
from auditor.config.scan import ScanConfig
from auditor.runs.review import ReviewConfig, run_review
from tests.support import commit_all, git, write_source

TX = "tx-outside-transaction"

# The entry point lives outside hc/front; the writes it reaches live inside.
ROUTES = '''
from flask import Flask
from hc.front.services import place_order

app = Flask(__name__)


@app.route("/orders")
def create_order(request):
    place_order(request)
    return "ok"
'''

SERVICES = '''
def place_order(order):
    return order
'''

# A view inside hc/front, for the scan of that directory alone.
VIEWS = '''
from flask import Flask
from .services import place_order

app = Flask(__name__)


@app.route("/front")
def front(request):
    place_order(request)
    return "ok"
'''

SERVICES_CHANGED = '''
def place_order(order):
    order.total = 1
    order.save()
    order.lines.create(total=1)
'''



def monorepo(tmp_path: Path) -> tuple[Path, str, str]:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "hc/api/routes.py", ROUTES)
    write_source(root, "hc/front/services.py", SERVICES)
    write_source(root, "hc/front/__init__.py", "")
    write_source(root, "hc/front/views.py", VIEWS)
    write_source(root, "hc/api/__init__.py", "")
    write_source(root, "hc/__init__.py", "")
    base = commit_all(root, "base")
    write_source(root, "hc/front/services.py", SERVICES_CHANGED)
    head = commit_all(root, "head")
    return root, base, head


def test_a_subdirectory_review_reports_a_chain_entering_from_outside_it(tmp_path: Path):
    root, base, head = monorepo(tmp_path)
    scan = ScanConfig(root=root / "hc" / "front", engine="static", rules=(TX,), min_severity="low")
    reviewed = run_review(ReviewConfig(scan=scan, base=base, head=head))
    review = reviewed.result.review
    assert review is not None
    findings = reviewed.result.findings
    assert findings, "the entry point outside hc/front was not seen"
    assert {finding.path for finding in findings} == {"hc/front/services.py"}
    entries = {chain.steps[0].path for finding in findings for chain in finding.entry_chains()}
    assert "hc/api/routes.py" in entries
    assert {item.status for item in review.findings} == {"new"}
    assert review.changed_files == ("hc/front/services.py",)


def test_a_subdirectory_scan_writes_sarif_locations_from_the_repository_top(tmp_path: Path):
    root, _, _ = monorepo(tmp_path)
    app = typer.Typer()
    app.command("scan")(exit_on_error(scan_command))
    app.command("other")(lambda: None)
    outcome = CliRunner().invoke(
        app, ["scan", str(root / "hc" / "front"), "--engine", "static", "--rule", TX, "--min-severity", "low",
              "-f", "sarif", "--sarif-category", "monorepo"],
    )
    assert outcome.exit_code == 0, outcome.output
    [run] = json.loads(outcome.stdout)["runs"]
    assert run["results"]
    assert run["automationDetails"]["id"] == "monorepo/"
    assert "%SRCROOT%" in run["originalUriBaseIds"]
    located = [
        location["physicalLocation"]["artifactLocation"]
        for result in run["results"]
        for location in [*result["locations"], *result.get("relatedLocations", [])]
    ]
    located += [
        step["location"]["physicalLocation"]["artifactLocation"]
        for result in run["results"] for flow in result.get("codeFlows", [])
        for thread in flow["threadFlows"] for step in thread["locations"]
    ]
    assert located
    for artifact in located:
        assert artifact["uriBaseId"] == "%SRCROOT%"
        assert (root / artifact["uri"]).is_file(), artifact  # chains may start outside hc/front
    primary = {result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for result in run["results"]}
    assert all(uri.startswith("hc/front/") for uri in primary), primary


def test_a_subdirectory_review_reads_its_transaction_models_from_the_reviewed_directory(tmp_path: Path):
    root, base, _ = monorepo(tmp_path)
    write_source(root, "hc/front/tx-models.yaml", "framework: hc\nfacts: []\n")  # no rows: nothing changes, but it must be found
    head = commit_all(root, "models")
    scan = ScanConfig(root=root / "hc" / "front", engine="static", rules=(TX,), min_severity="low",
                      tx_models=(Path("tx-models.yaml"),))
    reviewed = run_review(ReviewConfig(scan=scan, base=base, head=head))
    assert {finding.path for finding in reviewed.result.findings} == {"hc/front/services.py"}


def _cli(*args: str):
    from auditor.cli.review import review_command

    app = typer.Typer()
    app.command("scan")(exit_on_error(scan_command))
    app.command("review")(exit_on_error(review_command))
    return CliRunner().invoke(app, list(args))


def _line_hashes(sarif_text: str) -> set[str]:
    [run] = json.loads(sarif_text)["runs"]
    return {result["partialFingerprints"]["primaryLocationLineHash"] for result in run["results"]}


def test_a_subdirectory_scan_sees_callers_outside_it_and_reports_only_inside(tmp_path: Path):
    root, _, _ = monorepo(tmp_path)
    outcome = _cli("scan", str(root / "hc" / "front"), "--engine", "static", "--rule", TX, "--min-severity", "low",
                   "-f", "json")
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.stdout)
    assert report["root"] == "front"
    findings = report["findings"]
    assert findings and {finding["path"] for finding in findings} == {"hc/front/services.py"}
    entries = {finding["chain"][0]["path"] for finding in findings if finding["chain"]}
    assert "hc/api/routes.py" in entries, "the caller outside hc/front was not seen"
    assert all(path.startswith("hc/front/") for path in report["coverage"]["full"])


def test_a_subdirectory_scan_baseline_and_sarif_match_the_review_of_it(tmp_path: Path):
    root, base, head = monorepo(tmp_path)
    front = str(root / "hc" / "front")
    static = ("--engine", "static", "--rule", TX, "--min-severity", "low")
    baseline = tmp_path / "baseline.json"
    scanned = _cli("scan", front, *static, "-f", "sarif", "--write-baseline", str(baseline))
    assert scanned.exit_code == 0, scanned.output
    reviewed = _cli("review", front, "--base", base, "--head", head, *static, "-f", "sarif")
    assert reviewed.exit_code == 0, reviewed.output
    # One alert, one primaryLocationLineHash, whether the push scan or the review found it.
    assert _line_hashes(reviewed.stdout) and _line_hashes(reviewed.stdout) <= _line_hashes(scanned.stdout)
    # The subdirectory's baseline suppresses the review's findings of the same code.
    gated = _cli("review", front, "--base", base, "--head", head, *static, "-f", "json",
                 "--baseline", str(baseline), "--error")
    assert gated.exit_code == 0, gated.output
    report = json.loads(gated.stdout)
    assert not report["findings"] and report["suppressed"]


def test_include_and_exclude_globs_are_relative_to_the_scanned_directory(tmp_path: Path):
    root, base, head = monorepo(tmp_path)
    front = str(root / "hc" / "front")
    static = ("--engine", "static", "--rule", TX, "--min-severity", "low", "-f", "json")
    excluded = json.loads(_cli("scan", front, *static, "--exclude", "services.py").stdout)
    assert not excluded["findings"]
    assert {"path": "hc/front/services.py", "reason": "excluded"}.items() <= next(
        item for item in excluded["coverage"]["not_audited"] if item["path"] == "hc/front/services.py").items()
    # An --include naming a file of PATH keeps the callers outside it in the call graph.
    included = json.loads(_cli("scan", front, *static, "--include", "services.py").stdout)
    assert {finding["chain"][0]["path"] for finding in included["findings"] if finding["chain"]} >= {"hc/api/routes.py"}
    reviewed = json.loads(_cli("review", front, "--base", base, "--head", head, *static, "--exclude", "services.py").stdout)
    assert not reviewed["findings"]


def test_a_sample_project_under_examples_is_scanned_on_its_own(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "examples/shop/routes.py", ROUTES.replace("hc.front.services", "services"))
    write_source(root, "examples/shop/services.py", SERVICES_CHANGED)
    commit_all(root, "sample")
    outcome = _cli("scan", str(root / "examples" / "shop"), "--engine", "static", "--rule", TX, "--min-severity", "low",
                   "-f", "json")
    assert outcome.exit_code == 0, outcome.output
    # From the top every file would be example code (no entry point): no false clean.
    findings = json.loads(outcome.stdout)["findings"]
    assert findings and {finding["path"] for finding in findings} == {"services.py"}
    assert "scanned on its own" in " ".join(outcome.stderr.split())


LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 1234\n"


def test_a_subdirectory_review_reports_the_gaps_under_it_only(tmp_path: Path, monkeypatch):
    # svc_b holds a Git LFS pointer where its source should be: a gap of svc_b, not of a
    # review of svc_a.
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "svc_a/__init__.py", "")
    write_source(root, "svc_a/services.py", SERVICES)
    write_source(root, "svc_b/__init__.py", "")
    (root / "svc_b" / "models.py").write_text(LFS_POINTER, encoding="utf-8")
    base = commit_all(root, "base")
    write_source(root, "svc_a/services.py", SERVICES_CHANGED)
    head = commit_all(root, "head")
    whole = run_review(ReviewConfig(scan=ScanConfig(root=root, engine="static", rules=(TX,)), base=base, head=head))
    assert any("svc_b/models.py" in error.message for error in whole.result.errors)  # the repository's gap
    reviewed = run_review(ReviewConfig(scan=ScanConfig(root=root / "svc_a", engine="static", rules=(TX,)), base=base, head=head))
    assert [error.message for error in reviewed.result.errors] == []
    assert all(item.path.startswith("svc_a/") for item in reviewed.result.coverage.not_audited)
    completed = subprocess.run(
        [sys.executable, "-m", "auditor", "review", "svc_a", "--base", base, "--head", head, "--engine", "static",
         "--rule", TX, "--error", "-f", "json"],
        capture_output=True, text=True, cwd=root, check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "svc_b" not in completed.stdout


@pytest.mark.parametrize("directory", ["vendor", "third_party", "node_modules"])
def test_a_project_under_a_vendored_directory_is_scanned_on_its_own(tmp_path: Path, directory: str):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, f"{directory}/shop/routes.py", ROUTES.replace("hc.front.services", "services"))
    write_source(root, f"{directory}/shop/services.py", SERVICES_CHANGED)
    commit_all(root, "vendored")
    outcome = _cli("scan", str(root / directory / "shop"), "--engine", "static", "--rule", TX, "--min-severity", "low",
                   "-f", "json")
    assert outcome.exit_code == 0, outcome.output
    # From the top every file would be skipped as vendored: no false clean.
    findings = json.loads(outcome.stdout)["findings"]
    assert findings and {finding["path"] for finding in findings} == {"services.py"}
    assert "vendored or excluded code: it is scanned on its own" in " ".join(outcome.stderr.split())
