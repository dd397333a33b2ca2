"""The recall self-test grid behind ``auditor probe``: canaries at every (length, depth) cell
of a real repository haystack, asked of any engine in one batch, scored exactly.

Inputs: haystack source directories (a real repository; by default the bundled Django
fixture grown with auditor's own source files), a tokenizer, ``GridOptions`` (lengths,
depths, canaries per cell, output reserve) and an engine. Outputs: ``GridResult`` (one
``CellResult`` per cell, per-length recall with Wilson intervals, the effective length)
and, from ``write_outputs``, ``cells.jsonl``, ``summary.json``, ``heatmap.png`` and
``recall_by_depth.png``.

A cell's prompt is a scan window's prompt: the same system turn, header, repository map,
file blocks and chat template, with the recall questions as the task. Its haystack is the
corpus in path order (repeated under ``copy-N/`` paths when the corpus is too short), cut
at a line boundary so the exact prompt count lands just under ``length - output_tokens``.
Every cell of one length shares its haystack up to the canary, so an engine with prefix
caching prefills each length about once.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import BinaryIO
from pathlib import Path

import auditor
from auditor import defaults
from auditor.engine.base import ChatRequest, Completion, Engine
from auditor.errors import AuditorError, UsageError
from auditor.findings.answer import answer_schema_json, parse_answer
from auditor.findings.model import CanaryAnswer
from auditor.pack.packer import WindowFrame, render_frame
from auditor.pack.prompt import (
    MapEntry,
    render_full_block,
    render_map,
    render_task,
    split_lines,
)
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.recall.canaries import (
    DEFAULT_KEEP,
    KINDS,
    Canary,
    CanaryOutcome,
    RecallSummary,
    derive_seed,
    effective_length,
    insert_blocks,
    make_canaries,
    canary_blocks,
    canary_language,
    plan_positions,
    questions_text,
    score,
    summarize,
    wilson_interval,
)
from auditor.storage.atomic import write_atomically
from auditor.tokens.tokenizer import Message, PromptTokenizer
from auditor.walk.walker import WalkOptions, walk

# A cell's prompt aims to fill length - output_tokens within this share (never over it).
CELL_FILL_TOLERANCE = 0.01
MAX_FIT_ROUNDS = 6
# Haystack files are shown in line ranges of at most this many lines, for fine depth steps.
CORPUS_CHUNK_LINES = 60
REPOSITORY_NAME = "probe-haystack"
PROBE_EXTRA_HINT = "pip install 'auditor[probe]'"


class ProbeDependencyError(AuditorError):
    """An optional dependency of ``auditor probe`` (matplotlib, for the plots) is missing."""


@dataclass(frozen=True)
class HaystackFile:
    """One real file of the haystack corpus."""

    path: str
    text: str
    language: str | None


@dataclass(frozen=True)
class GridOptions:
    """The grid to run: context lengths (tokens), depths (fractions 0..1) and the reserve."""

    lengths: tuple[int, ...] = field(default_factory=lambda: parse_lengths(defaults.PROBE_LENGTHS))
    depths: tuple[float, ...] = field(default_factory=lambda: parse_depths(defaults.PROBE_DEPTHS))
    canaries_per_cell: int = defaults.PROBE_CANARIES_PER_CELL
    kinds: tuple[str, ...] = KINDS
    output_tokens: int = defaults.PROBE_OUTPUT_TOKENS
    thinking: bool = False
    seed: int = 0
    threshold: float = defaults.RECALL_THRESHOLD
    keep: float = DEFAULT_KEEP


@dataclass(frozen=True)
class Cell:
    """One request of the grid: a haystack sized to ``length`` with canaries at ``depth``.

    Depths are fractions of the prompt up to the end of the last file block (the task and
    questions after it are not haystack). ``position`` is the block index the canaries were
    inserted before; ``placed_depth`` the depth where they actually start;
    ``haystack_paths`` and ``haystack_tokens`` the haystack blocks in prompt order (canaries
    excluded) and their counts; ``prefix_tokens`` the prompt before the first block.
    """

    id: str
    length: int
    depth: float
    canaries: tuple[Canary, ...]
    position: int
    placed_depth: float
    prompt_tokens: int
    messages: tuple[Message, ...]
    haystack_paths: tuple[str, ...]
    haystack_tokens: tuple[int, ...]
    prefix_tokens: int


@dataclass(frozen=True)
class CellResult:
    """A cell's answers, scored; ``error`` says why the engine gave no answer (then all abstain)."""

    cell: Cell
    outcomes: tuple[CanaryOutcome, ...]
    finish_reason: str
    error: str | None


