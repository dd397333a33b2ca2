"""The engine contract: reasoning splitting and the engine registry."""

from __future__ import annotations

import sys
import textwrap
import types
from importlib.machinery import ModuleSpec
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from auditor.engine import (
    ChatMessage,
    ChatRequest,
    Completion,
    Engine,
    EngineChoice,
    EngineSettings,
    available_engines,
    choose_engine,
    create_engine,
    register_engine,
    registry,
    split_output,
    split_reasoning,
    vllm_engine,
)
from auditor.engine.replay import ReplayEngine
from auditor.errors import EngineUnavailable, UsageError

# --- split_reasoning ------------------------------------------------------------------


def test_split_trace_and_answer_with_both_tags() -> None:
    assert split_reasoning('<think>\nthe trace\n</think>\n\n{"findings": []}') == (
        "the trace",
        '{"findings": []}',
    )


def test_split_when_the_generation_prompt_opened_the_trace() -> None:
    # Nemotron's template ends the prompt with "<think>\n": outputs hold only the close.
    assert split_reasoning("walk the chain\n</think>\nanswer") == ("walk the chain", "answer")


def test_no_trace_is_all_answer() -> None:
    assert split_reasoning('  {"findings": []}\n') == ("", '{"findings": []}')


def test_unterminated_trace_has_empty_answer() -> None:
    assert split_reasoning("<think>\nstill thinking about views.py") == (
        "still thinking about views.py",
        "",
    )


def test_first_close_tag_ends_the_trace() -> None:
    # An answer may quote </think> (issue 15, item 6): the trace ends at its first close.
    reasoning, answer = split_reasoning('a trace </think>{"findings": [{"explanation": "x </think> y"}]}')
    assert reasoning == "a trace"
    assert answer == '{"findings": [{"explanation": "x </think> y"}]}'


def test_empty_answer_after_trace() -> None:
    assert split_reasoning("long trace</think>\n") == ("long trace", "")


def test_truncated_trace_without_tags_is_reasoning_when_thinking() -> None:
    text = 'drafting {"findings": [{"rule": "x"'
    assert split_output(text, thinking=True, finish_reason="length") == (text, "")


def test_truncated_output_without_thinking_is_answer() -> None:
    text = '{"findings": [{"rule": "x"'
    assert split_output(text, thinking=False, finish_reason="length") == ("", text)


def test_finished_output_without_close_tag_is_an_unclosed_trace_when_thinking() -> None:
    # The generation prompt opened the trace; without </think> it never closed (as the
    # nemotron_v3 reasoning parser reads it), so nothing in it is the answer.
    assert split_output("still weighing {\"findings\": []}", thinking=True, finish_reason="stop") == (
        'still weighing {"findings": []}',
        "",
    )
    assert split_output("plain answer", thinking=False, finish_reason="stop") == ("", "plain answer")


def test_split_output_uses_close_tag_when_present() -> None:
    assert split_output("t</think>a", thinking=True, finish_reason="length") == ("t", "a")


# --- registry -------------------------------------------------------------------------


class EchoEngine:
    """A third-party engine: answers every request with its last message."""

    name = "echo"

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings

    def identity(self) -> str:
        return f"echo:{self.settings.seed}"

    def generate(self, requests, progress=None) -> list[Completion]:  # type: ignore[no-untyped-def]
        return [
            Completion(
                request_id=r.id,
                text=r.messages[-1].content,
                reasoning="",
                finish_reason="stop",
                prompt_tokens=r.prompt_tokens,
                completion_tokens=1,
            )
            for r in requests
        ]


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registered", {})


def test_unknown_engine_lists_known_names(isolated_registry: None) -> None:
    with pytest.raises(UsageError) as caught:
        create_engine("gpt-9", EngineSettings())
    message = str(caught.value)
    assert "gpt-9" in message
    assert "openai, replay, vllm" in message


def test_builtins_are_listed_without_importing_vllm(isolated_registry: None) -> None:
    assert {"openai", "replay", "vllm"} <= set(available_engines())
    assert available_engines() == tuple(sorted(available_engines()))


def test_registered_engine_is_created(isolated_registry: None) -> None:
    register_engine("echo", EchoEngine)
    engine = create_engine("echo", EngineSettings(seed=7))
    assert isinstance(engine, Engine)
    assert engine.identity() == "echo:7"
    request = ChatRequest(id="window-0", messages=(ChatMessage("user", "hi"),), prompt_tokens=3, max_tokens=8)
    assert engine.generate([request])[0].text == "hi"
    assert "echo" in available_engines()


def test_register_engine_rejects_empty_name(isolated_registry: None) -> None:
    with pytest.raises(UsageError):
        register_engine(" ", EchoEngine)


