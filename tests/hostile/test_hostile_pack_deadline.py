"""Hostile inputs against the per-file deadline in the pack stage (issue 22, item 3): the packer's
own work on a file (the relevance scan, rule patterns over its text, and building its skeleton)
runs under ``--file-deadline`` as the walk's does. A file that overruns is carried in no window,
listed as not audited with reason ``file-deadline``, and leaves the scan partial (exit 5 under
``--error``). The clock is a fake one, as in the walk's tests (test_hostile_deadline.py).
Variants: pattern shapes the relevance patterns meet (a long line of keywords, a long line of
placeholders and braces, many short matching lines, a deep nesting of calls), a slow skeleton,
time spent across both steps, and no deadline at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor import defaults
from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.errors import ExitCode, exit_code
from auditor.pack import deadline as pack_deadline
from auditor.pack.deadline import FileDeadline
from auditor.pack.packer import PackOptions, pack
from auditor.pack.rank import PackInput
from auditor.rules.loader import builtin_rules
from auditor.runs.scan import run_scan
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer
from auditor.walk.walker import WalkOptions
from tests.support import MockEngine, stepping_clock, write_source

VIEW = "def handler(request):\n    request.user.save()\n    request.user.profile.save()\n"
SHAPES = {
    "keywords.py": "# " + "select select from where " * 800 + "\n",
    "braces.py": "q = '" + "%s {x} select " * 800 + "'\n",
    "short_lines.py": "cursor.execute('select %s' % x)\n" * 2_000,
    "nested.py": "value = " + "f(" * 400 + "1" + ")" * 400 + "\n",
}
RULE = builtin_rules()["tx-outside-transaction"]


@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir):
    return load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))



@pytest.mark.parametrize("slow", sorted(SHAPES))
def test_a_file_whose_relevance_scan_overruns_is_not_audited_and_the_scan_is_partial(
    tmp_path: Path, tiny_tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch, slow: str
) -> None:
    root = tmp_path / "repo"
    write_source(root, "app/views.py", VIEW)
    for name, text in SHAPES.items():
        write_source(root, f"app/{name}", text)
    order = sorted(["app/views.py", *(f"app/{name}" for name in SHAPES)])
    # The first timed pass is the relevance scan of every walked file, in walk order.
    monkeypatch.setattr(pack_deadline, "clock", stepping_clock(iter([45.0 if path == f"app/{slow}" else 0.01 for path in order])))
    config = ScanConfig(
        root=root, engine="mock", tokenizer=str(tiny_tokenizer_dir), use_cache=False, probes=0,
        engine_settings=EngineSettings(max_model_len=32_768), window=WindowOptions(output_tokens=512),
    )
    result = run_scan(config, engine=MockEngine())

    [dropped] = [item for item in result.coverage.not_audited if item.reason == "file-deadline"]
    assert dropped.path == f"app/{slow}" and dropped.source
    assert "the relevance scan took 45.0 s, over the per-file deadline of 30 s (--file-deadline)" in dropped.detail
    carried = set(result.coverage.full) | set(result.coverage.skeleton)
    assert f"app/{slow}" not in carried and "app/views.py" in result.coverage.full
    assert any(f"app/{slow} was not audited (file-deadline" in error.message for error in result.errors)
    assert result.partial
    assert exit_code(result.shortfall, blocking=False, error=True) == ExitCode.INCOMPLETE
    assert exit_code(result.shortfall, blocking=False, error=False) == ExitCode.OK


def _files() -> list[PackInput]:
    return [PackInput(f"app/m{i}.py", "def f(order):\n    order.save()\n" + "x = 1\n" * 40, "python") for i in range(4)] + [
        PackInput("app/other.py", "class Other:\n    def g(self):\n        return 1\n" + "y = 2\n" * 40, "python"),
    ]


def _pack(tokenizer, deadline: FileDeadline, skeleton_of):
    options = PackOptions(max_model_len=8_000, output_tokens=300, probe_reserve_tokens=64, map_tokens=300)
    return pack(_files(), repository="r", rules=[RULE], tokenizer=tokenizer, options=options,
                skeleton_of=skeleton_of, keyword_rules=(), deadline=deadline)


def test_a_file_whose_skeleton_overruns_is_carried_in_no_window(tokenizer) -> None:
    now = [0.0]

    def slow_skeleton(path: str):
        if path == "app/other.py":
            now[0] += 45.0  # a pathological parse: the skeleton takes its time
        return ((3, 3),)

    result = _pack(tokenizer, FileDeadline(defaults.FILE_DEADLINE_S, now=lambda: now[0]), slow_skeleton)
    assert "app/other.py" not in {f.path for window in result.windows for f in window.files}
    [(path, detail)] = result.overran
    assert path == "app/other.py" and detail.startswith("building its skeleton took 45.0 s")
    reasons = {omitted.path: omitted.reason for omitted in result.omitted}
    assert reasons["app/other.py"].startswith("file-deadline: building its skeleton")


def test_the_time_of_both_steps_counts_against_one_deadline(tokenizer) -> None:
    now = [0.0]

    def advance(seconds: float) -> None:
        now[0] += seconds

    deadline = FileDeadline(30.0, now=lambda: now[0])
    # 20 s of an earlier relevance scan (pack_prepared's, for the rules without a static
    # analysis), then 20 s building the skeleton: 40 s in all, over 30 s.
    deadline.run("app/other.py", "the relevance scan", lambda: advance(20.0))
    assert not deadline.overran("app/other.py")

    def slow_skeleton(path: str):
        if path == "app/other.py":
            advance(20.0)
        return ((3, 3),)

    result = _pack(tokenizer, deadline, slow_skeleton)
    assert [path for path, _ in result.overran] == ["app/other.py"]
    assert result.overran[0][1].startswith("building its skeleton took 40.0 s")


def test_no_deadline_drops_nothing(tokenizer) -> None:
    slow = stepping_clock(iter([1e6] * 100))
    result = _pack(tokenizer, FileDeadline(None, now=slow), lambda path: ((3, 3),))
    assert result.overran == ()
    assert {f.path for window in result.windows for f in window.files} == {entry.path for entry in _files()}


def test_the_walk_deadline_flag_reaches_the_pack(tmp_path: Path, tiny_tokenizer_dir: Path, monkeypatch) -> None:
    # --file-deadline 0 (no limit) in the walk options: the pack stage has none either.
    root = tmp_path / "repo"
    write_source(root, "app/views.py", VIEW)
    monkeypatch.setattr(pack_deadline, "clock", stepping_clock(iter([1e6] * 100)))
    config = ScanConfig(
        root=root, engine="mock", tokenizer=str(tiny_tokenizer_dir), use_cache=False, probes=0,
        walk=WalkOptions(file_deadline_s=None),
        engine_settings=EngineSettings(max_model_len=32_768), window=WindowOptions(output_tokens=512),
    )
    result = run_scan(config, engine=MockEngine())
    assert not [item for item in result.coverage.not_audited if item.reason == "file-deadline"]
    assert "app/views.py" in result.coverage.full
