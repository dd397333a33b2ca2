"""Start-up cost of the command line: building the CLI, and running ``auditor pack``, import
only what they use (no scan, many, engines, reports, doctor or plan), and the enum the plan
command restates to stay light still equals its source.

Imports are checked in a fresh interpreter (a subprocess), since this test session has
imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from auditor.cli.app import app
from tests.support import TEST_DATA

# Modules that only scan-like commands, plan/doctor or probe need: neither building the CLI
# nor packing may import them. (auditor.walk.diff's git helpers are packing's too: a
# subdirectory is packed within its repository, auditor.runs.scope.)
NOT_FOR_PACK = (
    "auditor.engine.doctor",
    # auditor.engine.base (EngineSettings, the flags' defaults) is a light leaf; the
    # registry and the engines are not.
    "auditor.engine.openai_engine",
    "auditor.engine.reasoning",
    "auditor.engine.registry",
    "auditor.engine.replay",
    "auditor.engine.vllm_engine",
    "auditor.findings.injection",
    "auditor.runs.many.runner",
    "auditor.runs.many.ray_cluster",
    "auditor.planning",
    "auditor.recall.grid",
    "auditor.report.model",
    "auditor.report.text",
    "auditor.report.json_report",
    "auditor.report.sarif",
    "auditor.report.markdown",
    "auditor.engine.result_cache",
    "auditor.runs.review",
    "auditor.runs.scan",
    # auditor.analysis.transactions and auditor.findings.model load for a pack:
    # its windows are cut around the static candidates' chains (issue #16); and
    # auditor.recall.windows with auditor.recall.canaries (standard library only): a pack
    # plants the scan's canaries, so its counts are the engine's (issue #21).
    "auditor.findings.suppress",
    "ray",
    "vllm",
    "torch",
    # typer's rich help formatter (and with it rich.markdown) loads for --help and errors only.
    "typer.rich_utils",
    "rich.markdown",
)

# What building every command (as ``auditor --help`` and config loading do) may import
# from auditor: the CLI shell and the leaf modules it needs (EngineSettings holds the
# engine flags' defaults).
CLI_SHELL = {
    "auditor",
    "auditor.cli",
    "auditor.cli.app",
    "auditor.cli.console",
    "auditor.cli.doctor",
    "auditor.cli.explain",
    "auditor.cli.flags",
    "auditor.cli.many",
    "auditor.cli.output",
    "auditor.cli.pack",
    "auditor.cli.plan",
    "auditor.cli.probe",
    "auditor.cli.review",
    "auditor.cli.rules",
    "auditor.cli.scan",
    "auditor.cli.signals",
    "auditor.defaults",
    "auditor.engine",
    "auditor.engine.base",
    "auditor.errors",
    "auditor.progress",
    "auditor.report",
    "auditor.rules",
    "auditor.rules.severity",
}


def _imported_after(code: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it must print a JSON object with "modules"."""
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _offenders(modules: list[str]) -> list[str]:
    return sorted(
        name for name in modules if any(name == banned or name.startswith(banned + ".") for banned in NOT_FOR_PACK)
    )


def test_building_every_command_imports_only_the_cli_shell() -> None:
    report = _imported_after(
        "import json, sys\n"
        "from typer.main import get_command\n"
        "from auditor.cli.app import app\n"
        "group = get_command(app)\n"
        "params = {name: sorted(p.name for p in command.params) for name, command in group.commands.items()}\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'commands': sorted(params)}))\n"
    )
    assert report["commands"] == sorted(["doctor", "explain", "pack", "plan", "probe", "review", "rules", "scan", "scan-many"])
    modules = report["modules"]
    assert isinstance(modules, list)
    assert _offenders(modules) == []
    assert sorted(name for name in modules if name.startswith("auditor")) == sorted(CLI_SHELL)
    # Rich widgets only some commands draw load when drawn.
    assert "rich.progress" not in modules and "rich.table" not in modules


@pytest.mark.parametrize("output_format", ["json", "text"])
def test_pack_run_imports_only_what_packing_uses(tmp_path: Path, tiny_tokenizer_dir: Path, output_format: str) -> None:
    repo = tmp_path / "repo"
    (repo / "shop").mkdir(parents=True)
    (repo / "shop" / "orders.py").write_text("def save_order(order):\n    order.save()\n    return order\n")
    (repo / "shop" / "views.py").write_text("from shop.orders import save_order\n\ndef checkout(order):\n    return save_order(order)\n")
    out = tmp_path / f"pack.{output_format}"
    argv = ["pack", str(repo), "--tokenizer", str(tiny_tokenizer_dir), "--rule", "tx-outside-transaction",
            "--format", output_format, "--output", str(out)]
    report = _imported_after(
        "import json, sys\n"
        "from auditor.cli.app import app\n"
        "try:\n"
        f"    app({argv!r}, prog_name='auditor')\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'code': code}))\n"
    )
    assert report["code"] == 0
    assert out.read_text(encoding="utf-8").strip()
    modules = report["modules"]
    assert isinstance(modules, list)
    assert _offenders(modules) == []
    assert {"auditor.pack.packer", "auditor.runs.prepare", "auditor.tokens.tokenizer", "auditor.walk.walker"} <= set(modules)


def test_restated_plan_precisions_match_auditor_plan() -> None:
    from auditor.cli.plan import WeightPrecision
    from auditor.planning.checkpoint import Precision

    assert [member.value for member in WeightPrecision] == [member.value for member in Precision]


def test_plan_precision_override_reaches_the_plan() -> None:
    from typer.testing import CliRunner

    config = TEST_DATA / "configs" / "nemotron-3-nano-30b-a3b.json"
    result = CliRunner().invoke(app, ["plan", "--config", str(config), "--precision", "nvfp4", "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)["plan"]
    assert (plan["precision"], plan["precision_source"]) == ("nvfp4", "--precision")


def test_stage_packages_load_their_submodules_on_first_use() -> None:
    report = _imported_after(
        "import json, sys\n"
        "from auditor.engine.base import EngineSettings\n"
        "from auditor.report.model import ScanResult\n"
        "light = sorted(sys.modules)\n"
        "from auditor.report import REPORTERS, render\n"
        "from auditor.engine import create_engine\n"
        "print(json.dumps({'modules': light, 'formats': sorted(REPORTERS), 'after': sorted(sys.modules)}))\n"
    )
    light = report["modules"]
    assert isinstance(light, list)
    assert "auditor.engine.registry" not in light and "auditor.report.json_report" not in light
    assert report["formats"] == ["json", "markdown", "sarif", "text"]
    assert {"auditor.engine.registry", "auditor.report.json_report", "auditor.report.sarif"} <= set(report["after"])