@dataclass(frozen=True)
class LengthSummary:
    """Recall over every canary of one length, with its 95% Wilson interval."""

    length: int
    recall: RecallSummary
    interval: tuple[float, float]
    mean_prompt_tokens: float


@dataclass(frozen=True)
class GridResult:
    """Every scored cell, per-length summaries and the effective length."""

    options: GridOptions
    cells: tuple[CellResult, ...]
    by_length: tuple[LengthSummary, ...]
    effective_length: int | None
    engine: str
    tokenizer: str
    haystack: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class HeatmapData:
    """The matrix behind the heatmap: ``values[row][column]`` is the recall of the cell at
    ``depths[row]`` and ``lengths[column]`` (None where no cell was run)."""

    depths: tuple[float, ...]
    lengths: tuple[int, ...]
    values: tuple[tuple[float | None, ...], ...]


# --------------------------------------------------------------------------------------
# Options from the command line.
# --------------------------------------------------------------------------------------


def parse_lengths(text: str) -> tuple[int, ...]:
    """Comma-separated token counts, "8K" style allowed (K = 1024, M = 1024^2), sorted and unique."""
    lengths: set[int] = set()
    for raw in text.split(","):
        item = raw.strip().replace("_", "")
        if not item:
            continue
        multiplier = 1
        if item[-1] in "kKmM":
            multiplier = 1024 if item[-1] in "kK" else 1024 * 1024
            item = item[:-1]
        try:
            value = float(item) * multiplier
        except ValueError:
            raise UsageError(f"--lengths: {raw.strip()!r} is not a token count like 8K or 262144") from None
        if not math.isfinite(value) or value < 1 or value != int(value):
            raise UsageError(f"--lengths: {raw.strip()!r} is not a whole positive number of tokens")
        lengths.add(int(value))
    if not lengths:
        raise UsageError("--lengths: give at least one length")
    return tuple(sorted(lengths))


def parse_depths(text: str) -> tuple[float, ...]:
    """Comma-separated depths in percent (0 to 100) as fractions 0..1, sorted and unique."""
    depths: set[float] = set()
    for raw in text.split(","):
        item = raw.strip().rstrip("%")
        if not item:
            continue
        try:
            value = float(item)
        except ValueError:
            raise UsageError(f"--depths: {raw.strip()!r} is not a percentage") from None
        if not 0 <= value <= 100:
            raise UsageError(f"--depths: {raw.strip()!r} is outside 0..100")
        depths.add(round(value / 100, 6))
    if not depths:
        raise UsageError("--depths: give at least one depth")
    return tuple(sorted(depths))


def length_label(length: int) -> str:
    """"8K" for multiples of 1024, else the plain number."""
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


# --------------------------------------------------------------------------------------
# Haystack.
# --------------------------------------------------------------------------------------


def default_haystack_sources() -> tuple[Path, ...]:
    """The bundled Django fixture (in a source checkout) and auditor's own package files."""
    package = Path(auditor.__file__).resolve().parent
    fixture = package.parent / "fixtures" / "django_shop"
    return (fixture, package) if fixture.is_dir() else (package,)


def load_haystack(sources: Sequence[Path], progress: ProgressCallback = no_progress) -> tuple[HaystackFile, ...]:
    """Every walked text file of ``sources``, in source then path order.

    With more than one source, paths are prefixed with the source directory's name so
    they stay distinct. Raises ``UsageError`` when a source is missing or nothing is found.
    """
    files: list[HaystackFile] = []
    seen: set[str] = set()
    for source in sources:
        if not source.is_dir():
            raise UsageError(f"haystack {source} is not a directory")
        walked = walk(source, WalkOptions(), progress)
        for entry in walked.files:
            if not entry.text.strip():
                continue
            path = f"{source.resolve().name}/{entry.path}" if len(sources) > 1 else entry.path
            if path in seen:
                continue
            seen.add(path)
            files.append(HaystackFile(path=path, text=entry.text, language=entry.language))
    if not files:
        raise UsageError("the haystack has no readable text files")
    return tuple(files)


