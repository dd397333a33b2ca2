"""The ready GitHub Actions workflows: valid YAML, real actions, flags auditor accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from auditor.cli.review import review_command
from auditor.report.markdown import REVIEW_MARKER
from tests.support import REPO_ROOT

WORKFLOWS = REPO_ROOT / "docs" / "workflows"
SPARK = WORKFLOWS / "auditor-review-spark.yml"
VLLM_SERVE = WORKFLOWS / "auditor-review-vllm-serve.yml"

# Real, well-known actions at their current major versions.
KNOWN_ACTIONS = {
    "actions/checkout@v4",
    "actions/setup-python@v5",
    "actions/github-script@v7",
    "github/codeql-action/upload-sarif@v3",
    "marocchino/sticky-pull-request-comment@v2",
}


def load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    [job] = workflow["jobs"].values()
    return job["steps"]


def review_arguments(workflow: dict[Any, Any]) -> list[str]:
    """The words of the `auditor review` command line in the workflow's run scripts."""
    for step in steps(workflow):
        script = step.get("run", "")
        joined = script.replace("\\\n", " ")
        for line in joined.splitlines():
            if re.search(r'auditor"? review ', line):
                return shlex.split(line)
    raise AssertionError("no auditor review step")


def review_option_names() -> set[str]:
    app = typer.Typer()
    app.command("review")(review_command)
    app.command("other")(lambda: None)
    group = typer.main.get_command(app)
    command = group.commands["review"]  # type: ignore[attr-defined]
    return {option for param in command.params for option in (*param.opts, *param.secondary_opts)}


@pytest.mark.parametrize("path", [SPARK, VLLM_SERVE], ids=["spark", "vllm-serve"])
def test_workflow_parses_and_uses_only_real_actions(path: Path):
    workflow = load(path)
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers
    uses = [step["uses"] for step in steps(workflow) if "uses" in step]
    assert set(uses) <= KNOWN_ACTIONS, set(uses) - KNOWN_ACTIONS
    assert "actions/checkout@v4" in uses and "github/codeql-action/upload-sarif@v3" in uses
    assert workflow["permissions"]["security-events"] == "write"
    assert workflow["permissions"]["pull-requests"] == "write"
    checkout = next(step for step in steps(workflow) if step.get("uses") == "actions/checkout@v4")
    assert checkout["with"]["fetch-depth"] == 0  # the merge base must be in the clone


@pytest.mark.parametrize("path", [SPARK, VLLM_SERVE], ids=["spark", "vllm-serve"])
def test_review_command_line_uses_flags_auditor_accepts(path: Path):
    workflow = load(path)
    arguments = review_arguments(workflow)
    flags = {word for word in arguments if word.startswith("--")}
    assert flags <= review_option_names(), flags - review_option_names()
    assert {"--base", "--sarif-output", "--sarif-category", "--error"} <= flags
    assert arguments[arguments.index("--format") + 1] == "markdown"

    # The SARIF upload names the file auditor writes, with the same category.
    upload = next(step for step in steps(workflow) if step.get("uses") == "github/codeql-action/upload-sarif@v3")
    assert upload["with"]["sarif_file"] == arguments[arguments.index("--sarif-output") + 1]
    [job] = workflow["jobs"].values()
    assert upload["with"]["category"] == "${{ env.SARIF_CATEGORY }}"
    assert arguments[arguments.index("--sarif-category") + 1] == "$SARIF_CATEGORY" and job["env"]["SARIF_CATEGORY"]
    assert "git merge-base" in next(step["run"] for step in steps(workflow) if step.get("id") == "base")


def test_spark_workflow_runs_on_a_spark_runner_with_the_model_in_process():
    workflow = load(SPARK)
    [job] = workflow["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "linux", "arm64", "spark"]
    arguments = review_arguments(workflow)
    assert arguments[arguments.index("--engine") + 1] == "vllm"
    assert arguments[arguments.index("--model") + 1] == "$AUDITOR_MODEL_DIR"
    assert "AUDITOR_MODEL_DIR" in job["env"] and "AUDITOR_CACHE_DIR" in job["env"]
    comment = next(step for step in steps(workflow) if step.get("uses") == "marocchino/sticky-pull-request-comment@v2")
    assert comment["with"]["path"] == arguments[arguments.index("--output") + 1]


def test_vllm_serve_workflow_talks_to_the_server_and_updates_one_comment():
    workflow = load(VLLM_SERVE)
    arguments = review_arguments(workflow)
    assert arguments[arguments.index("--engine") + 1] == "openai"
    assert arguments[arguments.index("--base-url") + 1] == "$AUDITOR_BASE_URL"
    script = next(step for step in steps(workflow) if step.get("uses") == "actions/github-script@v7")["with"]["script"]
    assert REVIEW_MARKER in script and "updateComment" in script and "createComment" in script


@pytest.mark.parametrize("path", [SPARK, VLLM_SERVE], ids=["spark", "vllm-serve"])
def test_run_scripts_take_values_from_the_environment_not_from_interpolation(path: Path):
    # `${{ }}` inside a script is pasted into the shell source (script injection); values
    # must arrive as environment variables instead.
    for step in steps(load(path)):
        assert "${{" not in step.get("run", ""), step.get("name")
    [job] = load(path)["jobs"].values()
    assert "head.repo.full_name == github.repository" in job["if"]  # no fork code on self-hosted runners


@pytest.mark.parametrize("path", [SPARK, VLLM_SERVE], ids=["spark", "vllm-serve"])
def test_a_push_to_the_default_branch_scans_it_for_a_code_scanning_baseline(path: Path):
    workflow = load(path)
    triggers = workflow.get("on", workflow.get(True))
    assert "push" in triggers
    [job] = workflow["jobs"].values()
    assert "github.event.repository.default_branch" in job["if"]
    scan = next(step for step in steps(workflow) if step.get("id") == "scan")
    assert scan["if"] == "github.event_name == 'push'"
    assert "scan ." in scan["run"] and '--sarif-category "$SARIF_CATEGORY"' in scan["run"]
    comment = next(step for step in steps(workflow) if "comment" in step.get("name", ""))
    assert "github.event_name == 'pull_request'" in comment["if"]


def test_the_vllm_serve_workflow_installs_only_a_pinned_auditor_and_logs_its_version():
    workflow = load(VLLM_SERVE)
    [job] = workflow["jobs"].values()
    assert job["env"]["AUDITOR_PIP_SPEC"] == "${{ vars.AUDITOR_PIP_SPEC }}"  # no default from the index
    install = next(step for step in steps(workflow) if step.get("name", "").startswith("Install auditor"))["run"]
    assert "exit 64" in install and "auditor --version" in install
    # The server line in the header is the one docs/ci.md requires.
    assert "--structured-outputs-config" in path_text(VLLM_SERVE)


def test_the_spark_workflow_logs_the_installed_version():
    workflow = load(SPARK)
    assert any(step.get("run", "").strip().strip("'") == '"$AUDITOR_VENV/bin/auditor" --version' for step in steps(workflow))


def path_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")
