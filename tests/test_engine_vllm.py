"""The vllm engine: LLM/SamplingParams construction and batching, checked with a fake vllm."""

from __future__ import annotations

import json
import os
import sys
import types
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from auditor.engine import ChatMessage, ChatRequest, EngineSettings, vllm_engine
from auditor.engine.vllm_engine import (
    VllmEngine,
    llm_kwargs,
    resolve_kv_cache_dtype,
    sampling_kwargs,
)
from auditor.errors import EngineUnavailable


@dataclass
class FakeVllm:
    """What the fake vllm module saw: LLM constructions and chat calls."""

    llms: list[Any] = field(default_factory=list)
    chats: list[dict[str, Any]] = field(default_factory=list)
    fail_when_thinking: bool | None = None


class FakeSamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class FakeStructuredOutputsParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class FakeTokenizer:
    """Counts one token per whitespace-separated word of the rendered prompt."""

    def apply_chat_template(self, conversation, *, tokenize, add_generation_prompt, enable_thinking):  # type: ignore[no-untyped-def]
        assert tokenize is False and add_generation_prompt is True
        return " ".join(message["content"] for message in conversation)

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return list(range(len(text.split())))


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> FakeVllm:
    seen = FakeVllm()

    class FakeLLM:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs
            seen.llms.append(self)

        def get_tokenizer(self) -> FakeTokenizer:
            return FakeTokenizer()

        def chat(self, messages, sampling_params=None, use_tqdm=True, chat_template_kwargs=None):  # type: ignore[no-untyped-def]
            seen.chats.append(
                {
                    "messages": messages,
                    "sampling_params": sampling_params,
                    "use_tqdm": use_tqdm,
                    "chat_template_kwargs": chat_template_kwargs,
                }
            )
            thinking = chat_template_kwargs["enable_thinking"]
            if seen.fail_when_thinking is thinking:
                raise ValueError("This model's maximum context length is 1000 tokens.")
            outputs = []
            for conversation in messages:
                user = conversation[-1]["content"]
                text = (
                    f"trace for {user}\n</think>\n\nanswer for {user}" if thinking else f"answer for {user}"
                )
                outputs.append(
                    SimpleNamespace(
                        prompt_token_ids=list(range(40)),
                        num_cached_tokens=32,
                        outputs=[SimpleNamespace(text=text, token_ids=[1, 2, 3, 4, 5], finish_reason="stop")],
                    )
                )
            return outputs

    vllm = types.ModuleType("vllm")
    vllm.__spec__ = ModuleSpec("vllm", None)
    vllm.LLM = FakeLLM  # type: ignore[attr-defined]
    vllm.SamplingParams = FakeSamplingParams  # type: ignore[attr-defined]
    sampling_module = types.ModuleType("vllm.sampling_params")
    sampling_module.StructuredOutputsParams = FakeStructuredOutputsParams  # type: ignore[attr-defined]
    vllm.sampling_params = sampling_module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling_module)
    monkeypatch.setattr(vllm_engine, "cuda_device_present", lambda: True)
    return seen


def request(
    rid: str,
    *,
    thinking: bool = True,
    prompt_tokens: int = 40,
    max_tokens: int = 100,
    schema: str | None = None,
) -> ChatRequest:
    return ChatRequest(
        id=rid,
        messages=(ChatMessage("system", "audit"), ChatMessage("user", rid)),
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        thinking=thinking,
        json_schema=schema,
    )


# --- pure construction ----------------------------------------------------------------


def test_llm_kwargs_follow_settings() -> None:
    settings = EngineSettings(
        model="/models/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8",
        max_num_batched_tokens=8192,
        gpu_memory_utilization=0.8,
        max_num_seqs=2,
        tensor_parallel_size=2,
        enable_prefix_caching=False,
        seed=5,
    )
    assert llm_kwargs(settings) == {
        "model": "/models/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8",
        "trust_remote_code": True,
        "max_model_len": 262_144,
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": 8192,
        "kv_cache_dtype": "fp8",
        "mamba_ssm_cache_dtype": "float32",
        "gpu_memory_utilization": 0.8,
        "max_num_seqs": 2,
        "enable_prefix_caching": False,
        "tensor_parallel_size": 2,
        "seed": 5,
        "reasoning_parser": "nemotron_v3",
    }


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "fp8"),
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "fp8"),
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "auto"),
        ("some/other-model", "auto"),
    ],
)
def test_kv_cache_dtype_from_checkpoint_name(model: str, expected: str) -> None:
    assert resolve_kv_cache_dtype(EngineSettings(model=model)) == expected


def test_kv_cache_dtype_from_local_config(tmp_path: Path) -> None:
    quantized = tmp_path / "nano"  # the name says nothing; config.json does
    quantized.mkdir()
    (quantized / "config.json").write_text(
        json.dumps({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}})
    )
    assert resolve_kv_cache_dtype(EngineSettings(model=str(quantized))) == "fp8"
    plain = tmp_path / "bf16-but-named-FP8"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "gptq"}}))
    assert resolve_kv_cache_dtype(EngineSettings(model=str(plain))) == "auto"


