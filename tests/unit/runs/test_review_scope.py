"""Diff-scoped review on a git repository built in the test: the head packs only the
change's subgraph with the changed lines listed, new/existing comes from the base's static
pass and code without a second model run, a base run when needed is restricted, and
``--full`` keeps the two full scans."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.pack.change import ChangeScope
from auditor.runs.prepare import plan_windows
from auditor.runs.review import ReviewConfig, run_review
from auditor.runs.scan import run_scan
from auditor.tokens.tokenizer import load_tokenizer
from tests.support import MockEngine, commit_all, git, write_source

TX = "tx-outside-transaction"

VIEWS = '''
from flask import Flask
from app.store import save_order
from app.accounts import save_user

app = Flask(__name__)


@app.route("/orders")
def create_order(request):
    save_order(request)
    return "ok"


@app.route("/users")
def create_user(request):
    save_user(request)
    return "ok"
'''

STORE = '''
def save_order(order):
    order.total = 1
    order.save()
'''

ACCOUNTS = '''
def save_user(user):
    user.save()
'''

REPORTS = '''
def monthly_report(rows):
    return sum(row.amount for row in rows)
'''


def claim(function: str, line: int) -> str:
    """A model's finding at app/store.py ``line`` in ``function`` (no static fingerprint)."""
    return json.dumps({"findings": [{
        "rule": "missing-authorization", "title": "unchecked write", "severity": "high", "explanation": "no check",
        "sink": {"path": "app/store.py", "line": line, "function": function},
        "chain": [{"path": "app/views.py", "line": 9, "function": "create_order"},
                  {"path": "app/store.py", "line": line, "function": function}],
    }]})


@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))


