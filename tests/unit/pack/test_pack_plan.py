"""``auditor pack`` is the scan's own planning step: for the same options it shows the windows
``auditor scan`` sends, token for token (the static candidates listed, the canaries planted).

The scan runs with a recording engine (tests/support.py's ``MockEngine``), so its requests
are what an engine would receive; each request's prompt is rendered again with the chat
template and counted independently of the packer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.cli.flags import ScanFlags
from auditor.cli.options import scan_config
from auditor.runs.scan import run_scan
from auditor.tokens.tokenizer import Message, TokenizerRequest, load_tokenizer
from tests.support import REPO_ROOT, MockEngine

FIXTURE = REPO_ROOT / "fixtures" / "django_shop"
WINDOW = {"max_model_len": 16384, "output_tokens": 512}


def pack_cli(tokenizer_dir: Path, *flags: str, format: str = "json", window: int = 0) -> str:
    """``auditor pack fixtures/django_shop`` with the shared window options and ``flags``."""
    arguments = [
        "pack", str(FIXTURE), "--tokenizer", str(tokenizer_dir), "--max-model-len", str(WINDOW["max_model_len"]),
        "--output-tokens", str(WINDOW["output_tokens"]), "--no-cache", "--format", format, *flags,
    ]
    if format == "prompt":
        arguments += ["--window", str(window)]
    outcome = CliRunner().invoke(app, arguments)
    assert outcome.exit_code == 0, outcome.output
    return outcome.stdout


def scanned_requests(tokenizer_dir: Path, **flags: Any) -> list[Any]:
    """The requests ``auditor scan`` with the same options sends its engine."""
    config = scan_config(FIXTURE, ScanFlags(tokenizer=str(tokenizer_dir), no_cache=True, **WINDOW, **flags))
    engine = MockEngine()
    run_scan(config, engine=engine)
    return engine.history


CASES = {
    "defaults": ((), {}),
    "one rule, every severity, tests, two canaries, another seed": (
        ("--rule", "tx-outside-transaction", "--min-severity", "low", "--include-tests", "--probes", "2", "--seed", "7"),
        {"rule": ("tx-outside-transaction",), "min_severity": "low", "include_tests": True, "probes": 2, "seed": 7},
    ),
    "no static candidates, no canaries": (("--no-static", "--probes", "0"), {"static": False, "probes": 0}),
}


@pytest.mark.parametrize("case", CASES)
def test_pack_shows_the_windows_scan_sends_token_for_token(tiny_tokenizer_dir: Path, case: str) -> None:
    pack_flags, scan_flags = CASES[case]
    manifest = json.loads(pack_cli(tiny_tokenizer_dir, *pack_flags))
    requests = scanned_requests(tiny_tokenizer_dir, **scan_flags)
    tokenizer = load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))

    assert len(requests) == len(manifest["windows"]) > 1
    for window, request in zip(manifest["windows"], requests):
        assert request.id == f"window-{window['index']}"
        rendered = tokenizer.render([Message(m.role, m.content) for m in request.messages], thinking=request.thinking)
        assert window["prompt_tokens"] == request.prompt_tokens == tokenizer.count(rendered)
        assert pack_cli(tiny_tokenizer_dir, *pack_flags, format="prompt", window=window["index"]) == rendered
        listed = [f"- {candidate} [" in request.messages[1].content for candidate in window["static_candidates"]]
        assert all(listed), window["static_candidates"]
    # The same rules as scan (all built-in ones when no --rule is given).
    assert manifest["rules"] == sorted(manifest["rules"]) and len(manifest["rules"]) == (1 if scan_flags.get("rule") else 4)
    candidates = [candidate for window in manifest["windows"] for candidate in window["static_candidates"]]
    assert bool(candidates) == scan_flags.get("static", True)
