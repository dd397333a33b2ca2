"""Snapshot tests: every report format of two bundled fixture scans — the static pass and a
replayed model run — byte for byte, with the tool version and temporary paths masked and
the text report's width pinned. A deliberate change to a report regenerates them with
``AUDITOR_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py`` (review the diff)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from auditor import __version__
from auditor.config.scan import ScanConfig
from auditor.engine.base import EngineSettings
from auditor.report import ReportOptions, render
from auditor.runs.scan import run_scan
from tests.support import REPO_ROOT

ROOT = REPO_ROOT
SNAPSHOTS = REPO_ROOT / "tests" / "snapshots"
FORMATS = {"text": "txt", "json": "json", "sarif": "sarif", "markdown": "md"}


def _masked(text: str, *temporary: Path) -> str:
    text = text.replace(__version__, "<version>").replace(str(ROOT), "<repo>")
    for path in temporary:
        text = text.replace(str(path), "<tmp>")
    return re.sub(r'"semanticVersion": "[^"]*"', '"semanticVersion": "<version>"', text)


def _check(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("AUDITOR_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no snapshot {path.name}: run with AUDITOR_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8"), f"{path.name} changed; regenerate it if that is intended"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "100")  # rich's width, wherever a report asks it


@pytest.mark.parametrize("output_format", sorted(FORMATS))
def test_static_scan_reports_match_their_snapshots(output_format: str, tmp_path: Path) -> None:
    config = ScanConfig(root=ROOT / "fixtures" / "go_inventory", rules=("tx-outside-transaction",), engine="static",
                        use_cache=False, min_severity="low")
    result = run_scan(config)
    text = render(result, output_format, ReportOptions(link_base="https://example.test/blob/abc/"))
    _check(f"go_inventory.static.{FORMATS[output_format]}", _masked(text, tmp_path))


@pytest.mark.parametrize("output_format", sorted(FORMATS))
def test_replayed_model_scan_reports_match_their_snapshots(output_format: str, tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    recording = ROOT / "fixtures" / "recorded" / "django_shop" / "trace_answer"
    config = ScanConfig(
        root=ROOT / "fixtures" / "django_shop", rules=("tx-outside-transaction",), engine="replay",
        engine_settings=EngineSettings(replay_path=str(recording)), tokenizer=str(tiny_tokenizer_dir),
        use_cache=False, probes=0, min_severity="low",
    )
    result = run_scan(config)
    text = render(result, output_format, ReportOptions(sarif_category="snapshot"))
    _check(f"django_shop.replay.{FORMATS[output_format]}", _masked(text, tmp_path, tiny_tokenizer_dir))