def build(root: Path, store_after: str, store_before: str = STORE) -> tuple[str, str]:
    """A repository whose one commit changes app/store.py from ``store_before`` to
    ``store_after``: (base, head)."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for path, text in {"app/__init__.py": "", "app/views.py": VIEWS, "app/store.py": store_before,
                       "app/accounts.py": ACCOUNTS, "app/reports.py": REPORTS}.items():
        write_source(root, path, text)
    base = commit_all(root, "base")
    write_source(root, "app/store.py", store_after)
    return base, commit_all(root, "change save_order")


def review(root: Path, base: str, head: str, tokenizer: Path, engine: MockEngine, **options: object):
    scan = ScanConfig(root=root, rules=(TX, "missing-authorization"), engine="mock", tokenizer=str(tokenizer),
                      engine_settings=EngineSettings(max_model_len=16_000), window=WindowOptions(output_tokens=512),
                      probes=0, static=False)
    config = ReviewConfig(scan=scan, base=base, head=head, **options)
    return run_review(config, scan=functools.partial(run_scan, engine=engine))


def with_change(config: ScanConfig, change: ChangeScope) -> ScanConfig:
    return replace(config, window=replace(config.window, change=change))


def packed_paths(engine: MockEngine) -> set[str]:
    return {line.split('"')[1] for request in engine.history for line in request.messages[-1].content.splitlines()
            if line.startswith("<<<FILE path=")}


def test_the_head_packs_only_the_changed_subgraph_and_lists_the_changed_lines(tmp_path: Path, tiny_tokenizer_dir: Path):
    base, head = build(tmp_path / "repo", STORE.replace("order.total = 1", "order.total = 2"))
    engine = MockEngine()
    reviewed = review(tmp_path / "repo", base, head, tiny_tokenizer_dir, engine)
    # save_order, its caller's file; not the untouched create_user -> save_user chain or reports.
    assert packed_paths(engine) == {"app/store.py", "app/views.py"}
    prompt = engine.history[0].messages[-1].content
    assert "## Changed lines (the change under review)" in prompt and "- app/store.py: 2\n" in prompt
    review_summary = reviewed.result.review
    assert review_summary.scope == "diff"
    assert review_summary.head_prompt_tokens == sum(request.prompt_tokens for request in engine.history)
    assert review_summary.base_prompt_tokens == 0


def test_the_changed_lines_are_counted_in_the_window_budget(tmp_path: Path, tiny_tokenizer_dir: Path):
    root = tmp_path / "repo"
    build(root, STORE + '\n')
    config = ScanConfig(root=root, rules=(TX,), tokenizer=str(tiny_tokenizer_dir), probes=0, use_cache=False,
                        engine_settings=EngineSettings(max_model_len=16_000), window=WindowOptions(output_tokens=512))
    tokenizer = load_tokenizer(config.tokenizer_request)
    change = ChangeScope(paths=("app/store.py", "app/views.py"), lines=(("app/store.py", ((2, 3),)),))
    plain = plan_windows(config, tokenizer).sent.windows
    scoped = plan_windows(with_change(config, change), tokenizer).sent.windows
    (window,) = scoped
    assert "- app/store.py: 2-3\n" in window.prompt
    assert window.prompt_tokens == tokenizer.count(window.prompt)
    assert {f.path for f in window.files} == {"app/store.py", "app/views.py"}
    assert {f.path for w in plain for f in w.files} > {"app/store.py", "app/views.py"}


def test_a_finding_whose_code_is_unchanged_at_the_base_is_existing_without_a_base_model_run(tmp_path: Path, tiny_tokenizer_dir: Path):
    # A comment-only change inside save_order: the model's finding there existed at the base.
    base, head = build(tmp_path / "repo", STORE.replace("    order.save()\n", "    # persisted\n    order.save()\n"))
    engine = MockEngine().enqueue(claim("save_order", 4))
    reviewed = review(tmp_path / "repo", base, head, tiny_tokenizer_dir, engine)
    (item,) = reviewed.result.review.findings
    assert item.status == "existing"
    assert len(engine.history) == 1  # the head's window alone
    assert reviewed.result.review.base_prompt_tokens == 0


ATOMIC_STORE = '''
from django.db import transaction


def save_order(order):
    with transaction.atomic():
        order.total = 1
    order.save()
'''


def test_a_change_of_indentation_alone_is_a_change_of_code(tmp_path: Path, tiny_tokenizer_dir: Path):
    # The head moves order.save() into the atomic block: the same stripped text, other code.
    base, head = build(tmp_path / "repo", ATOMIC_STORE.replace("    order.save()", "        order.save()"), ATOMIC_STORE)
    engine = MockEngine().enqueue(claim("save_order", 7))
    reviewed = review(tmp_path / "repo", base, head, tiny_tokenizer_dir, engine)
    (item,) = reviewed.result.review.findings
    # Not "existing" from the code: the base run (answering nothing) decides, so new.
    assert len(engine.history) == 2
    assert item.status == "new"


def test_a_model_finding_on_changed_code_is_decided_by_a_base_run_restricted_to_the_subgraph(tmp_path: Path, tiny_tokenizer_dir: Path):
    base, head = build(tmp_path / "repo", STORE.replace("order.total = 1", "order.total = 2"))
    # The head's window and the base's both report it: existing.
    engine = MockEngine().enqueue(claim("save_order", 3), claim("save_order", 3))
    reviewed = review(tmp_path / "repo", base, head, tiny_tokenizer_dir, engine)
    (item,) = reviewed.result.review.findings
    assert item.status == "existing"
    assert len(engine.history) == 2
    base_prompt = engine.history[1].messages[-1].content
    assert '"app/accounts.py" view' not in base_prompt and '"app/reports.py" view' not in base_prompt
    assert "## Changed lines" not in base_prompt
    assert reviewed.result.review.base_prompt_tokens == engine.history[1].prompt_tokens > 0
    # The base run did not report it: new (another model: the result cache holds the first's answers).
    engine = MockEngine(identity="mock:other").enqueue(claim("save_order", 3))
    (item,) = review(tmp_path / "repo", base, head, tiny_tokenizer_dir, engine).result.review.findings
    assert item.status == "new"


def test_a_change_touching_no_source_file_is_no_coverage_gap(tmp_path: Path, tiny_tokenizer_dir: Path):
    # A docs-only commit: nothing to pack, and nothing the review should have audited.
    root = tmp_path / "repo"
    base, _ = build(root, STORE.replace("order.total = 1", "order.total = 2"))
    write_source(root, "README.md", "# Shop\n\nHow to run it.\n")
    head = commit_all(root, "docs")
    base = git(root, "rev-parse", "HEAD~1")
    engine = MockEngine()
    reviewed = review(root, base, head, tiny_tokenizer_dir, engine)
    assert reviewed.result.review.changed_files == ("README.md",)
    assert [error.kind for error in reviewed.result.errors if error.kind == "nothing-audited"] == []
    assert engine.history == []


def test_full_scans_head_and_base_whole_as_before(tmp_path: Path, tiny_tokenizer_dir: Path):
    base, head = build(tmp_path / "repo", STORE.replace("order.total = 1", "order.total = 2"))
    engine = MockEngine().enqueue(claim("save_order", 3))
    reviewed = review(tmp_path / "repo", base, head, tiny_tokenizer_dir, engine, full=True)
    summary = reviewed.result.review
    assert summary.scope == "full"
    assert packed_paths(engine) >= {"app/accounts.py", "app/reports.py", "app/store.py", "app/views.py"}
    assert all("## Changed lines" not in request.messages[-1].content for request in engine.history)
    assert len(engine.history) == 2 and summary.base_prompt_tokens == engine.history[1].prompt_tokens
    (item,) = summary.findings
    assert item.status == "new"
