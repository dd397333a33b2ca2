"""Disputed and unverified findings are reported but do not block by default (issue 23
item 4): a static candidate the model refuted, and a model's finding none of whose chain
steps grounding confirmed, count for neither ``--error`` nor a SARIF ``error``;
``--block-disputed`` makes them block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.report import render
from auditor.runs.review import ReviewConfig, run_review
from auditor.runs.scan import run_scan
from tests.support import MockEngine, git

TX = "tx-outside-transaction"
VIEWS = (
    "from django.views import View\n\n\n"
    "class Pay(View):\n"
    "    def post(self, request):\n"
    "        order = Order.objects.create(total=1)\n"
    "        Payment.objects.create(order=order)\n"
    "        return order\n"
)
REFUTED = json.dumps({"findings": [], "verdicts": [{"candidate": "S1", "verdict": "refuted", "reason": "the caller runs inside atomic"}]})
INVENTED = json.dumps({"findings": [{
    "rule": TX, "title": "two creates", "severity": "critical", "explanation": "an invented caller",
    "sink": {"path": "shop/views.py", "line": 6, "function": "Pay.post"},
    "chain": [{"path": "shop/urls.py", "line": 3, "function": "ghost_route"}, {"path": "shop/views.py", "line": 6, "function": "Pay.post"}],
}]})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "views.py").write_text(VIEWS, encoding="utf-8")
    (root / "shop" / "urls.py").write_text("from shop.views import Pay\n\nurlpatterns = []\n", encoding="utf-8")
    return root


def _config(root: Path, tokenizer: Path, **options: object) -> ScanConfig:
    return ScanConfig(root=root, rules=(TX,), engine="mock", tokenizer=str(tokenizer), min_severity="low",
                      engine_settings=EngineSettings(max_model_len=8_000), window=WindowOptions(output_tokens=512),
                      use_cache=False, probes=0, **options)


def _levels(result) -> list[str]:
    return [r["level"] for r in json.loads(render(result, "sarif"))["runs"][0]["results"]]


def test_a_refuted_static_candidate_is_reported_but_does_not_block(repo: Path, tiny_tokenizer_dir: Path):
    result = run_scan(_config(repo, tiny_tokenizer_dir), engine=MockEngine(REFUTED))
    (finding,) = result.findings
    assert finding.disputed and finding.contested
    assert result.blocking_count == 0
    assert _levels(result) == ["note"]

    blocked = run_scan(_config(repo, tiny_tokenizer_dir, block_disputed=True), engine=MockEngine(REFUTED))
    assert blocked.blocking_count == 1
    assert _levels(blocked) == ["error"]  # two creates outside a transaction: critical


def test_a_model_finding_with_every_step_unverified_does_not_block(repo: Path, tiny_tokenizer_dir: Path):
    result = run_scan(_config(repo, tiny_tokenizer_dir, static=False), engine=MockEngine(INVENTED))
    (finding,) = result.findings
    assert finding.found_by == ("model",) and not any(step.verified for step in finding.chain)
    assert finding.unverified and not finding.disputed
    assert result.blocking_count == 0 and _levels(result) == ["warning"]
    assert json.loads(render(result, "json"))["findings"][0]["unverified"] is True

    blocked = run_scan(_config(repo, tiny_tokenizer_dir, static=False, block_disputed=True), engine=MockEngine(INVENTED))
    assert blocked.blocking_count == 1 and _levels(blocked) == ["error"]


def test_a_confirmed_candidate_still_blocks(repo: Path, tiny_tokenizer_dir: Path):
    confirmed = REFUTED.replace('"refuted"', '"confirmed"')
    result = run_scan(_config(repo, tiny_tokenizer_dir), engine=MockEngine(confirmed))
    assert result.blocking_count == 1 and _levels(result) == ["error"]


def test_a_review_does_not_block_on_a_new_disputed_finding(repo: Path, tiny_tokenizer_dir: Path):
    views = repo / "shop" / "views.py"
    views.write_text("def placeholder():\n    return 1\n", encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    views.write_text(VIEWS, encoding="utf-8")

    def review(block_disputed: bool):
        config = ReviewConfig(scan=_config(repo, tiny_tokenizer_dir, block_disputed=block_disputed), base="HEAD")
        return run_review(config, scan=lambda scan, progress, **kw: run_scan(scan, progress, engine=MockEngine(REFUTED), **kw))

    reviewed = review(False)
    assert reviewed.result.review.new_count == 1
    assert reviewed.blocking == 0 and not reviewed.result.review.findings[0].blocks
    assert review(True).blocking == 1


def test_a_review_summary_counts_the_contested_findings(repo: Path, tiny_tokenizer_dir: Path):
    views = repo / "shop" / "views.py"
    views.write_text("def placeholder():\n    return 1\n", encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    views.write_text(VIEWS, encoding="utf-8")
    config = ReviewConfig(scan=_config(repo, tiny_tokenizer_dir), base="HEAD")
    result = run_review(config, scan=lambda scan, progress, **kw: run_scan(scan, progress, engine=MockEngine(REFUTED), **kw)).result
    assert result.review.contested_count == 1
    text = " ".join(render(result, "text").split())  # the console wraps long lines
    assert "1 new, 0 existing (not blocking), 1 contested (disputed or unverified, not blocking)" in text
    assert "1 new · 0 existing (not blocking) · 1 contested (disputed or unverified, not blocking)" in render(result, "markdown")


def test_scan_many_counts_only_blocking_findings_for_error(repo: Path, tiny_tokenizer_dir: Path):
    from auditor.runs.many.outcomes import succeeded_outcome
    from auditor.runs.many.targets import Target

    target = Target(key="repo", source=str(repo))
    disputed = run_scan(_config(repo, tiny_tokenizer_dir), engine=MockEngine(REFUTED))
    outcome = succeeded_outcome(target, None, disputed, 0, ())
    assert outcome.findings == 1 and outcome.blocking == 0
    blocked = run_scan(_config(repo, tiny_tokenizer_dir, block_disputed=True), engine=MockEngine(REFUTED))
    assert succeeded_outcome(target, None, blocked, 0, ()).blocking == 1
