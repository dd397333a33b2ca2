"""scan-many on Ray Data: the generation actor (checked with a fake vllm, and on a real GPU
where there is one) and the pipeline on a local 2-CPU Ray instance."""

from __future__ import annotations

import json
import os
import sys
import types
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from auditor.config.scan import ScanConfig
from auditor.engine import vllm_engine
from auditor.engine.base import ChatMessage, ChatRequest, EngineSettings
from auditor.engine.opening import EngineChoice
from auditor.errors import EngineUnavailable
from auditor.runs.many.ray_cluster import (
    GenerationActor,
    GenerationOptions,
    generation_resources,
)
from auditor.runs.many.runner import run_many
from auditor.runs.many.stages import ManyConfig
from auditor.runs.many.state import completion_from_json, request_to_json
from tests.support import (
    MANY_FIXTURES,
    copy_fixtures,
    expected_single_reports,
    index,
    many_recording,
    many_reports,
    template,
)


def window_row(repository: str, index: int, text: str) -> dict[str, Any]:
    request = ChatRequest(
        id=f"{repository}/window-{index}",
        messages=(ChatMessage("system", "audit"), ChatMessage("user", text)),
        prompt_tokens=12,
        max_tokens=64,
        json_schema='{"type": "object"}',
    )
    return {"kind": "window", "repository": repository, "window": index, "item": "", "request": request_to_json(request),
            "completion": "", "error": "", "commit": "", "items": "[]"}


