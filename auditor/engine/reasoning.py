"""Splitting a model's raw output into its reasoning trace and its answer.

Nemotron's chat template opens ``<think>`` in the generation prompt when thinking is on,
so a raw output is usually ``trace</think>answer`` with no opening tag; with thinking off
the prompt already holds ``<think></think>`` and the output is the answer alone.
"""

from __future__ import annotations

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def split_reasoning(text: str) -> tuple[str, str]:
    """Return ``(reasoning, answer)`` from a raw output.

    Text before the first ``</think>`` is the reasoning (a leading ``<think>`` removed),
    text after it the answer: the trace ends at its first close, and an answer that quotes
    ``</think>`` inside its JSON keeps it. Without ``</think>``: a text that starts with ``<think>``
    is an unterminated trace (answer ""), any other text is all answer. Both parts are
    stripped of surrounding whitespace.
    """
    head, closed, answer = text.partition(THINK_CLOSE)
    if not closed:
        stripped = text.lstrip()
        if stripped.startswith(THINK_OPEN):
            return stripped.removeprefix(THINK_OPEN).strip(), ""
        return "", text.strip()
    return head.lstrip().removeprefix(THINK_OPEN).strip(), answer.strip()


def split_output(text: str, *, thinking: bool, finish_reason: str) -> tuple[str, str]:
    """Return ``(reasoning, answer)`` for an output generated with ``thinking`` on or off.

    Like ``split_reasoning``, except that a raw output generated with thinking on that
    holds no ``</think>`` is all reasoning, however it ended (cut off by the token budget,
    or stopped before closing the trace): the generation prompt opened the trace, so
    nothing in it is an answer, and treating an unclosed trace as the answer would let
    drafts pass as findings. This is how the model's own reasoning parser (``nemotron_v3``,
    DeepSeek-R1 style) splits such an output. ``finish_reason`` is kept for callers.
    """
    if thinking and THINK_CLOSE not in text:
        return text.strip().removeprefix(THINK_OPEN).strip(), ""
    return split_reasoning(text)
