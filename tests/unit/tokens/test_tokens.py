"""The tokenizer stage: exact counts equal what transformers (and so vLLM) computes."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from auditor.errors import TokenizerError
from auditor.tokens.tokenizer import (
    EstimateTokenizer,
    Message,
    TokenizerRequest,
    load_tokenizer,
    render_chatml,
)

MESSAGES = (
    Message("system", "You audit code."),
    Message("user", "<<<FILE path=\"a.py\">>>\n1|def f():\n2|    return 'é' * 2\n<<<END FILE \"a.py\">>>\n"),
)


def _reference_ids(directory, thinking: bool) -> list[int]:
    reference = AutoTokenizer.from_pretrained(str(directory))
    ids = reference.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in MESSAGES],
        tokenize=True,
        add_generation_prompt=True,
        enable_thinking=thinking,
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.mark.parametrize("thinking", [True, False])
def test_counts_match_transformers_chat_template(tiny_tokenizer_dir, thinking):
    tokenizer = load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))
    prompt = tokenizer.render(MESSAGES, thinking=thinking)
    assert tokenizer.info.exact
    assert tokenizer.count(prompt) == len(_reference_ids(tiny_tokenizer_dir, thinking))
    assert prompt.endswith("<|im_start|>assistant\n<think>\n" if thinking else "<|im_start|>assistant\n<think></think>")


def test_special_tokens_are_single_ids(tiny_tokenizer_dir):
    tokenizer = load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))
    assert tokenizer.encode("<|im_start|><|im_end|><think></think>") == [10, 11, 12, 13]


@pytest.mark.parametrize("thinking", [True, False])
def test_upstream_template_rendering_matches_transformers(standin_tokenizer_dir, thinking):
    tokenizer = load_tokenizer(TokenizerRequest(tokenizer=str(standin_tokenizer_dir)))
    reference = AutoTokenizer.from_pretrained(str(standin_tokenizer_dir))
    expected = reference.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in MESSAGES],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=thinking,
    )
    assert tokenizer.render(MESSAGES, thinking=thinking) == expected
    # The builtin fallback format is the upstream turn format.
    assert render_chatml(MESSAGES, thinking=thinking) == expected


def test_model_directory_is_a_source(tiny_tokenizer_dir):
    tokenizer = load_tokenizer(TokenizerRequest(model=str(tiny_tokenizer_dir)))
    assert tokenizer.info.source.startswith("model-dir:")
    assert tokenizer.info.exact


def test_explicit_tokenizer_that_cannot_load_is_an_error(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        load_tokenizer(TokenizerRequest(tokenizer=str(tmp_path)))
    with pytest.raises(TokenizerError, match="not a directory"):
        load_tokenizer(TokenizerRequest(tokenizer=str(tmp_path / "missing")))


def test_no_tokenizer_falls_back_to_a_labelled_overestimate(tiny_tokenizer_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    tokenizer = load_tokenizer(TokenizerRequest(model="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", allow_download=False))
    assert isinstance(tokenizer, EstimateTokenizer)
    assert not tokenizer.info.exact
    assert "not in the local Hugging Face cache" in tokenizer.info.source
    assert "ESTIMATE" in tokenizer.info.describe()
    exact = load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))
    prompt = tokenizer.render(MESSAGES, thinking=True)
    assert prompt == exact.render(MESSAGES, thinking=True)


def test_estimate_overcounts_the_standin_vocabulary_on_code(standin_tokenizer_dir):
    from auditor.pack.prompt import render_full_block, split_lines
    from tests.support import REPO_ROOT

    exact = load_tokenizer(TokenizerRequest(tokenizer=str(standin_tokenizer_dir)))
    estimate = EstimateTokenizer("test")
    for source in sorted((REPO_ROOT / "auditor").rglob("*.py")):
        text = source.read_text(encoding="utf-8")
        block = render_full_block(source.name, split_lines(text))
        assert estimate.count(block) >= exact.count(block), source.name