def test_explicit_kv_cache_dtype_wins() -> None:
    settings = EngineSettings(model="x-FP8", kv_cache_dtype="auto")
    assert llm_kwargs(settings)["kv_cache_dtype"] == "auto"


def test_sampling_kwargs() -> None:
    settings = EngineSettings(temperature=0.6, top_p=0.95, seed=9, thinking_token_budget=2048)
    assert sampling_kwargs(settings, request("w", max_tokens=300, schema='{"type": "object"}')) == {
        "temperature": 0.6,
        "top_p": 0.95,
        "max_tokens": 300,
        "seed": 9,
        "thinking_token_budget": 2048,
        "structured_outputs": {"json": '{"type": "object"}'},
    }
    without = sampling_kwargs(settings, request("w", thinking=False))
    assert "thinking_token_budget" not in without
    assert "structured_outputs" not in without


# --- availability ---------------------------------------------------------------------


def test_missing_vllm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(EngineUnavailable) as caught:
        VllmEngine(EngineSettings())
    assert "pip install 'auditor[vllm]'" in str(caught.value)
    assert "no vllm installed" in str(caught.value)


def test_missing_gpu_is_engine_unavailable(fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_engine, "cuda_device_present", lambda: False)
    with pytest.raises(EngineUnavailable, match="no CUDA device"):
        VllmEngine(EngineSettings())


def test_creating_the_engine_does_not_load_the_model(fake_vllm: FakeVllm) -> None:
    engine = VllmEngine(EngineSettings(model="m-BF16"))
    assert fake_vllm.llms == []
    assert json.loads(engine.identity())["kv_cache_dtype"] == "auto"


# --- generate with the fake vllm ------------------------------------------------------


def test_generate_builds_llm_and_sampling_params(fake_vllm: FakeVllm) -> None:
    settings = EngineSettings(model="m-FP8", seed=4, thinking_token_budget=64)
    schema = '{"type": "object"}'
    [completion] = VllmEngine(settings).generate([request("window-0", schema=schema)])
    [llm] = fake_vllm.llms
    assert llm.kwargs == llm_kwargs(settings)
    [chat] = fake_vllm.chats
    assert chat["use_tqdm"] is False
    assert chat["chat_template_kwargs"] == {"enable_thinking": True}
    assert chat["messages"] == [
        [{"role": "system", "content": "audit"}, {"role": "user", "content": "window-0"}]
    ]
    [params] = chat["sampling_params"]
    structured = params.kwargs.pop("structured_outputs")
    assert isinstance(structured, FakeStructuredOutputsParams)
    assert structured.kwargs == {"json": schema}
    assert params.kwargs == {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 100,
        "seed": 4,
        "thinking_token_budget": 64,
    }
    assert completion.request_id == "window-0"
    assert completion.reasoning == "trace for window-0"
    assert completion.text == "answer for window-0"
    assert (completion.prompt_tokens, completion.completion_tokens, completion.cached_prompt_tokens) == (
        40,
        5,
        32,
    )
    assert completion.finish_reason == "stop"


def test_requests_are_grouped_by_thinking_and_keep_order(fake_vllm: FakeVllm) -> None:
    requests = [request("a", thinking=True), request("b", thinking=False), request("c", thinking=True)]
    completions = VllmEngine(EngineSettings()).generate(requests)
    assert [c.request_id for c in completions] == ["a", "b", "c"]
    assert [c.text for c in completions] == ["answer for a", "answer for b", "answer for c"]
    assert [c.reasoning for c in completions] == ["trace for a", "", "trace for c"]
    groups = [
        (chat["chat_template_kwargs"]["enable_thinking"], [m[-1]["content"] for m in chat["messages"]])
        for chat in fake_vllm.chats
    ]
    assert groups == [(False, ["b"]), (True, ["a", "c"])]
    assert len(fake_vllm.llms) == 1


def test_over_long_prompt_is_rejected_before_submission(fake_vllm: FakeVllm) -> None:
    engine = VllmEngine(EngineSettings(max_model_len=1000))
    requests = [
        request("fits", prompt_tokens=800, max_tokens=200),
        request("too-long", prompt_tokens=900, max_tokens=200),
    ]
    events: list[Any] = []
    fits, too_long = engine.generate(requests, progress=events.append)
    assert fits.finish_reason == "stop"
    assert too_long.finish_reason == "error"
    assert too_long.error is not None and "exceeds max_model_len 1000" in too_long.error
    submitted = [m[-1]["content"] for chat in fake_vllm.chats for m in chat["messages"]]
    assert submitted == ["fits"]
    assert events[-1].completed == 2 and events[-1].total == 2


