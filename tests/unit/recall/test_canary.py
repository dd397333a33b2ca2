"""Recall canaries in scans: planted within budget, scored exactly, degraded windows visible."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import Completion, EngineSettings
from auditor.engine.opening import EngineChoice
from auditor.errors import ExitCode
from auditor.runs.scan import finish_scan, plan_scan
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "fixtures" / "django_shop"
RULE = "tx-outside-transaction"


def _config(tokenizer_dir: Path, probes: int = 3) -> ScanConfig:
    return ScanConfig(
        root=FIXTURE,
        rules=(RULE,),
        engine="replay",
        engine_settings=EngineSettings(max_model_len=65_536),
        tokenizer=str(tokenizer_dir),
        window=WindowOptions(output_tokens=4_096, probe_reserve_tokens=4_096),
        static=False,
        probes=probes,
    )


def _answer(plan, correct_below: float) -> list[Completion]:
    completions = []
    for (window, canaries), request in zip(plan.windows.planted, plan.requests):
        probes = [
            {"id": canary.id, "answer": canary.expected if depth < correct_below else (canary.distractors or ("0",))[0]}
            for canary, depth in zip(canaries.canaries, canaries.depths)
        ]
        text = json.dumps({"findings": [], "probes": probes})
        completions.append(Completion(request.id, text, "", "stop", window.prompt_tokens, 50))
    return completions


def test_canaries_are_planted_inside_the_budget(tiny_tokenizer_dir):
    config = _config(tiny_tokenizer_dir)
    plan = plan_scan(config, EngineChoice("replay"))
    window, canaries = plan.windows.planted[0]
    assert len(canaries.canaries) == 3
    assert window.prompt_tokens + config.pack.output_tokens <= config.pack.max_model_len
    for canary in canaries.canaries:
        for path, _ in canary.files:
            assert f'<<<FILE path="{path}"' in window.prompt
        assert canary.question in window.prompt
    # The repository on disk is untouched: the canaries' virtual files are not walked files.
    assert not any(path in plan.inputs.repository.texts for canary in canaries.canaries for path in canary.paths)


def test_all_correct_answers_give_full_recall(tiny_tokenizer_dir):
    plan = plan_scan(_config(tiny_tokenizer_dir), EngineChoice("replay"))
    result = finish_scan(plan, _answer(plan, correct_below=1.1))
    recall = result.windows[0].recall
    assert recall is not None and recall.recall == 1.0 and not recall.degraded
    assert not result.recall_degraded


def test_wrong_answers_deep_in_the_window_mark_it_recall_degraded(tiny_tokenizer_dir):
    plan = plan_scan(_config(tiny_tokenizer_dir), EngineChoice("replay"))
    result = finish_scan(plan, _answer(plan, correct_below=0.3))
    recall = result.windows[0].recall
    assert recall is not None and recall.degraded
    assert recall.correct == 1 and recall.wrong == 2
    assert [round(depth, 2) for depth, _, _ in recall.missed] == [0.5, 0.9]
    assert result.recall_degraded
    assert any(error.kind == "recall-degraded" for error in result.errors)


def test_a_claim_citing_a_canary_is_discarded_and_counted(tiny_tokenizer_dir):
    plan = plan_scan(_config(tiny_tokenizer_dir), EngineChoice("replay"))
    _, canaries = plan.windows.planted[0]
    canary_path = canaries.canaries[0].paths[0]
    claim = {"rule": RULE, "title": "x", "severity": "high", "explanation": "x",
             "sink": {"path": canary_path, "line": 1, "function": "f"}, "chain": []}
    completions = _answer(plan, correct_below=1.1)
    body = json.loads(completions[0].text)
    body["findings"] = [claim]
    completions[0] = Completion(completions[0].request_id, json.dumps(body), "", "stop", 1, 1)
    result = finish_scan(plan, completions)
    assert not result.findings
    assert len(result.rejected) == 1


def test_cli_exit_code_for_a_recall_degraded_scan(tiny_tokenizer_dir, tmp_path):
    config = _config(tiny_tokenizer_dir)
    plan = plan_scan(config, EngineChoice("replay"))
    recording = tmp_path / "answers.jsonl"
    for name, cutoff, expected in (("good", 1.1, ExitCode.OK), ("bad", 0.3, ExitCode.RECALL_DEGRADED)):
        completions = _answer(plan, correct_below=cutoff)
        recording.write_text("".join(
            json.dumps({"request_id": c.request_id, "text": "</think>" + c.text, "finish_reason": "stop"}) + "\n" for c in completions
        ))
        result = CliRunner().invoke(app, [
            "scan", str(FIXTURE), "--rule", RULE, "--engine", "replay", "--replay", str(recording),
            "--tokenizer", str(tiny_tokenizer_dir), "--max-model-len", "65536", "--output-tokens", "4096",
            "--no-static", "--format", "json", "--no-cache",
        ])
        assert result.exit_code == expected, (name, result.output)


def test_text_and_markdown_show_each_windows_recall_and_where_it_missed(tiny_tokenizer_dir):
    from auditor.report import render

    plan = plan_scan(_config(tiny_tokenizer_dir), EngineChoice("replay"))
    result = finish_scan(plan, _answer(plan, correct_below=0.3))
    for format in ("text", "markdown"):
        report = render(result, format)
        assert "window 0 recall 1/3 canaries" in report
        assert "RECALL-DEGRADED" in report
        assert "missed at 50% between" in report
