"""A model scan or pack of a subdirectory (a monorepo's project) carries only that project's
files and the chains into it: not the rest of the repository, whose files neither
``--max-windows`` nor the token-ratio guard counts."""

from __future__ import annotations

import functools
from pathlib import Path

from auditor.config.scan import ScanConfig, WindowOptions
from auditor.engine.base import EngineSettings
from auditor.pack.packer import OUTSIDE_PATH
from auditor.runs.prepare import plan_windows
from auditor.runs.scan import run_scan
from auditor.runs.scope import within_repository
from auditor.tokens.tokenizer import load_tokenizer
from tests.support import MockEngine, commit_all, git, write_source

TX = "tx-outside-transaction"

# svc_b's route calls into svc_a: the chain svc_a's pack keeps whole, caller included.
CALLER = '''
from flask import Flask
from svc_a.services import place_order

app = Flask(__name__)


@app.route("/orders")
def create_order(request):
    place_order(request)
    return "ok"
'''

SERVICES = '''
def place_order(order):
    order.total = 1
    order.save()
    order.lines.create(total=1)
'''


def view(number: int) -> str:
    """A svc_b view of two writes, padded so that each needs a window of its own."""
    padding = "".join(f"\n\ndef helper_{number}_{index}(value):\n    return value + {index}\n" for index in range(400))
    return f'''
from flask import Flask

app = Flask(__name__)


@app.route("/b{number}")
def view_{number}(request):
    request.user.save()
    request.user.profile.save()
    return "ok"
{padding}'''


def monorepo(root: Path) -> Path:
    root.mkdir()
    git(root, "init", "-q")
    write_source(root, "svc_a/__init__.py", "")
    write_source(root, "svc_a/services.py", SERVICES)
    write_source(root, "svc_b/__init__.py", "")
    write_source(root, "svc_b/routes.py", CALLER)
    for number in range(6):
        write_source(root, f"svc_b/views_{number}.py", view(number))
    commit_all(root, "two projects")
    return root


def scoped(root: Path, tokenizer: Path, **window: object) -> ScanConfig:
    config = ScanConfig(root=root / "svc_a", rules=(TX,), engine="mock", tokenizer=str(tokenizer), probes=0,
                        use_cache=False, min_severity="low", engine_settings=EngineSettings(max_model_len=16_000),
                        window=WindowOptions(output_tokens=512, **window))
    return within_repository(config).config


def test_a_subdirectory_pack_carries_its_files_and_the_callers_of_its_chains_only(tmp_path: Path, tiny_tokenizer_dir: Path):
    config = scoped(monorepo(tmp_path / "repo"), tiny_tokenizer_dir)
    plan = plan_windows(config, load_tokenizer(config.tokenizer_request))
    carried = {f.path for window in plan.sent.windows for f in window.files}
    assert {"svc_a/services.py", "svc_b/routes.py"} <= carried <= {"svc_a/__init__.py", "svc_a/services.py", "svc_b/routes.py"}
    reasons = {omitted.path: omitted.reason for omitted in plan.sent.omitted}
    assert reasons["svc_b/views_0.py"] == OUTSIDE_PATH
    # The repository map still names the other project's files.
    assert "svc_b/ (8 files)" in plan.sent.repo_map


def test_max_windows_counts_only_the_files_under_the_scanned_directory(tmp_path: Path, tiny_tokenizer_dir: Path):
    root = monorepo(tmp_path / "repo")
    whole = ScanConfig(root=root, rules=(TX,), engine="mock", tokenizer=str(tiny_tokenizer_dir), probes=0,
                       use_cache=False, min_severity="low", engine_settings=EngineSettings(max_model_len=16_000),
                       window=WindowOptions(output_tokens=512, max_windows=1))
    scan = functools.partial(run_scan, engine=MockEngine())
    # The whole repository's chains need more than one window: capped.
    assert any(error.kind == "windows-capped" for error in scan(whole).errors)
    result = scan(scoped(root, tiny_tokenizer_dir, max_windows=1))
    assert not any(error.kind == "windows-capped" for error in result.errors), result.errors
    assert {finding.path for finding in result.findings} == {"svc_a/services.py"}