class _Corpus:
    """The haystack as rendered blocks with exact counts, repeated under ``copy-N/`` on demand.

    Files longer than ``CORPUS_CHUNK_LINES`` are shown as consecutive line ranges (as scans
    show big files), so a canary can be placed at a fine token depth.
    """

    def __init__(self, files: Sequence[HaystackFile], tokenizer: PromptTokenizer):
        self._files = tuple(files)
        self._lines = [split_lines(entry.text) for entry in self._files]
        self._pieces = [
            (number, start, min(start + CORPUS_CHUNK_LINES - 1, len(lines)))
            for number, lines in enumerate(self._lines)
            for start in range(1, len(lines) + 1, CORPUS_CHUNK_LINES)
        ]
        self._tokenizer = tokenizer
        self._blocks: list[tuple[str, str, int]] = []

    def _path(self, index: int) -> str:
        copy, position = divmod(index, len(self._pieces))
        path = self._files[self._pieces[position][0]].path
        return path if copy == 0 else f"copy-{copy + 1}/{path}"

    def block(self, index: int) -> tuple[str, str, int]:
        """Path, rendered block and token count of the ``index``-th block of the endless corpus."""
        while index >= len(self._blocks):
            first = len(self._blocks)
            paths = [self._path(first + offset) for offset in range(len(self._pieces))]
            texts = [
                render_full_block(path, self._lines[number], start, end)
                for path, (number, start, end) in zip(paths, self._pieces)
            ]
            self._blocks.extend(zip(paths, texts, self._tokenizer.count_many(texts)))
        return self._blocks[index]

    def chunk(self, index: int, budget: int) -> tuple[str, str, int] | None:
        """The longest leading line range of block ``index`` whose rendered block fits ``budget``."""
        path = self.block(index)[0]
        number, start, end = self._pieces[index % len(self._pieces)]
        lines = self._lines[number]
        best: tuple[str, str, int] | None = None
        low, high = start, end - 1
        while low <= high:
            middle = (low + high) // 2
            text = render_full_block(path, lines, start, middle)
            tokens = self._tokenizer.count(text)
            if tokens <= budget:
                best, low = (path, text, tokens), middle + 1
            else:
                high = middle - 1
        return best

    def select(self, budget: int) -> list[tuple[str, str, int]]:
        """Whole blocks in corpus order while they fit ``budget``, then the longest line range
        of the next file (or of one of the few after it) that fills the gap."""
        chosen: list[tuple[str, str, int]] = []
        used = 0
        index = 0
        while True:
            block = self.block(index)
            if used + block[2] > budget:
                break
            chosen.append(block)
            used += block[2]
            index += 1
        for candidate in range(index, index + 8):
            piece = self.chunk(candidate, budget - used)
            if piece is not None:
                chosen.append(piece)
                break
        return chosen


def _recall_task(questions: str) -> str:
    example = json.dumps({"findings": [], "probes": [{"id": "<question id>", "answer": "<value>"}]}, indent=1)
    return (
        "## Task\n\nThis request is a reading test: answer the recall questions about the repository "
        "above. Do not audit it; leave the findings list empty.\n\n### Recall questions\n\n"
        f"{questions}\n## Answer format\n\nAnswer with exactly one JSON object and nothing else, in this shape:\n"
        f"{example}\n"
    )


