"""The `auditor probe` grid: sizing cells with a real tokenizer, batching to an engine,
scoring, and the JSON and PNG outputs (auditor.recall.grid, auditor.cli.probe)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from auditor.engine.base import ChatRequest
from auditor.engine.replay import ReplayEngine, ReplayRecord
from auditor.errors import UsageError
from auditor.progress import ProgressEvent
from auditor.recall.canaries import Canary, canary_blocks
from auditor.recall.grid import (
    Cell,
    GridOptions,
    HaystackFile,
    build_cells,
    default_haystack_sources,
    heatmap_matrix,
    load_haystack,
    parse_depths,
    parse_lengths,
    run_grid,
    write_outputs,
)
from auditor.tokens.tokenizer import HFTokenizer, TokenizerRequest, load_tokenizer
from tests.support import MockEngine

OUTPUT_TOKENS = 256
LENGTHS = (4096, 8192)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def write_repository(root: Path) -> Path:
    """A small Python repository: 24 modules of plain functions."""
    for number in range(24):
        module = root / "app" / f"module_{number:02d}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"def handler_{number}_{index}(request):\n    total = request.count + {index}\n    return total * 2\n\n\n"
            for index in range(8)
        )
        module.write_text(f'"""Module {number}."""\n\n\n{body}', encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir: Path) -> HFTokenizer:
    loaded = load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))
    assert isinstance(loaded, HFTokenizer)
    return loaded


@pytest.fixture(scope="module")
def haystack(tmp_path_factory: pytest.TempPathFactory) -> tuple[HaystackFile, ...]:
    return load_haystack([write_repository(tmp_path_factory.mktemp("repo"))])


@pytest.fixture(scope="module")
def options() -> GridOptions:
    return GridOptions(lengths=LENGTHS, depths=DEPTHS, canaries_per_cell=1, output_tokens=OUTPUT_TOKENS)


@pytest.fixture(scope="module")
def cells(haystack: tuple[HaystackFile, ...], tokenizer: HFTokenizer, options: GridOptions) -> tuple[Cell, ...]:
    return build_cells(haystack, tokenizer, options)


def answering(answer: Callable[[str, ChatRequest], str]) -> MockEngine:
    """A mock engine answering each probe question listed in a request through ``answer(canary_id, request)``."""

    def reply(request: ChatRequest) -> str:
        ids = re.findall(r"^- (p\d+): ", request.messages[-1].content, flags=re.MULTILINE)
        return json.dumps({"findings": [], "probes": [{"id": i, "answer": answer(i, request)} for i in ids]})

    return MockEngine(reply, completion_tokens=20)


# --------------------------------------------------------------------------------------
# Options and haystack.
# --------------------------------------------------------------------------------------


def test_parse_lengths_and_depths() -> None:
    assert parse_lengths("8K,32K,64K,128K,200K,262144") == (8192, 32768, 65536, 131072, 204800, 262144)
    assert parse_lengths(" 4k, 4096 ,1M") == (4096, 1048576)
    assert parse_depths("0,10,50%,100") == (0.0, 0.1, 0.5, 1.0)
    for bad in ("", "8Q", "0.5K1", "nan", "inf", "-infK"):
        with pytest.raises(UsageError):
            parse_lengths(bad)
    for bad in ("", "101", "x"):
        with pytest.raises(UsageError):
            parse_depths(bad)


def test_load_haystack_prefixes_paths_of_several_sources(tmp_path: Path) -> None:
    first = write_repository(tmp_path / "first")
    second = write_repository(tmp_path / "second")
    files = load_haystack([first, second])
    paths = [entry.path for entry in files]
    assert paths[0] == "first/app/module_00.py" and "second/app/module_00.py" in paths
    assert len(paths) == len(set(paths)) == 48
    with pytest.raises(UsageError):
        load_haystack([tmp_path / "missing"])


def test_default_haystack_includes_auditors_own_files() -> None:
    sources = default_haystack_sources()
    assert any((source / "recall" / "grid.py").is_file() for source in sources)


# --------------------------------------------------------------------------------------
# Cells.
# --------------------------------------------------------------------------------------


def test_cells_fill_the_length_exactly_without_exceeding_it(cells: tuple[Cell, ...], tokenizer: HFTokenizer) -> None:
    assert [(cell.length, cell.depth) for cell in cells] == [(length, depth) for length in LENGTHS for depth in DEPTHS]
    for cell in cells:
        target = cell.length - OUTPUT_TOKENS
        exact = tokenizer.count(tokenizer.render(cell.messages, thinking=False))
        assert cell.prompt_tokens == exact <= target
        assert exact >= 0.97 * target, (cell.id, exact, target)


def test_cells_place_canaries_within_one_file_boundary_of_the_depth(cells: tuple[Cell, ...]) -> None:
    for cell in cells:
        offsets = [cell.prefix_tokens + sum(cell.haystack_tokens[:index]) for index in range(len(cell.haystack_tokens) + 1)]
        target = cell.depth * offsets[-1]
        below = max((i for i, offset in enumerate(offsets) if offset <= target), default=0)
        above = min((i for i, offset in enumerate(offsets) if offset >= target), default=len(offsets) - 1)
        assert cell.position in (below, above), cell.id
        assert cell.placed_depth == pytest.approx(offsets[cell.position] / offsets[-1], abs=1e-6)
        # The canary's block really sits between those haystack files in the prompt.
        user = cell.messages[-1].content
        canary_at = user.index(canary_blocks(cell.canaries[0])[0])
        if cell.position > 0:
            before = cell.haystack_paths[cell.position - 1]
            assert user.rindex(f'<<<END FILE "{before}">>>', 0, canary_at) > user.index("## Files")
        if cell.position < len(cell.haystack_paths):
            after = cell.haystack_paths[cell.position]
            assert user.index(f'<<<FILE path="{after}"', canary_at) > canary_at
    # Depth 0 comes before every haystack file and depth 1 after all of them.
    assert all(cell.position == 0 for cell in cells if cell.depth == 0.0)
    assert all(cell.position == len(cell.haystack_paths) for cell in cells if cell.depth == 1.0)


def test_cells_repeat_the_corpus_under_virtual_copy_paths(tokenizer: HFTokenizer, tmp_path: Path) -> None:
    small = load_haystack([write_repository(tmp_path / "tiny")])[:2]
    (cell,) = build_cells(small, tokenizer, GridOptions(lengths=(8192,), depths=(0.5,), canaries_per_cell=1, output_tokens=OUTPUT_TOKENS))
    assert any(path.startswith("copy-2/") for path in cell.haystack_paths)
    assert len(cell.haystack_paths) == len(set(cell.haystack_paths))


def test_cells_use_the_scan_prompt_format_with_recall_questions(cells: tuple[Cell, ...]) -> None:
    system, user = cells[0].messages
    assert system.role == "system" and "auditor" in system.content
    assert user.content.startswith("# Repository: probe-haystack (window 0)")
    assert "## Files\n\n" in user.content and "### Recall questions" in user.content
    assert f"- {cells[0].canaries[0].id}: {cells[0].canaries[0].question}" in user.content
    assert user.content.index("### Recall questions") > user.content.rindex("<<<END FILE")


def test_cells_are_deterministic(haystack, tokenizer: HFTokenizer, options: GridOptions, cells) -> None:
    assert build_cells(haystack, tokenizer, options) == cells


def test_a_length_too_short_for_the_scaffold_is_a_usage_error(haystack, tokenizer: HFTokenizer) -> None:
    with pytest.raises(UsageError, match="length 1024"):
        build_cells(haystack, tokenizer, GridOptions(lengths=(1024,), depths=(0.5,), output_tokens=OUTPUT_TOKENS))


# --------------------------------------------------------------------------------------
# Running against engines.
# --------------------------------------------------------------------------------------


def expected_by_cell(cells: Sequence[Cell]) -> dict[str, Canary]:
    return {cell.id: cell.canaries[0] for cell in cells}


def test_scripted_engine_right_above_half_depth_is_reported_exactly(
    haystack, tokenizer: HFTokenizer, options: GridOptions, cells, tmp_path: Path
) -> None:
    canaries = expected_by_cell(cells)
    depth_of = {cell.id: cell.depth for cell in cells}
    engine = ReplayEngine()
    for cell_id, canary in canaries.items():
        answer = canary.expected if depth_of[cell_id] < 0.5 else canary.distractors[0]
        probes = [{"id": canary.id, "answer": answer}]
        engine.enqueue(ReplayRecord(request_id=cell_id, text=json.dumps({"findings": [], "probes": probes})))
    events: list[ProgressEvent] = []
    result = run_grid(haystack, tokenizer=tokenizer, engine=engine, options=options, progress=events.append)

    assert len(engine.history) == len(cells)  # one batch, every cell
    assert [event.completed for event in events if event.stage == "probe"] == list(range(1, len(cells) + 1))
    for cell in result.cells:
        expected_outcome = "correct" if cell.cell.depth < 0.5 else "wrong"
        assert [outcome.outcome for outcome in cell.outcomes] == [expected_outcome]
    for entry in result.by_length:
        assert (entry.recall.correct, entry.recall.wrong, entry.recall.abstained) == (2, 3, 0)
        assert entry.recall.recall == pytest.approx(0.4)
        assert entry.recall.missed_depths == (0.5, 0.75, 1.0)
        assert entry.recall.degraded
    assert result.effective_length == 8192

    data = heatmap_matrix(result)
    assert data.depths == DEPTHS and data.lengths == LENGTHS
    assert data.values == ((1.0, 1.0), (1.0, 1.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0))

    out = tmp_path / "out"
    paths = write_outputs(result, out)
    assert sorted(path.name for path in paths) == ["cells.jsonl", "heatmap.png", "recall_by_depth.png", "summary.json"]
    for name in ("heatmap.png", "recall_by_depth.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out / "cells.jsonl").read_text().splitlines()]
    assert len(records) == len(cells)
    for record in records:
        canary = canaries[record["cell"]]
        assert record["expected"] == canary.expected and record["kind"] == canary.kind
        assert record["outcome"] == ("correct" if record["depth"] < 0.5 else "wrong")
        assert record["answer"] == (canary.expected if record["depth"] < 0.5 else canary.distractors[0])
        assert record["virtual_paths"] == list(canary.paths)
    summary = json.loads((out / "summary.json").read_text())
    assert [entry["length"] for entry in summary["lengths"]] == list(LENGTHS)
    first = summary["lengths"][0]
    assert (first["correct"], first["wrong"], first["total"], first["recall"]) == (2, 3, 5, 0.4)
    assert (first["wilson_low"], first["wilson_high"]) == pytest.approx((0.1176, 0.7693), abs=1e-4)
    assert summary["effective_length"] == 8192
    assert [entry["recall"] for entry in summary["by_depth"]] == [1.0, 1.0, 0.0, 0.0, 0.0]


def canaries_by_cell(cells: Sequence[Cell]) -> dict[tuple[str, str], Canary]:
    """(cell id, probe id) -> canary: probe ids are random per cell and may repeat across cells."""
    return {(cell.id, canary.id): canary for cell in cells for canary in cell.canaries}


def test_all_cells_go_to_the_engine_in_one_generate_call(haystack, tokenizer, options, cells) -> None:
    canaries = canaries_by_cell(cells)
    engine = answering(lambda canary_id, request: canaries[(request.id, canary_id)].expected)
    result = run_grid(haystack, tokenizer=tokenizer, engine=engine, options=options)
    assert engine.calls == [len(cells)]
    assert all(entry.recall.recall == 1.0 for entry in result.by_length)
    assert result.effective_length == max(LENGTHS)


@pytest.mark.parametrize(
    "name",
    ["echo the prompt", "echo the question", "same value", "random numbers", "a distractor"],
)
def test_dishonest_answerers_score_zero(name: str, haystack, tokenizer, options, cells) -> None:
    canaries = canaries_by_cell(cells)
    rng = random.Random(1)
    answerers: dict[str, Callable[[str, ChatRequest], str]] = {
        "echo the prompt": lambda canary_id, request: request.messages[-1].content,
        "echo the question": lambda canary_id, request: canaries[(request.id, canary_id)].question,
        "same value": lambda canary_id, request: "5555555",
        "random numbers": lambda canary_id, request: str(rng.randrange(1_000_000, 10_000_000)),
        "a distractor": lambda canary_id, request: canaries[(request.id, canary_id)].distractors[-1],
    }
    result = run_grid(haystack, tokenizer=tokenizer, engine=answering(answerers[name]), options=options)
    for entry in result.by_length:
        assert entry.recall.correct == 0 and entry.recall.recall == 0.0
        assert entry.recall.weighted_score == -1.0
    assert result.effective_length is None


def test_engine_errors_count_as_abstentions_and_are_recorded(haystack, tokenizer, options, tmp_path: Path) -> None:
    result = run_grid(haystack, tokenizer=tokenizer, engine=MockEngine(fail="server went away"), options=options)
    assert all(outcome.outcome == "abstained" for cell in result.cells for outcome in cell.outcomes)
    assert all(cell.error == "server went away" for cell in result.cells)
    write_outputs(result, tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text())["engine_errors"] == len(result.cells)


# --------------------------------------------------------------------------------------
# The command.
# --------------------------------------------------------------------------------------


def test_probe_command_writes_the_outputs(tmp_path: Path, tiny_tokenizer_dir: Path, tokenizer: HFTokenizer) -> None:
    from auditor.cli.probe import probe_command

    repository = write_repository(tmp_path / "repo")
    options = GridOptions(lengths=(8192,), depths=(0.0, 1.0), canaries_per_cell=2, output_tokens=OUTPUT_TOKENS)
    cells = build_cells(load_haystack([repository]), tokenizer, options)
    recording = tmp_path / "recording.jsonl"
    lines = []
    for cell in cells:
        probes = [{"id": canary.id, "answer": canary.expected} for canary in cell.canaries]
        lines.append(json.dumps({"request_id": cell.id, "content": json.dumps({"findings": [], "probes": probes})}))
    recording.write_text("\n".join(lines) + "\n")

    app = typer.Typer()
    app.command()(probe_command)
    out = tmp_path / "out"
    arguments = [
        "--engine", "replay", "--replay", str(recording), "--tokenizer", str(tiny_tokenizer_dir),
        "--haystack", str(repository), "--lengths", "8K", "--depths", "0,100", "--needles-per-cell", "2",
        "--output-tokens", str(OUTPUT_TOKENS), "--out", str(out),
    ]
    outcome = CliRunner().invoke(app, arguments)
    assert outcome.exit_code == 0, outcome.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["lengths"][0]["correct"] == 4 and summary["effective_length"] == 8192
    assert (out / "heatmap.png").is_file() and (out / "recall_by_depth.png").is_file()
    assert "effective length" in outcome.output

    # Every needle answered wrong: recall 0.00 at the shortest length exits 6, like a scan.
    wrong = [json.dumps({**json.loads(line), "content": json.dumps({"findings": [], "probes": []})}) for line in lines]
    recording.write_text("\n".join(wrong) + "\n")
    degraded = CliRunner().invoke(app, arguments)
    assert degraded.exit_code == 6, degraded.output
    assert "recall degraded" in degraded.output


def test_missing_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from auditor.recall.grid import ProbeDependencyError, require_matplotlib

    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    with pytest.raises(ProbeDependencyError, match=r"pip install 'auditor\[probe\]'"):
        require_matplotlib()
