"""The shipped vLLM-serve workflow's steps run as a script: install auditor from a pinned
source (a wheel of this checkout) into a fresh virtualenv, find the merge base, review a
small git repository built from a fixture, write SARIF and the PR comment; exit codes as
docs/ci.md documents them.

One test on purpose (building the environment takes a few seconds); the wheel is built by
hand from the source tree, so no build backend or package index is needed."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor import __version__
from auditor.report.markdown import REVIEW_MARKER
from tests.support import FIXTURES, REPO_ROOT, git

WORKFLOW = REPO_ROOT / "docs" / "workflows" / "auditor-review-vllm-serve.yml"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"sha256={digest}"


def build_wheel(directory: Path) -> Path:
    """A pure-Python wheel of this checkout's ``auditor`` package, written with zipfile."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dist_info = f"auditor-{__version__}.dist-info"
    files: dict[str, bytes] = {}
    for path in sorted((REPO_ROOT / "auditor").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(REPO_ROOT).as_posix()] = path.read_bytes()
    files[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: auditor\nVersion: {__version__}\n".encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entry_points = ["[console_scripts]", *(f"{name} = {target}" for name, target in project["scripts"].items())]
    for group, points in project.get("entry-points", {}).items():
        entry_points += ["", f"[{group}]", *(f"{name} = {target}" for name, target in points.items())]
    files[f"{dist_info}/entry_points.txt"] = ("\n".join(entry_points) + "\n").encode()
    record = [f"{name},{_record_hash(data)},{len(data)}" for name, data in files.items()] + [f"{dist_info}/RECORD,,"]
    wheel = directory / f"auditor-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def make_venv(directory: Path) -> Path:
    """A virtualenv that sees this interpreter's packages (auditor's dependencies, pip) but
    not its auditor: a plain path in a .pth file, whose own .pth files (an editable
    install's finder) are not processed."""
    venv.EnvBuilder(with_pip=False).create(directory)
    purelib = Path(sysconfig.get_paths(vars={"base": str(directory), "platbase": str(directory)})["purelib"])
    (purelib / "_parent_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return directory / "bin"


def pull_request_repo(directory: Path) -> tuple[Path, str]:
    """A repository whose base commit has no code and whose head adds a fixture app (every
    finding is new); ``origin/main`` points at the base, as in a pull-request checkout."""
    repo = directory / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("shop\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    shutil.copytree(FIXTURES / "django_shop", repo / "shop")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add the shop")
    git(repo, "update-ref", "refs/remotes/origin/main", base)
    return repo, base


def workflow_steps() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The job's steps by id (else by name), and the job's environment."""
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    [job] = data["jobs"].values()
    return {step["id"] if "id" in step else step.get("name", ""): step for step in job["steps"]}, job["env"]


def run_step(script: str, cwd: Path, env: dict[str, str]) -> tuple[int, dict[str, str], str]:
    """Run one step's script as GitHub does (bash -e -o pipefail); its exit status, the
    outputs it wrote to $GITHUB_OUTPUT and its output."""
    outputs = cwd.parent / "github-output"
    outputs.write_text("", encoding="utf-8")
    completed = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd, env={**env, "GITHUB_OUTPUT": str(outputs)}, capture_output=True, text=True, timeout=120,
    )
    written = dict(line.split("=", 1) for line in outputs.read_text(encoding="utf-8").splitlines() if "=" in line)
    return completed.returncode, written, completed.stdout + completed.stderr


@pytest.mark.slow
def test_the_vllm_serve_workflow_installs_a_pinned_auditor_reviews_and_reports(tmp_path: Path):
    steps, job_env = workflow_steps()
    install = next(step for name, step in steps.items() if name.startswith("Install auditor"))["run"]
    bin_dir = make_venv(tmp_path / "venv")
    repo, base = pull_request_repo(tmp_path)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path), "NO_COLOR": "1",
        "AUDITOR_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1",
        "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_DEPS": "1",
        "BASE_REF": "main", "SARIF_CATEGORY": job_env["SARIF_CATEGORY"],
        "AUDITOR_SERVED_MODEL": "served-model", "AUDITOR_TOKENIZER_DIR": "",
        "LINK_BASE": "https://github.com/o/r/blob/0123abc/",
    }

    # No pin, a bare name from the index, a git URL at no revision, a remote wheel: the
    # install step refuses (64) and installs nothing.
    unpinned = ("", "auditor", "auditor==0.1.0", "git+https://github.com/o/auditor", "git+ssh://git@github.com/o/auditor",
                "https://example.com/auditor.whl")
    for spec in unpinned:
        code, _, output = run_step(install, repo, {**env, "AUDITOR_PIP_SPEC": spec})
        assert code == 64 and "pinned source" in output, output
    assert not (bin_dir / "auditor").exists()

    # A wheel built in the job: installed, and the job log names the version.
    wheel = build_wheel(tmp_path)
    code, _, output = run_step(install, repo, {**env, "AUDITOR_PIP_SPEC": str(wheel)})
    assert code == 0, output
    assert f"auditor {__version__}" in output
    installed = subprocess.run(
        [str(bin_dir / "python"), "-c", "import auditor; print(auditor.__file__)"],
        capture_output=True, text=True, env=env, check=True, cwd=tmp_path,
    ).stdout
    assert str(tmp_path / "venv") in installed  # the wheel's copy, not this checkout's

    code, outputs, output = run_step(steps["base"]["run"], repo, env)
    assert code == 0 and outputs["sha"] == base, output
    review = steps["review"]["run"]

    # The server is down: exit 4 (engine unavailable), and both reports say why.
    down = {**env, "BASE_SHA": base, "AUDITOR_BASE_URL": "http://127.0.0.1:9/v1"}
    code, outputs, output = run_step(review, repo, down)
    assert code == 0 and outputs["exit_code"] == "4", output
    comment = (repo / "auditor-review.md").read_text(encoding="utf-8")
    assert comment.startswith(REVIEW_MARKER) and "127.0.0.1:9" in comment
    sarif = json.loads((repo / "auditor-review.sarif").read_text(encoding="utf-8"))
    [run] = sarif["runs"]
    assert run["invocations"][0]["executionSuccessful"] is False
    assert run["automationDetails"]["id"] == f"{job_env['SARIF_CATEGORY']}/"

    # The same step with the static engine and its rule (the model-only rules would leave a
    # static review partial: 5): the head adds findings, all new, so --error exits 1.
    static = review.replace("--engine openai", "--engine static --rule tx-outside-transaction")
    static = static.replace('--base-url "$AUDITOR_BASE_URL"', "")
    code, outputs, output = run_step(static, repo, {**env, "BASE_SHA": base})
    assert code == 0 and outputs["exit_code"] == "1", output
    comment = (repo / "auditor-review.md").read_text(encoding="utf-8")
    assert comment.startswith(REVIEW_MARKER) and "### New findings" in comment
    assert "https://github.com/o/r/blob/0123abc/shop/" in comment
    sarif = json.loads((repo / "auditor-review.sarif").read_text(encoding="utf-8"))
    [run] = sarif["runs"]
    assert run["results"] and {result["baselineState"] for result in run["results"]} == {"new"}
    uris = {location["physicalLocation"]["artifactLocation"]["uri"] for result in run["results"] for location in result["locations"]}
    assert all(uri.startswith("shop/") and (repo / uri).is_file() for uri in uris), uris

    # The job's last step fails with auditor's exit code.
    fail = next(step for name, step in steps.items() if name.startswith("Fail with"))["run"]
    code, _, _ = run_step(fail, repo, {**env, "EXIT_CODE": outputs["exit_code"]})
    assert code == 1
    assert sys.executable  # the parent interpreter provided auditor's dependencies