def probe_frame(tokenizer: PromptTokenizer, repo_map: str, questions: str, thinking: bool) -> WindowFrame:
    """The frame scan sends for a window of the probe haystack (``packer.render_frame``: no
    rules, the recall questions), with its audit task replaced by the recall task; the
    tail's token count is of the rendered prompt after the file blocks."""
    frame = render_frame(
        tokenizer, repository=REPOSITORY_NAME, index=0, repo_map=repo_map, rules=(), thinking=thinking,
        probe_questions=questions,
    )
    audit_task = render_task((), questions)
    if not frame.user_tail.endswith(audit_task):
        raise AuditorError("the scan's window frame no longer ends with the task; the probe cannot replace it")
    recall = replace(frame, user_tail=frame.user_tail[: -len(audit_task)] + _recall_task(questions))
    rendered = tokenizer.render(probe_messages(recall, [_SENTINEL]), thinking=thinking)
    prompt_head, found, prompt_tail = rendered.partition(_SENTINEL)
    if not found or prompt_head != frame.prompt_head:
        raise AuditorError("the chat template altered the file blocks; cannot size probe cells")
    return replace(recall, prompt_tail=prompt_tail, tail_tokens=tokenizer.count(prompt_tail))


def probe_messages(frame: WindowFrame, blocks: Sequence[str]) -> tuple[Message, ...]:
    """The probe's chat messages: ``blocks`` in its frame (see :func:`probe_frame`)."""
    return Message("system", frame.system), Message("user", frame.user_head + "".join(blocks) + frame.user_tail)


_SENTINEL = "\x00probe-blocks\x00"


def _languages(files: Sequence[HaystackFile]) -> tuple[str, ...]:
    return tuple(sorted({language for entry in files if entry.language for language in [canary_language(entry.language)] if language}))


def build_cells(
    files: Sequence[HaystackFile],
    tokenizer: PromptTokenizer,
    options: GridOptions,
    progress: ProgressCallback = no_progress,
) -> tuple[Cell, ...]:
    """One cell per (length, depth), lengths ascending, then depths ascending.

    Canaries are drawn per cell (seeded by the run seed, length and depth) in the languages
    of the haystack, unique against the whole corpus. Each prompt counts at most
    ``length - output_tokens`` tokens, exactly; ``UsageError`` when a length cannot hold
    the scaffold and the canaries.
    """
    if options.canaries_per_cell < 1:
        raise UsageError("--needles-per-cell must be at least 1")
    corpus = _Corpus(files, tokenizer)
    repo_map = render_map([MapEntry(entry.path) for entry in files], detail=3)
    languages = _languages(files)
    scaffold_text = "".join(message.content for message in probe_messages(probe_frame(tokenizer, repo_map, "", options.thinking), []))
    forbidden = "\n".join([scaffold_text, *(entry.path for entry in files), *(entry.text for entry in files)])
    cells: list[Cell] = []
    total = len(options.lengths) * len(options.depths)
    for length in options.lengths:
        target = length - options.output_tokens
        for depth in options.depths:
            canaries = make_canaries(
                options.canaries_per_cell,
                languages=languages,
                seed=derive_seed(options.seed, length, depth),
                forbidden_text=forbidden,
                kinds=options.kinds,
            )
            cells.append(_build_cell(corpus, tokenizer, repo_map, canaries, length, target, depth, options.thinking))
            progress(ProgressEvent(stage="probe", completed=len(cells), total=total))
    return tuple(cells)


