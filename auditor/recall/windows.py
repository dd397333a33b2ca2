"""Recall canaries in scan windows: planted in every window at no extra prefill, and read back.

Input: a packed window. Output: the same window with a few canaries inserted at spread
token depths (at file boundaries, as virtual files), the recall questions appended after
the audit task, and its prompt re-rendered and counted exactly — the canaries live in the
window's canary reserve (``PackOptions.probe_reserve_tokens``). After generation, ``read_canaries`` scores the answers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from auditor.findings.model import CanaryAnswer
from auditor.languages import language_for_path
from auditor.pack.packer import PackResult, Window, count_framed, render_frame
from auditor.recall.canaries import (
    Canary,
    CanaryError,
    RecallSummary,
    canary_blocks,
    derive_seed,
    files_around,
    insert_at,
    make_canaries,
    plan_positions,
    questions_text,
    score,
    spread_depths,
    summarize,
)
from auditor.tokens.tokenizer import PromptTokenizer

@dataclass(frozen=True)
class CanaryPlan:
    """The canaries planted in one window and where (positions are block boundaries)."""

    canaries: tuple[Canary, ...] = ()
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
    """The window with ``count`` canaries planted (fewer if the reserve cannot hold them).

    Returns the window unchanged with an empty plan when ``count`` is 0 or no canary fits.
    """
    if count <= 0 or not window.blocks:
        return window, CanaryPlan()
    languages = sorted({lang for f in window.files if (lang := language_for_path(f.path))}) or ["python"]
    limit = packed.options.max_model_len - packed.options.output_tokens
    repository_text = window.prompt
    for attempt in range(count, 0, -1):
        try:
            canaries = make_canaries(
                attempt, languages=languages, seed=derive_seed(seed, window.index), forbidden_text=repository_text
            )
        except CanaryError:
            continue
        depths = spread_depths(attempt)
        positions = plan_positions([f.tokens for f in window.files], window.frame.head_tokens, depths)
        frame = render_frame(
            tokenizer,
            repository=packed.repository,
            index=window.index,
            repo_map=packed.repo_map,
            rules=packed.rules,
            thinking=packed.options.thinking,
            probe_questions=questions_text(canaries),
            candidates=window.candidates,
        )
        groups = [canary_blocks(canary) for canary in canaries]
        blocks = insert_at(window.blocks, groups, positions)
        # The window's blocks keep their counts; only the canaries' blocks, the new frame
        # and the seams between blocks are counted (``count_framed``, as the packer counts).
        if len(window.files) != len(window.blocks):
            raise ValueError(f"window {window.index}: canaries are planted once, in a window of file blocks only")
        counted = iter(tokenizer.count_many([block for group in groups for block in group]))
        block_tokens = insert_at([f.tokens for f in window.files], [[next(counted) for _ in group] for group in groups], positions)
        planted = replace(window, blocks=blocks, frame=frame, prompt_tokens=count_framed(tokenizer, frame, blocks, block_tokens))
        if planted.prompt_tokens <= limit:
            return planted, CanaryPlan(canaries, depths, positions, tuple(f.path for f in window.files))
    return window, CanaryPlan()


def read_canaries(plan: CanaryPlan, answers: tuple[CanaryAnswer, ...], threshold: float) -> CanaryReport | None:
    """Score the window's canary answers; None when no canary was planted."""
    if not plan.canaries:
        return None
    outcomes = score(plan.canaries, plan.depths, answers)
    summary = summarize(outcomes, threshold)
    missed = tuple(
        (outcome.depth, *files_around(plan.block_paths, position))
        for outcome, position in zip(outcomes, plan.positions)
        if outcome.outcome != "correct"
    )
    return CanaryReport(summary, missed)
