"""The static candidates a window lists, and a diff-scoped review's changed lines, are counted in
its budget: small windows still pack a file that completes a candidate, and at every window size
each window's counted prompt tokens are within its budget and are the tokenizer's own count of
the rendered prompt (canaries planted included)."""

from __future__ import annotations

import pytest

from auditor.pack.change import ChangeScope
from auditor.pack.listing import candidate_listing
from auditor.pack.packer import PackOptions, pack
from auditor.pack.prompt import CandidateChain, render_task
from auditor.pack.rank import PackInput
from auditor.recall.windows import plant_canaries
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer
from tests.support import packing_rule

# A fixed-length rule body: the window sizes below are tight, and the rule rides in each window.
RULE = packing_rule()


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir):
    return load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))


def _body(name: str, lines: int) -> str:
    return "".join(f"    {name}_{i} = compute({i}, 'text')\n" for i in range(lines))


def _files() -> list[PackInput]:
    """Six entry files calling one hub, and one file too big for a small window."""
    files = [PackInput("app/hub.py", "def write(order):\n    order.save()\n" + _body("hub", 20), "python")]
    files += [
        PackInput(f"app/entry{i}.py", f"from app.hub import write\n\ndef view{i}(request):\n    write(request)\n{_body('e', 30)}", "python")
        for i in range(6)
    ]
    files.append(PackInput("app/big.py", "def big(request):\n    request.save()\n" + _body("b", 400), "python"))
    return files


CANDIDATES = (
    *(
        CandidateChain(f"S{i + 1}", RULE.id, ((f"app/entry{i}.py", 3, f"view{i}"), ("app/hub.py", 1, "write")), "app/hub.py", 2)
        for i in range(6)
    ),
    # Cited by the first lines of the big file: the chunk holding them lists it.
    CandidateChain("S7", RULE.id, (("app/big.py", 1, "big"),), "app/big.py", 2),
)
CHANGE = ChangeScope(
    paths=tuple(f.path for f in _files()),
    lines=(("app/big.py", ((2, 2), (40, 52))), ("app/hub.py", ((1, 3),))),
)
OUTPUT = 300


def _pack(tokenizer, max_model_len: int, change: ChangeScope | None = None):
    options = PackOptions(max_model_len=max_model_len, output_tokens=OUTPUT, probe_reserve_tokens=64, map_tokens=300, change=change)
    return pack(_files(), repository="r", rules=[RULE], tokenizer=tokenizer, options=options,
                chains_to_judge=CANDIDATES, keyword_rules=())


@pytest.mark.parametrize("max_model_len", [4_500, 5_000])
def test_a_small_window_packs_the_chunk_that_lists_a_candidate(tokenizer, max_model_len: int) -> None:
    result = _pack(tokenizer, max_model_len)
    listing = [window for window in result.windows if any(c.id == "S7" for c in window.candidates)]
    assert listing, "the chunk carrying S7's lines lists it"
    assert all(window.prompt_tokens <= result.options.prompt_budget for window in result.windows)
    assert "- S7 [" in listing[0].prompt
    # Every line of the big file is carried in full somewhere.
    carried = {line for w in result.windows for f in w.files if f.path == "app/big.py" and f.tier == "full"
               for line in range(f.start_line, f.end_line + 1)}
    assert carried == set(range(1, 403))


@pytest.mark.parametrize("change", [None, CHANGE], ids=["scan", "diff-scoped"])
@pytest.mark.parametrize("max_model_len", [4_000, 4_500, 5_000, 6_000, 8_000, 12_000, 24_000])
def test_every_window_fits_and_is_counted_exactly(tokenizer, max_model_len: int, change: ChangeScope | None) -> None:
    result = _pack(tokenizer, max_model_len, change)
    assert result.windows
    for window in result.windows:
        assert window.prompt_tokens <= result.options.prompt_budget
        assert window.prompt_tokens == tokenizer.count(window.prompt)
        assert tokenizer.render(window.messages, thinking=True) == window.prompt
        assert all(f"- {candidate.id} [" in window.prompt for candidate in window.candidates)
        if change is not None:
            assert "## Changed lines" in window.prompt and "- app/big.py: 2, 40-52" in window.prompt
        planted, _ = plant_canaries(result, window, tokenizer, 2, 7)
        assert planted.prompt_tokens == tokenizer.count(planted.prompt)
        assert planted.prompt_tokens <= max_model_len - OUTPUT
    # From 4.5 K on, some window has the room to show a chain whole, and lists it.
    if max_model_len >= 4_500:
        assert any(window.candidates for window in result.windows)


def test_the_listing_costs_what_the_task_grows_by(tokenizer) -> None:
    listing = candidate_listing(tokenizer, [RULE], CANDIDATES)
    grown = tokenizer.count(render_task([RULE], candidates=CANDIDATES)) - tokenizer.count(render_task([RULE]))
    planned = listing.cost(candidate.id for candidate in CANDIDATES)
    # Planned at no less than the task grows by, and within the seam allowance of it.
    assert grown <= planned <= grown + 2 * (len(CANDIDATES) + 1)
    assert listing.completed_by({"app/big.py"}) == ("S7",)
    assert listing.single_file_reserve() == listing.cost(["S7"])
    assert candidate_listing(tokenizer, [RULE], ()).cost(["S1"]) == 0