def _build_cell(
    corpus: _Corpus,
    tokenizer: PromptTokenizer,
    repo_map: str,
    canaries: tuple[Canary, ...],
    length: int,
    target: int,
    depth: float,
    thinking: bool,
) -> Cell:
    questions = questions_text(canaries)
    frame = probe_frame(tokenizer, repo_map, questions, thinking)
    prefix_tokens, suffix_tokens = frame.head_tokens, frame.tail_tokens
    planted = [block for canary in canaries for block in canary_blocks(canary)]
    canary_tokens = sum(tokenizer.count_many(planted))
    budget = target - prefix_tokens - suffix_tokens - canary_tokens
    if budget < 0:
        raise UsageError(
            f"length {length}: the prompt scaffold and needles take {target - budget} tokens, more than "
            f"{target} (length minus the {length - target}-token output reserve); use longer --lengths"
        )
    best: tuple[int, int, list[int], list[tuple[str, str, int]], tuple[Message, ...]] | None = None
    for _ in range(MAX_FIT_ROUNDS):
        haystack = corpus.select(budget)
        block_tokens = [tokens for _, _, tokens in haystack]
        (position,) = plan_positions(block_tokens, prefix_tokens, [depth])
        blocks = insert_blocks([text for _, text, _ in haystack], canaries, [position] * len(canaries))
        messages = probe_messages(frame, blocks)
        prompt_tokens = tokenizer.count(tokenizer.render(messages, thinking=thinking))
        # Pieces counted apart can merge at their seams, and a cut line leaves a gap: steer
        # the haystack budget by what the whole count misses, keeping the fullest fit.
        if prompt_tokens <= target:
            if best is None or prompt_tokens > best[0]:
                best = (prompt_tokens, position, block_tokens, haystack, messages)
            if prompt_tokens >= target * (1 - CELL_FILL_TOLERANCE / 2):
                break
        budget += target - prompt_tokens
    if best is None:
        raise AuditorError(f"length {length}: could not fit the probe prompt under {target} tokens")
    prompt_tokens, position, block_tokens, haystack, messages = best
    placed = (prefix_tokens + sum(block_tokens[:position])) / (prefix_tokens + sum(block_tokens))
    return Cell(
        id=f"probe-{length}-{depth * 100:g}",
        length=length,
        depth=depth,
        canaries=canaries,
        position=position,
        placed_depth=round(placed, 6),
        prompt_tokens=prompt_tokens,
        messages=messages,
        haystack_paths=tuple(path for path, _, _ in haystack),
        haystack_tokens=tuple(block_tokens),
        prefix_tokens=prefix_tokens,
    )


# --------------------------------------------------------------------------------------
# Running and scoring.
# --------------------------------------------------------------------------------------


def cell_requests(cells: Sequence[Cell], options: GridOptions) -> list[ChatRequest]:
    """One chat request per cell, in cell order, with the answer contract as the schema."""
    schema = answer_schema_json()
    return [
        ChatRequest(
            id=cell.id,
            messages=tuple(cell.messages),
            prompt_tokens=cell.prompt_tokens,
            max_tokens=options.output_tokens,
            thinking=options.thinking,
            json_schema=schema,
        )
        for cell in cells
    ]


def score_cell(cell: Cell, completion: Completion) -> CellResult:
    """Score a cell's completion; an engine error leaves every canary abstained, with the error kept."""
    answers: tuple[CanaryAnswer, ...] = ()
    if completion.error is None and completion.finish_reason != "error":
        answers = parse_answer(completion.text).canary_answers
    outcomes = score(cell.canaries, [cell.depth] * len(cell.canaries), answers)
    return CellResult(cell=cell, outcomes=outcomes, finish_reason=completion.finish_reason, error=completion.error)


def summarize_grid(
    results: Sequence[CellResult], options: GridOptions, *, engine: str, tokenizer: str, haystack: Sequence[str] = ()
) -> GridResult:
    """Per-length recall with Wilson intervals and the effective length over ``results``."""
    by_length = []
    for length in sorted({result.cell.length for result in results}):
        cells = [result for result in results if result.cell.length == length]
        outcomes = [outcome for result in cells for outcome in result.outcomes]
        recall = summarize(outcomes, options.threshold)
        by_length.append(
            LengthSummary(
                length=length,
                recall=recall,
                interval=wilson_interval(recall.correct, recall.total),
                mean_prompt_tokens=sum(result.cell.prompt_tokens for result in cells) / len(cells),
            )
        )
    scores = {entry.length: entry.recall.recall or 0.0 for entry in by_length}
    return GridResult(
        options=options,
        cells=tuple(results),
        by_length=tuple(by_length),
        effective_length=effective_length(scores, options.keep),
        engine=engine,
        tokenizer=tokenizer,
        haystack=tuple(haystack),
    )


