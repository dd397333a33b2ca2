"""The token-ratio guard on the review path: a review plans its head and the base run it may send
before sending either, so one over `--max-token-ratio` sends nothing (a `--full` review's whole base,
a diff-scoped review's base run restricted to the head's subgraph), and it says what the base's
plan costs as well as the head's."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from auditor import defaults
from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.errors import PackError
from auditor.runs.review import ReviewConfig, run_review
from auditor.runs.scan import run_scan
from tests.support import MockEngine, commit_all, git, write_source

TX = "tx-outside-transaction"


@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))


def _views(count: int) -> str:
    """A module of ``count`` class-based views, each writing twice without a transaction."""
    return "from django.views import View\n\n" + "".join(
        f"class Pay{n}(View):\n    def post(self, request):\n        order = Order.objects.create(total={n})\n"
        f"        Payment.objects.create(order=order)\n        return order\n\n" for n in range(count)
    )


def _repository(root: Path, modules: int) -> None:
    for index in range(modules):
        write_source(root, f"shop/module_{index}.py", _views(6))


def _config(root: Path, tokenizer_dir: Path, ratio: float) -> ScanConfig:
    return ScanConfig(
        root=root, rules=(TX,), engine="mock", tokenizer=str(tokenizer_dir), use_cache=False, probes=0,
        engine_settings=EngineSettings(max_model_len=9_000), window=WindowOptions(output_tokens=512, max_token_ratio=ratio),
    )


def test_a_review_over_the_ratio_stops_before_sending_anything(tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    _repository(root, 12)
    base = commit_all(root, "base")
    write_source(root, "shop/module_0.py", _views(7))
    commit_all(root, "head")
    engine = MockEngine()
    with pytest.raises(PackError, match="nothing was sent"):
        run_review(ReviewConfig(scan=_config(root, tiny_tokenizer_dir, 1.01), base=base, full=True), scan=functools.partial(run_scan, engine=engine))
    assert engine.history == []


def test_a_review_names_the_base_plan_over_the_ratio(tmp_path: Path, tiny_tokenizer_dir: Path, monkeypatch) -> None:
    # The base packs in several windows, the head (most modules deleted) in one, which the
    # guard never weighs: only the base's plan is over the (lowered) notice ratio.
    monkeypatch.setattr(defaults, "MAX_TOKEN_RATIO", 1.01)
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    _repository(root, 12)
    base = commit_all(root, "base")
    for index in range(1, 12):
        git(root, "rm", "-q", f"shop/module_{index}.py")
    commit_all(root, "head")
    engine = MockEngine()
    reviewed = run_review(ReviewConfig(scan=_config(root, tiny_tokenizer_dir, 0.0), base=base, full=True), scan=functools.partial(run_scan, engine=engine))
    guarded = [notice for notice in reviewed.result.notices if "prompt tokens" in notice and "auditor plan" in notice]
    assert len(guarded) == 1 and guarded[0].startswith(f"base {base[:12]}: ")
    assert len(engine.history) > 1  # the head's window and the base's


def _base_over_head_under(root: Path) -> str:
    """A base of twelve modules of six views (several windows), a head keeping one module of
    one view (one window, which the guard never weighs): only the base's plan is over."""
    root.mkdir()
    git(root, "init", "-q")
    _repository(root, 12)
    base = commit_all(root, "base")
    for index in range(1, 12):
        git(root, "rm", "-q", f"shop/module_{index}.py")
    write_source(root, "shop/module_0.py", _views(1))
    commit_all(root, "head")
    return base


def test_a_full_review_whose_base_is_over_the_ratio_sends_nothing(tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    root = tmp_path / "repo"
    base = _base_over_head_under(root)
    engine = MockEngine()
    config = ReviewConfig(scan=_config(root, tiny_tokenizer_dir, 1.01), base=base, full=True)
    with pytest.raises(PackError, match="nothing was sent"):
        run_review(config, scan=functools.partial(run_scan, engine=engine))
    assert engine.history == []  # the head, under the ratio, was not sent before the base was planned


def test_a_diff_scoped_review_plans_its_restricted_base_run_before_sending(tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    # Half the modules change: the head's subgraph is those six files, each shrunk to one view
    # (one window); at the base the same subgraph holds six views each (several windows).
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    _repository(root, 12)
    base = commit_all(root, "base")
    for index in range(6):
        write_source(root, f"shop/module_{index}.py", _views(1))
    commit_all(root, "head")
    engine = MockEngine()
    with pytest.raises(PackError, match="nothing was sent"):
        run_review(ReviewConfig(scan=_config(root, tiny_tokenizer_dir, 1.01), base=base), scan=functools.partial(run_scan, engine=engine))
    assert engine.history == []
    # Without the stop, the same review runs: the head's one window is sent.
    reviewed = run_review(ReviewConfig(scan=_config(root, tiny_tokenizer_dir, 0.0), base=base), scan=functools.partial(run_scan, engine=engine))
    assert len(engine.history) >= 1 and reviewed.result.review.scope == "diff"
