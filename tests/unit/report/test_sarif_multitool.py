"""The SARIF multitool's GitHub rules (``validate --rule-kind "Sarif;Gh"``) on the SARIF
auditor writes: every bundled fixture's static scan, a review of a change with new,
existing and suppressed findings, a subdirectory scan, and a scan that could not run
(issue 23: 0 errors and 0 warnings).

The tool is Microsoft's ``@microsoft/sarif-multitool`` from npm (a self-contained .NET
binary per platform); install it with
``npm install --prefix benchmarks/work/sarif-multitool @microsoft/sarif-multitool`` or point
``AUDITOR_SARIF_MULTITOOL`` at its ``Sarif.Multitool`` executable. Without it these tests
are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.config.scan import ScanConfig
from auditor.errors import EngineUnavailable
from auditor.report import render
from auditor.report.sarif import information_uri
from auditor.runs.review import ReviewConfig, run_review
from auditor.runs.scan import failed_result, run_scan
from auditor.runs.scope import within_repository
from tests.support import FIXTURES, REPO_ROOT, commit_all, git, write_source

TX = "tx-outside-transaction"
_PLATFORM = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)
_INSTALLED = REPO_ROOT / "benchmarks" / "work" / "sarif-multitool" / "node_modules" / "@microsoft"


def _multitool() -> Path | None:
    configured = os.environ.get("AUDITOR_SARIF_MULTITOOL")
    candidate = Path(configured) if configured else _INSTALLED / f"sarif-multitool-{_PLATFORM}" / "Sarif.Multitool"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


MULTITOOL = _multitool()
pytestmark = pytest.mark.skipif(
    MULTITOOL is None,
    reason="the SARIF multitool is not installed: npm install --prefix benchmarks/work/sarif-multitool "
           "@microsoft/sarif-multitool (then chmod u+x its Sarif.Multitool), or set AUDITOR_SARIF_MULTITOOL",
)
# Without [project.urls] in the installed metadata auditor has no home page to name
# (auditor.report.sarif.information_uri): the one rule it cannot satisfy then.
_EXCUSED = set() if information_uri() else {"SARIF2005"}


def _problems(tmp_path: Path, logs: dict[str, str]) -> list[str]:
    """The multitool's errors and warnings for the logs (name -> SARIF text), in one run,
    as "name: RULE: message" lines."""
    paths = []
    for name, sarif in logs.items():
        paths.append(tmp_path / f"{name}.sarif")
        paths[-1].write_text(sarif, encoding="utf-8")
    out = tmp_path / "validation.sarif.json"
    assert MULTITOOL is not None
    ran = subprocess.run([str(MULTITOOL), "validate", "--rule-kind", "Sarif;Gh", "-o", str(out), *map(str, paths)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0 and out.is_file(), ran.stdout + ran.stderr
    problems = []
    for result in json.loads(out.read_text(encoding="utf-8"))["runs"][0].get("results", []):
        if result.get("level", "warning") not in ("error", "warning") or result["ruleId"] in _EXCUSED:
            continue
        where = result.get("locations", [{}])[0].get("physicalLocation", {}).get("artifactLocation", {}).get("uri", "?")
        problems.append(f"{Path(where).name}: {result['ruleId']}: {result['message'].get('text') or result['message']}")
    return problems


FIXTURE_APPS = ("django_caught", "django_deletes", "django_drf", "django_invites", "django_rerun", "django_shop",
                "fingerprint_app", "flask_ledger", "go_inventory")


def test_every_sarif_kind_auditor_writes_passes_the_github_rules(tmp_path: Path):
    logs = {
        fixture: render(run_scan(ScanConfig(root=FIXTURES / fixture, engine="static", min_severity="low", use_cache=False)), "sarif")
        for fixture in FIXTURE_APPS
    }
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "app/api/views.py", "from app.core.orders import place\n\n\ndef create(request):\n    place(request)\n")
    write_source(root, "app/core/orders.py", "def place(order):\n    order.save()\n")
    base = commit_all(root, "base")
    write_source(root, "app/core/orders.py",
                 "def place(order):\n    order.save()\n    order.lines.create(total=1)  # auditor: ignore[tx-outside-transaction] test\n"
                 "    order.items.create(total=2)\n")
    head = commit_all(root, "head")
    scan = ScanConfig(root=root / "app" / "core", engine="static", rules=(TX,), min_severity="low", use_cache=False)
    logs["review"] = render(run_review(ReviewConfig(scan=scan, base=base, head=head)).result, "sarif")
    logs["subdirectory"] = render(run_scan(within_repository(scan).config), "sarif")
    logs["failed"] = render(failed_result(scan, EngineUnavailable("the server at http://127.0.0.1:9 did not answer")), "sarif")
    assert json.loads(logs["review"])["runs"][0]["results"], "the review found nothing to check"
    assert _problems(tmp_path, logs) == []