def run_grid(
    files: Sequence[HaystackFile],
    *,
    tokenizer: PromptTokenizer,
    engine: Engine,
    options: GridOptions = GridOptions(),
    haystack: Sequence[str] = (),
    progress: ProgressCallback = no_progress,
) -> GridResult:
    """Build every cell, send them all to ``engine`` in one ``generate`` call, and score them."""
    cells = build_cells(files, tokenizer, options, progress)
    requests = cell_requests(cells, options)
    progress(ProgressEvent(stage="engine", message=f"{len(requests)} probe cell(s) to {engine.name}"))
    completions = engine.generate(requests, progress)
    if len(completions) != len(cells) or any(c.request_id != r.id for c, r in zip(completions, requests)):
        raise AuditorError(f"engine {engine.name} did not answer the {len(requests)} probe cells one for one, in order")
    results = [score_cell(cell, completion) for cell, completion in zip(cells, completions)]
    return summarize_grid(results, options, engine=engine.identity(), tokenizer=tokenizer.info.describe(), haystack=haystack)


def heatmap_matrix(result: GridResult) -> HeatmapData:
    """Recall per (depth, length) cell: rows are depths ascending, columns lengths ascending."""
    depths = tuple(sorted({cell.cell.depth for cell in result.cells}))
    lengths = tuple(sorted({cell.cell.length for cell in result.cells}))
    recall: dict[tuple[float, int], list[int]] = {}
    for cell in result.cells:
        counts = recall.setdefault((cell.cell.depth, cell.cell.length), [0, 0])
        counts[0] += sum(1 for outcome in cell.outcomes if outcome.outcome == "correct")
        counts[1] += len(cell.outcomes)
    values = tuple(
        tuple(
            (recall[(depth, length)][0] / recall[(depth, length)][1]) if recall.get((depth, length), [0, 0])[1] else None
            for length in lengths
        )
        for depth in depths
    )
    return HeatmapData(depths=depths, lengths=lengths, values=values)


# --------------------------------------------------------------------------------------
# Outputs.
# --------------------------------------------------------------------------------------


def cell_records(result: GridResult) -> list[dict[str, object]]:
    """One JSON-ready record per planted canary, in cell then canary order."""
    records: list[dict[str, object]] = []
    for cell_result in result.cells:
        cell = cell_result.cell
        for canary, outcome in zip(cell.canaries, cell_result.outcomes):
            records.append(
                {
                    "cell": cell.id,
                    "length": cell.length,
                    "depth": cell.depth,
                    "placed_depth": cell.placed_depth,
                    "prompt_tokens": cell.prompt_tokens,
                    "needle": canary.id,
                    "kind": canary.kind,
                    "language": canary.language,
                    "virtual_paths": list(canary.paths),
                    "expected": canary.expected,
                    "distractors": list(canary.distractors),
                    "answer": outcome.answer,
                    "outcome": outcome.outcome,
                    "finish_reason": cell_result.finish_reason,
                    "error": cell_result.error,
                }
            )
    return records


def _recall_json(summary: RecallSummary) -> dict[str, object]:
    return {
        "correct": summary.correct,
        "abstained": summary.abstained,
        "wrong": summary.wrong,
        "total": summary.total,
        "recall": summary.recall,
        "weighted_score": summary.weighted_score,
        "missed_depths": list(summary.missed_depths),
        "degraded": summary.degraded,
        "threshold": summary.threshold,
    }


def summary_json(result: GridResult) -> dict[str, object]:
    """The summary document: per-length recall and Wilson interval, per-depth recall, effective length."""
    outcomes = [outcome for cell in result.cells for outcome in cell.outcomes]
    by_depth = []
    for depth in sorted({cell.cell.depth for cell in result.cells}):
        at_depth = [outcome for cell in result.cells if cell.cell.depth == depth for outcome in cell.outcomes]
        by_depth.append({"depth": depth, **_recall_json(summarize(at_depth, result.options.threshold))})
    by_kind = {
        kind: _recall_json(summarize([o for o in outcomes if o.kind == kind], result.options.threshold))
        for kind in sorted({outcome.kind for outcome in outcomes})
    }
    return {
        "engine": result.engine,
        "tokenizer": result.tokenizer,
        "haystack": list(result.haystack),
        "options": {
            "lengths": list(result.options.lengths),
            "depths": list(result.options.depths),
            "needles_per_cell": result.options.canaries_per_cell,
            "kinds": list(result.options.kinds),
            "output_tokens": result.options.output_tokens,
            "thinking": result.options.thinking,
            "seed": result.options.seed,
            "threshold": result.options.threshold,
            "keep": result.options.keep,
        },
        "lengths": [
            {
                "length": entry.length,
                "label": length_label(entry.length),
                "cells": sum(1 for cell in result.cells if cell.cell.length == entry.length),
                "mean_prompt_tokens": round(entry.mean_prompt_tokens, 1),
                "wilson_low": round(entry.interval[0], 6),
                "wilson_high": round(entry.interval[1], 6),
                **_recall_json(entry.recall),
            }
            for entry in result.by_length
        ],
        "by_depth": by_depth,
        "by_kind": by_kind,
        "overall": _recall_json(summarize(outcomes, result.options.threshold)),
        "engine_errors": sum(1 for cell in result.cells if cell.error is not None),
        "effective_length": result.effective_length,
    }