def test_unknown_prompt_length_is_counted_with_the_model_tokenizer(fake_vllm: FakeVllm) -> None:
    long_request = ChatRequest(
        id="unknown", messages=(ChatMessage("user", "word " * 950),), prompt_tokens=0, max_tokens=100
    )
    [completion] = VllmEngine(EngineSettings(max_model_len=1000)).generate([long_request])
    assert completion.finish_reason == "error"
    assert "prompt of 950 tokens" in (completion.error or "")
    assert fake_vllm.chats == []


def test_a_prompt_the_model_tokenizer_cannot_count_is_an_error_completion(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_template(self, conversation, **kwargs):  # type: ignore[no-untyped-def]
        raise ValueError("chat template error: unknown role")

    monkeypatch.setattr(FakeTokenizer, "apply_chat_template", broken_template)
    unknown = ChatRequest(id="unknown", messages=(ChatMessage("user", "x"),), prompt_tokens=0, max_tokens=10)
    known = ChatRequest(id="known", messages=(ChatMessage("user", "x"),), prompt_tokens=5, max_tokens=10)
    first, second = VllmEngine(EngineSettings()).generate([unknown, known])
    assert first.finish_reason == "error" and "cannot count the prompt" in (first.error or "")
    assert second.request_id == "known" and second.error is None  # the rest of the batch still runs


def test_a_failed_batch_becomes_error_completions(fake_vllm: FakeVllm) -> None:
    fake_vllm.fail_when_thinking = True
    thinking, plain = VllmEngine(EngineSettings()).generate(
        [request("t", thinking=True), request("p", thinking=False)]
    )
    assert thinking.finish_reason == "error"
    assert "maximum context length" in (thinking.error or "")
    assert plain.text == "answer for p"


def test_long_context_beyond_declared_needs_vllm_env(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    # setenv first so monkeypatch restores the variable's absence after the test.
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "unset")
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    VllmEngine(EngineSettings(max_model_len=524_288)).generate([request("w")])
    assert os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1"
    assert fake_vllm.llms[0].kwargs["max_model_len"] == 524_288


def test_empty_batch_loads_nothing(fake_vllm: FakeVllm) -> None:
    assert VllmEngine(EngineSettings()).generate([]) == []
    assert fake_vllm.llms == []


# --- real GPU -------------------------------------------------------------------------


def test_real_vllm_generates_on_a_gpu() -> None:
    """Runs a small chat model (AUDITOR_TEST_MODEL: a local checkpoint whose tokenizer has
    <think>/</think>, e.g. a Qwen3-0.6B copy) where vllm and CUDA are present."""
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model = os.environ.get("AUDITOR_TEST_MODEL")
    if not model:
        pytest.skip("set AUDITOR_TEST_MODEL to a small local chat checkpoint")
    settings = EngineSettings(model=model, max_model_len=4096, gpu_memory_utilization=0.5, max_num_seqs=2)
    engine = VllmEngine(settings)
    question = (ChatMessage("user", "Reply with the single word: yes"),)
    requests = [
        ChatRequest(id="off", messages=question, prompt_tokens=0, max_tokens=32, thinking=False),
        ChatRequest(id="over", messages=question, prompt_tokens=4090, max_tokens=32, thinking=False),
    ]
    on_time, over = engine.generate(requests)
    assert on_time.finish_reason in ("stop", "length")
    assert on_time.completion_tokens > 0 and on_time.prompt_tokens > 0
    assert over.finish_reason == "error"


def test_a_model_that_fails_to_load_is_engine_unavailable(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    # vLLM raises plain exceptions (OSError for an unknown checkpoint, ValueError for a bad
    # config, CUDA out of memory): they must not escape as a traceback (exit 1 reads as
    # "findings"), but as EngineUnavailable (exit 4).
    def refuse(**kwargs: Any) -> None:
        raise OSError("nvidia/nope is not a local folder and is not a valid model identifier")

    monkeypatch.setattr(sys.modules["vllm"], "LLM", refuse)
    engine = VllmEngine(EngineSettings(model="nvidia/nope"))
    with pytest.raises(EngineUnavailable, match="could not load nvidia/nope.*not a valid model identifier"):
        engine.generate([request("window-0")])


def test_an_unclosed_trace_is_no_answer(fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = VllmEngine(EngineSettings())
    draft = 'thinking: {"findings": [{"rule": "x"}]} maybe'
    output = SimpleNamespace(
        prompt_token_ids=[1, 2], num_cached_tokens=0,
        outputs=[SimpleNamespace(text=draft, token_ids=[1], finish_reason="stop")],
    )
    monkeypatch.setattr(engine, "_load", lambda: SimpleNamespace(chat=lambda *a, **k: [output]))
    [completion] = engine.generate([request("window-0")])
    assert (completion.reasoning, completion.text, completion.finish_reason) == (draft, "", "stop")