def as_batch(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {column: [row[column] for row in rows] for column in rows[0]}


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A vllm module whose LLM records its arguments and answers every chat."""
    built: list[Any] = []

    class FakeLLM:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs
            self.chats: list[Any] = []
            built.append(self)

        def chat(self, messages, sampling_params=None, use_tqdm=True, chat_template_kwargs=None):  # type: ignore[no-untyped-def]
            self.chats.append(messages)
            return [
                SimpleNamespace(
                    prompt_token_ids=list(range(12)),
                    num_cached_tokens=0,
                    outputs=[SimpleNamespace(text=f"thought\n</think>\n{{\"for\": \"{m[-1]['content']}\"}}",
                                             token_ids=[1, 2, 3], finish_reason="stop")],
                )
                for m in messages
            ]

    vllm = types.ModuleType("vllm")
    vllm.__spec__ = ModuleSpec("vllm", None)
    vllm.LLM = FakeLLM  # type: ignore[attr-defined]
    vllm.SamplingParams = lambda **kwargs: kwargs  # type: ignore[attr-defined]
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = lambda **kwargs: kwargs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    monkeypatch.setattr(vllm_engine, "cuda_device_present", lambda: True)
    return built


# --- the generation actor, without Ray and without a GPU -------------------------------


def test_generation_actor_runs_one_llm_over_windows_of_several_repositories(fake_vllm: list[Any]) -> None:
    settings = EngineSettings(model="/models/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", max_model_len=4096, max_num_seqs=2)
    actor = GenerationActor(GenerationOptions(EngineChoice("vllm"), settings))
    assert fake_vllm == [], "the model loads on the first batch, not when the actor starts"
    repository_row = {**window_row("api", 0, "x"), "kind": "repository", "request": "", "window": -1}
    batch = as_batch([window_row("api", 0, "first"), repository_row, window_row("web", 3, "second")])
    answered = actor(batch)

    assert len(fake_vllm) == 1 and fake_vllm[0].kwargs == vllm_engine.llm_kwargs(settings)
    assert len(fake_vllm[0].chats) == 1 and len(fake_vllm[0].chats[0]) == 2, "one chat call for both repositories"
    first, passed, second = answered["completion"]
    assert passed == ""
    assert completion_from_json(first).request_id == "api/window-0"
    assert completion_from_json(first).text == '{"for": "first"}'
    assert completion_from_json(second).request_id == "web/window-3"
    assert completion_from_json(second).completion_tokens == 3


def test_generation_actor_refuses_to_start_without_vllm_or_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_engine, "vllm_unavailable_reason", lambda **_: "no vllm installed")
    with pytest.raises(EngineUnavailable, match="no vllm installed"):
        GenerationActor(GenerationOptions(EngineChoice("vllm"), EngineSettings()))


def test_gpus_per_actor_follow_the_engine(tmp_path: Path) -> None:
    def config(engine: str, gpus: float | None = None, tp: int = 1) -> ManyConfig:
        scan = ScanConfig(root=Path("."), engine=engine, engine_settings=EngineSettings(tensor_parallel_size=tp))
        return ManyConfig(targets=tmp_path, out=tmp_path, scan=scan, gpus_per_worker=gpus)

    assert generation_resources(config("vllm", tp=2), EngineChoice("vllm")) == 2.0
    assert generation_resources(config("openai"), EngineChoice("openai")) == 0.0
    assert generation_resources(config("vllm", gpus=0.5), EngineChoice("vllm")) == 0.5


@pytest.mark.skipif(not os.environ.get("AUDITOR_TEST_MODEL"), reason="set AUDITOR_TEST_MODEL to a local checkpoint")
def test_generation_actor_on_a_real_gpu() -> None:
    pytest.importorskip("vllm")
    if not vllm_engine.cuda_device_present():
        pytest.skip("no CUDA device")
    settings = EngineSettings(model=os.environ["AUDITOR_TEST_MODEL"], max_model_len=8192, max_num_seqs=2,
                              gpu_memory_utilization=0.85)
    actor = GenerationActor(GenerationOptions(EngineChoice("vllm"), settings))
    answered = actor(as_batch([window_row("api", 0, "Reply with {}"), window_row("web", 0, "Reply with {}")]))
    completions = [completion_from_json(text) for text in answered["completion"]]
    assert [c.request_id for c in completions] == ["api/window-0", "web/window-0"]
    assert all(c.error is None and c.completion_tokens > 0 for c in completions)


# --- the pipeline on a local Ray instance ----------------------------------------------


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_ray_scan_many_equals_single_scans_and_resumes(local_ray, tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    repos = copy_fixtures(tmp_path)
    expected = expected_single_reports(tmp_path, repos, tiny_tokenizer_dir)
    out = tmp_path / "run"
    config = ManyConfig(targets=repos, out=out, scan=template(tiny_tokenizer_dir, replay=many_recording(tmp_path)),
                        backend="ray", batch_size=2)
    result = run_many(config)

    assert result.backend == "ray" and result.windows_generated == 3
    for name in MANY_FIXTURES:
        assert many_reports(out, name) == expected[name], name
    first_index = index(out)
    assert [r["status"] for r in first_index["repositories"]] == ["ok", "ok", "ok"]
    assert not list((out / "work").glob("*.pickle")), "plans are removed once reports are written"

    again = run_many(config)
    assert (again.windows_generated, again.windows_reused) == (0, 3)
    for name in MANY_FIXTURES:
        assert many_reports(out, name) == expected[name], name
    sequential = tmp_path / "sequential"
    run_many(ManyConfig(targets=repos, out=sequential, scan=config.scan, backend="sequential"))
    assert json.loads((sequential / "index.json").read_text()) == first_index


def test_ray_run_records_a_failed_repository_and_finishes_the_others(local_ray, tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    copy_fixtures(tmp_path, ("go_inventory",))
    spec = tmp_path / "targets.txt"
    spec.write_text("repos/go_inventory\nrepos/missing\n", encoding="utf-8")
    out = tmp_path / "run"
    config = ManyConfig(targets=spec, out=out, scan=template(tiny_tokenizer_dir, replay=many_recording(tmp_path)),
                        backend="ray")
    result = {r.key: r for r in run_many(config).repositories}
    assert result["go_inventory"].status == "ok" and result["go_inventory"].windows == 1
    assert result["missing"].status == "failed" and "not a directory" in result["missing"].error
    state = [json.loads(line) for line in (out / "state.jsonl").read_text().splitlines()]
    assert {(r["repository"], r["status"]) for r in state} == {("go_inventory", "done"), ("missing", "repository-failed")}


def test_auto_engine_on_a_cluster_with_gpus_is_vllm() -> None:
    from auditor.engine.opening import choose_engine

    assert choose_engine("auto", EngineSettings(), cluster_gpus=8.0).name == "vllm"
    assert choose_engine("auto", EngineSettings(), endpoints=("http://a:8000/v1",), cluster_gpus=8.0).name == "openai"


def test_an_actor_that_cannot_start_its_engine_fails_the_run_cleanly(local_ray, tmp_path: Path, tiny_tokenizer_dir: Path) -> None:
    from auditor.runs.many.ray_cluster import PipelineError

    repos = copy_fixtures(tmp_path, ("go_inventory",))
    config = ManyConfig(targets=repos, out=tmp_path / "run", scan=template(tiny_tokenizer_dir), backend="ray")
    with pytest.raises(PipelineError, match="needs a recording"):
        run_many(config)


def test_workers_import_the_installed_package_from_a_directory_holding_an_auditor_folder(tmp_path: Path) -> None:
    # A Django app called `auditor` in the directory scan-many is started from: Ray puts
    # that directory first on every worker's sys.path unless the job has a working_dir.
    pytest.importorskip("ray")
    import subprocess
    import sys

    start = tmp_path / "project"
    (start / "auditor").mkdir(parents=True)
    (start / "auditor" / "__init__.py").write_text("raise ImportError('the project app, not the tool')\n")
    driver = tmp_path / "driver" / "run.py"
    driver.parent.mkdir()
    driver.write_text(
        "import ray\n"
        "from auditor.runs.many.ray_cluster import worker_runtime_env\n"
        "with worker_runtime_env() as runtime_env:\n"
        "    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)\n"
        "@ray.remote\n"
        "def imported():\n"
        "    import auditor, auditor.runs.many.ray_cluster\n"
        "    return auditor.__version__\n"
        "print('worker imported auditor', ray.get(imported.remote(), timeout=120))\n"
        "ray.shutdown()\n",
        encoding="utf-8",
    )
    completed = subprocess.run(
        [sys.executable, str(driver)], cwd=start, capture_output=True, text=True, timeout=240, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "worker imported auditor" in completed.stdout


def test_relative_paths_of_a_ray_run_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from auditor.runs.many.ray_cluster import with_absolute_paths

    monkeypatch.chdir(tmp_path)
    config = ManyConfig(targets=Path("targets.txt"), out=Path("run"))
    absolute = with_absolute_paths(config)
    assert absolute.targets == tmp_path / "targets.txt" and absolute.out == tmp_path / "run"
    assert absolute.scan.root.is_absolute()
    assert with_absolute_paths(absolute) == absolute
