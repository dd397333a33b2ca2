"""Canaries: recall probes planted in every scan window at no extra prefill.

Input: a packed window. Output: the same window with a few needles inserted at spread
token depths (at file boundaries, as virtual files), the recall questions appended after
the audit task, and its prompt re-rendered and counted exactly — the needles live in the
window's probe reserve. After generation, ``read_canaries`` scores the answers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from auditor.findings import ProbeAnswer
from auditor.languages import language_for_path
from auditor.pack import PackResult, Window
from auditor.probe import (
    Needle,
    ProbeError,
    RecallSummary,
    derive_seed,
    files_around,
    insert_blocks,
    make_needles,
    plan_positions,
    questions_text,
    score,
    spread_depths,
    summarize,
)
from auditor.prompt import build_messages
from auditor.tokens import PromptTokenizer

DEFAULT_CANARIES = 3
DEFAULT_RECALL_THRESHOLD = 0.8


@dataclass(frozen=True)
class CanaryPlan:
    """The needles planted in one window and where (positions are block boundaries)."""

    needles: tuple[Needle, ...] = ()
    depths: tuple[float, ...] = ()
    positions: tuple[int, ...] = ()
    block_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class CanaryReport:
    """Recall measured on one window's canaries."""

    summary: RecallSummary
    missed: tuple[tuple[float, str | None, str | None], ...]  # (depth, file before, file after)


def plant_canaries(
    packed: PackResult, window: Window, tokenizer: PromptTokenizer, count: int, seed: int
) -> tuple[Window, CanaryPlan]:
    """The window with ``count`` needles planted (fewer if the reserve cannot hold them).

    Returns the window unchanged with an empty plan when ``count`` is 0 or no needle fits.
    """
    if count <= 0 or not window.blocks:
        return window, CanaryPlan()
    languages = sorted({lang for f in window.files if (lang := language_for_path(f.path))}) or ["python"]
    first_block = window.prompt.index(window.blocks[0])
    prefix_tokens = tokenizer.count(window.prompt[:first_block])
    limit = packed.options.max_model_len - packed.options.output_tokens
    for attempt in range(count, 0, -1):
        try:
            needles = make_needles(
                attempt, languages=languages, seed=derive_seed(seed, window.index), forbidden_text=window.prompt
            )
        except ProbeError:
            continue
        depths = spread_depths(attempt)
        positions = plan_positions([f.tokens for f in window.files], prefix_tokens, depths)
        blocks = insert_blocks(window.blocks, needles, positions)
        messages = build_messages(
            repository=packed.repository,
            window_index=window.index,
            repo_map=packed.repo_map,
            blocks=blocks,
            rules=packed.rules,
            probe_questions=questions_text(needles),
        )
        prompt = tokenizer.render(messages, thinking=packed.options.thinking)
        prompt_tokens = tokenizer.count(prompt)
        if prompt_tokens <= limit:
            planted = replace(window, messages=messages, prompt=prompt, prompt_tokens=prompt_tokens)
            plan = CanaryPlan(needles, depths, positions, tuple(f.path for f in window.files))
            return planted, plan
    return window, CanaryPlan()


def read_canaries(plan: CanaryPlan, answers: tuple[ProbeAnswer, ...], threshold: float) -> CanaryReport | None:
    """Score the window's probe answers; None when no canary was planted."""
    if not plan.needles:
        return None
    outcomes = score(plan.needles, plan.depths, answers)
    summary = summarize(outcomes, threshold)
    missed = tuple(
        (outcome.depth, *files_around(plan.block_paths, position))
        for outcome, position in zip(outcomes, plan.positions)
        if outcome.outcome != "correct"
    )
    return CanaryReport(summary, missed)
