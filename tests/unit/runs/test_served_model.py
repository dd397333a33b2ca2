"""Every report names the model that answered: the name the server listed (or the vLLM
engine's checkpoint), not only the one asked for (issue 23: "records no model name although
the server listed one")."""

from __future__ import annotations

import json
from pathlib import Path

from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.report import render
from auditor.runs.scan import run_scan
from tests.support import MockEngine

SERVED = "nemotron-served-7"


def test_the_served_model_name_is_in_every_report_format(tmp_path: Path, tiny_tokenizer_dir: Path):
    (tmp_path / "app.py").write_text("def handler(request):\n    request.user.save()\n", encoding="utf-8")
    config = ScanConfig(root=tmp_path, rules=("tx-outside-transaction",), engine="mock", tokenizer=str(tiny_tokenizer_dir),
                        engine_settings=EngineSettings(max_model_len=8_000), window=WindowOptions(output_tokens=512),
                        use_cache=False, probes=0)
    identity = json.dumps({"engine": "openai", "model": SERVED, "checkpoint": "/models/x"})
    result = run_scan(config, engine=MockEngine(identity=identity))
    assert result.model == SERVED
    assert json.loads(render(result, "json"))["model"] == SERVED
    assert json.loads(render(result, "sarif"))["runs"][0]["properties"]["model"] == SERVED
    assert SERVED in render(result, "markdown").split("\n## ")[0]
    assert SERVED in render(result, "text").splitlines()[0]


def test_an_identity_naming_no_model_keeps_the_configured_name(tmp_path: Path, tiny_tokenizer_dir: Path):
    (tmp_path / "app.py").write_text("def handler(request):\n    return request\n", encoding="utf-8")
    config = ScanConfig(root=tmp_path, rules=("tx-outside-transaction",), engine="mock", tokenizer=str(tiny_tokenizer_dir),
                        engine_settings=EngineSettings(model="asked-for", max_model_len=8_000),
                        window=WindowOptions(output_tokens=512), use_cache=False, probes=0)
    assert run_scan(config, engine=MockEngine(identity="replay:0123")).model == "asked-for"