def _plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "auditor_echo_plugin.py").write_text(
        textwrap.dedent(
            """
            from auditor.engine import Completion

            class Engine:
                name = "echo-plugin"
                def __init__(self, settings):
                    self.settings = settings
                def identity(self):
                    return "echo-plugin"
                def generate(self, requests, progress=None):
                    return []
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_entry_point_plugin_loads_lazily(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_registry: None
) -> None:
    _plugin_module(tmp_path, monkeypatch)
    point = EntryPoint(
        name="echo-plugin", value="auditor_echo_plugin:Engine", group=registry.ENTRY_POINT_GROUP
    )
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [point] if group == registry.ENTRY_POINT_GROUP else []
    )
    monkeypatch.delitem(sys.modules, "auditor_echo_plugin", raising=False)
    assert "echo-plugin" in available_engines()
    assert "auditor_echo_plugin" not in sys.modules
    engine = create_engine("echo-plugin", EngineSettings())
    assert engine.identity() == "echo-plugin"


def test_plugin_cannot_take_a_builtin_name(
    monkeypatch: pytest.MonkeyPatch, isolated_registry: None, tmp_path: Path
) -> None:
    point = EntryPoint(name="replay", value="somewhere_else:Engine", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point])
    recording = tmp_path / "r.jsonl"
    recording.write_text('{"request_id": "window-0", "text": "x"}\n')
    assert isinstance(create_engine("replay", EngineSettings(replay_path=str(recording))), ReplayEngine)


def test_broken_plugin_is_engine_unavailable(
    monkeypatch: pytest.MonkeyPatch, isolated_registry: None
) -> None:
    point = EntryPoint(
        name="ghost", value="auditor_no_such_module_xyz:Engine", group=registry.ENTRY_POINT_GROUP
    )
    monkeypatch.setattr(registry, "entry_points", lambda group: [point])
    with pytest.raises(EngineUnavailable, match="ghost"):
        create_engine("ghost", EngineSettings())


def test_builtin_openai_without_server_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, isolated_registry: None
) -> None:
    monkeypatch.delenv("AUDITOR_BASE_URL", raising=False)
    with pytest.raises(EngineUnavailable, match="AUDITOR_BASE_URL"):
        create_engine("openai", EngineSettings())


# --- choose_engine (auto) ---------------------------------------------------------------------


def test_auto_without_vllm_or_server_is_static(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # vllm not importable, on any machine
    monkeypatch.delenv("AUDITOR_BASE_URL", raising=False)
    choice = choose_engine("auto", EngineSettings())
    assert choice.name == "static" and not choice.runs_model
    assert choice.notice == "engine auto -> static: no vllm installed and no AUDITOR_BASE_URL: running the static pass only (no model)"


def test_auto_with_base_url_env_is_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.setenv("AUDITOR_BASE_URL", "http://gpu-box:8000/v1")
    choice = choose_engine("auto", EngineSettings())
    assert choice.name == "openai"
    assert "http://gpu-box:8000/v1" in (choice.notice or "")


def test_auto_with_base_url_setting_is_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.delenv("AUDITOR_BASE_URL", raising=False)
    assert choose_engine("auto", EngineSettings(base_url="http://h:1/v1")).name == "openai"


def test_auto_prefers_vllm_with_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("vllm")
    fake.__spec__ = ModuleSpec("vllm", None)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr(vllm_engine, "cuda_device_present", lambda: True)
    monkeypatch.setenv("AUDITOR_BASE_URL", "http://gpu-box:8000/v1")
    assert choose_engine("auto", EngineSettings()).name == "vllm"


def test_auto_with_vllm_but_no_gpu_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("vllm")
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr(vllm_engine, "cuda_device_present", lambda: False)
    monkeypatch.delenv("AUDITOR_BASE_URL", raising=False)
    choice = choose_engine("auto", EngineSettings())
    assert choice.name == "static"
    assert "no CUDA device" in (choice.notice or "")


def test_a_named_engine_is_taken_as_given_and_static_opens_no_model() -> None:
    from auditor.engine.opening import NoModel, open_engine

    assert choose_engine("replay", EngineSettings()) == EngineChoice("replay")
    assert isinstance(open_engine(choose_engine("static", EngineSettings()), EngineSettings()), NoModel)


def test_scan_many_context_decides_auto_before_this_machine() -> None:
    assert choose_engine("auto", EngineSettings(), endpoints=("http://a/v1", "http://b/v1")).name == "openai"
    assert choose_engine("auto", EngineSettings(), cluster_gpus=8.0).name == "vllm"
    assert choose_engine("vllm", EngineSettings(), endpoints=("http://a/v1",)).name == "vllm"


def test_several_endpoints_open_one_pool_behind_the_result_cache(tmp_path) -> None:
    from auditor.engine.opening import open_engine
    from auditor.engine.pool import EndpointPoolEngine
    from auditor.engine.result_cache import CachingEngine

    settings = EngineSettings(model="m")
    opened = open_engine(EngineChoice("openai"), settings, endpoints=("http://a:1/v1", "http://b:1/v1"), cache_dir=tmp_path)
    assert isinstance(opened, CachingEngine)
    assert isinstance(open_engine(EngineChoice("openai"), settings, use_cache=False,
                                  endpoints=("http://a:1/v1", "http://b:1/v1")), EndpointPoolEngine)