def require_matplotlib() -> None:
    """Raise ``ProbeDependencyError`` naming the extra to install when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ProbeDependencyError(f"the probe plots need matplotlib: {PROBE_EXTRA_HINT}") from None


def render_heatmap(data: HeatmapData, path: Path | BinaryIO, title: str) -> None:
    """Write the depth x length recall heatmap (red to green, NIAH style) as a PNG."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 1.2 * len(data.lengths) + 2), max(4.0, 0.45 * len(data.depths) + 1.5)))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    colours = LinearSegmentedColormap.from_list("recall", ["#F0496E", "#EBB839", "#0CD79F"])
    matrix = [[float("nan") if value is None else value for value in row] for row in data.values]
    image = axes.imshow(matrix, cmap=colours, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    for row, values in enumerate(data.values):
        for column, value in enumerate(values):
            if value is not None:
                axes.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=8)
    axes.set_xticks(range(len(data.lengths)), [length_label(length) for length in data.lengths])
    axes.set_yticks(range(len(data.depths)), [f"{depth * 100:g}%" for depth in data.depths])
    axes.set_xlabel("context length (tokens)")
    axes.set_ylabel("needle depth")
    axes.set_title(title)
    figure.colorbar(image, ax=axes, label="recall")
    figure.tight_layout()
    figure.savefig(path, dpi=120, metadata={"Software": None})


def render_recall_by_depth(data: HeatmapData, path: Path | BinaryIO, title: str) -> None:
    """Write recall against depth, one line per length, as a PNG."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    percents = [depth * 100 for depth in data.depths]
    for column, length in enumerate(data.lengths):
        values = [float("nan") if value is None else value for value in (row[column] for row in data.values)]
        axes.plot(percents, values, marker="o", label=length_label(length))
    axes.set_ylim(-0.05, 1.05)
    axes.set_xlabel("needle depth (%)")
    axes.set_ylabel("recall")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend(title="length")
    figure.tight_layout()
    figure.savefig(path, dpi=120, metadata={"Software": None})


def write_outputs(result: GridResult, out_dir: Path) -> tuple[Path, ...]:
    """Write cells.jsonl, summary.json, heatmap.png and recall_by_depth.png into ``out_dir``."""
    require_matplotlib()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        cells_path = out_dir / "cells.jsonl"
        write_atomically(
            cells_path,
            "".join(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n" for record in cell_records(result)),
        )
        summary_path = out_dir / "summary.json"
        write_atomically(summary_path, json.dumps(summary_json(result), sort_keys=True, indent=2) + "\n")
        data = heatmap_matrix(result)
        heatmap_path, line_path = out_dir / "heatmap.png", out_dir / "recall_by_depth.png"
        heatmap, by_depth = io.BytesIO(), io.BytesIO()
        render_heatmap(data, heatmap, "Needle recall by depth and context length")
        render_recall_by_depth(data, by_depth, "Needle recall by depth")
        write_atomically(heatmap_path, heatmap.getvalue())
        write_atomically(line_path, by_depth.getvalue())
    except OSError as exc:
        raise UsageError(f"cannot write probe outputs to {out_dir}: {exc.strerror or exc}") from exc
    return cells_path, summary_path, heatmap_path, line_path
