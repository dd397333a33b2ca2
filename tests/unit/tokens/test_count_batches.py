"""Counting in batches (auditor.tokens.tokenizer.COUNT_BATCH_CHARS) gives the same counts,
in order, as one batch and as one text at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.tokens import tokenizer as tokens
from auditor.tokens.tokenizer import HFTokenizer, _batches


def test_batches_keep_order_and_hold_at_most_the_limit_unless_one_text_is_longer() -> None:
    texts = ["ab", "cde", "f", "ghijkl", "m"]
    batches = _batches(texts, 4)
    assert [text for batch in batches for text in batch] == texts
    assert batches == [["ab"], ["cde", "f"], ["ghijkl"], ["m"]]


def test_batched_counts_equal_single_counts(tiny_tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = HFTokenizer(tiny_tokenizer_dir, "test")
    texts = [f"def f{i}(order):\n    order.save()\n" * (i + 1) for i in range(12)]
    one_by_one = [tokenizer.count(text) for text in texts]
    monkeypatch.setattr(tokens, "COUNT_BATCH_CHARS", 64)
    assert tokenizer.count_many(texts) == one_by_one
