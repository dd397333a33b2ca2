"""Recall-probe canaries, placement and exact scoring (auditor.recall.canaries)."""

from __future__ import annotations

import random
import re

import pytest

from auditor.errors import UsageError
from auditor.findings.model import CanaryAnswer
from auditor.languages.grammars import parser_for
from auditor.pack.prompt import split_lines
from auditor.recall.canaries import (
    KINDS,
    SECRET_LOOKING,
    Canary,
    CanaryError,
    canary_blocks,
    canary_paths,
    cites_canary,
    effective_length,
    files_around,
    insert_blocks,
    judge,
    make_canaries,
    normalise_answer,
    plan_positions,
    questions_text,
    score,
    spread_depths,
    summarize,
    wilson_interval,
)
from auditor.recall.syntax import LANGUAGES


def planted_texts(canary: Canary) -> list[str]:
    """Values, names and virtual directories (file names like settings.py may repeat)."""
    directories = [path.rsplit("/", 1)[0] for path in canary.paths]
    return [canary.expected, *canary.distractors, *canary.identifiers, *directories]


def test_canaries_are_valid_code_in_every_language() -> None:
    for language in LANGUAGES:
        parser = parser_for(language)
        for seed in range(12):
            canaries = make_canaries(6, languages=[language], seed=seed, forbidden_text="")
            assert {canary.kind for canary in canaries} == set(KINDS)
            for canary in canaries:
                assert canary.language == language
                for path, source in canary.files:
                    tree = parser.parse(source.encode("utf-8"))
                    assert not tree.root_node.has_error, f"{language} {canary.kind} {path}:\n{source}"


def test_two_hop_canary_defines_the_constant_in_one_file_and_uses_it_in_another() -> None:
    for language in LANGUAGES:
        (canary,) = make_canaries(1, languages=[language], seed=5, forbidden_text="", kinds=["two-hop"])
        (definitions_path, definitions), (use_path, use) = canary.files
        assert definitions_path != use_path
        key = next(line for line in definitions.splitlines() if canary.expected in line)
        name = re.search(r"([A-Za-z_]+)\s*(?::\s*number\s*)?=\s*" + canary.expected, key).group(1)
        assert name in use and canary.expected not in use
        # The question describes the function, never the constant's name or value.
        assert name.casefold() not in canary.question.casefold()
        assert canary.expected not in canary.question


def test_questions_do_not_contain_their_answers() -> None:
    for seed in range(20):
        for canary in make_canaries(6, languages=LANGUAGES, seed=seed, forbidden_text=""):
            assert canary.expected.casefold() not in canary.question.casefold()
            for identifier in canary.identifiers:
                assert identifier.casefold() not in canary.question.casefold()
            assert canary.expected not in canary.distractors
            # Every near miss is planted in the canary's files too.
            sources = "".join(source for _, source in canary.files)
            assert canary.expected in sources
            assert all(distractor in sources for distractor in canary.distractors)


def test_canaries_avoid_everything_in_the_packed_text() -> None:
    first = make_canaries(6, languages=LANGUAGES, seed=11, forbidden_text="")
    forbidden = "\n".join(text for canary in first for text in planted_texts(canary))
    second = make_canaries(6, languages=LANGUAGES, seed=11, forbidden_text=forbidden)
    assert second != first
    for canary in second:
        for text in planted_texts(canary):
            assert text.casefold() not in forbidden.casefold(), text
        assert canary.paths[0].split("/")[0].casefold() not in forbidden.casefold()


def test_canary_values_and_names_are_unique_within_a_set() -> None:
    canaries = make_canaries(9, languages=LANGUAGES, seed=3, forbidden_text="")
    values = [value for canary in canaries for value in (canary.expected, *canary.distractors) if value.isdigit()]
    names = [identifier.casefold() for canary in canaries for identifier in canary.identifiers]
    assert len(values) == len(set(values)) and all(len(value) == 7 for value in values)
    assert len(names) == len(set(names))
    assert len({canary.id for canary in canaries}) == len(canaries)
    assert len(canary_paths(canaries)) == sum(len(canary.files) for canary in canaries)


def test_canaries_never_look_like_secrets() -> None:
    for seed in range(30):
        for canary in make_canaries(6, languages=LANGUAGES, seed=seed, forbidden_text=""):
            for name in (*canary.identifiers, *canary.paths):
                assert not any(word in name.casefold() for word in SECRET_LOOKING), name
            for _, source in canary.files:
                assert not re.search(r"\b[0-9a-fA-F]{16,}\b", source)


def test_canaries_are_deterministic_per_seed_and_vary_across_seeds() -> None:
    one = make_canaries(3, languages=["python", "go"], seed=42, forbidden_text="x")
    assert one == make_canaries(3, languages=["python", "go"], seed=42, forbidden_text="x")
    assert one != make_canaries(3, languages=["python", "go"], seed=43, forbidden_text="x")


def test_unsupported_languages_fall_back_to_python_and_tsx_to_typescript() -> None:
    assert {n.language for n in make_canaries(3, languages=["ruby"], seed=1, forbidden_text="")} == {"python"}
    assert {n.language for n in make_canaries(3, languages=["tsx"], seed=1, forbidden_text="")} == {"typescript"}


def test_make_canaries_rejects_unknown_kinds_and_exhausted_vocabulary() -> None:
    with pytest.raises(UsageError):
        make_canaries(1, languages=["python"], seed=0, forbidden_text="", kinds=["riddle"])
    # Each described-function canary uses three of the fourteen behaviours.
    with pytest.raises(CanaryError):
        make_canaries(6, languages=["python"], seed=0, forbidden_text="", kinds=["described-function"])
    assert make_canaries(0, languages=["python"], seed=0, forbidden_text="") == ()


def test_canary_blocks_render_like_other_files() -> None:
    (canary,) = make_canaries(1, languages=["python"], seed=2, forbidden_text="")
    (block,) = canary_blocks(canary)
    path, source = canary.files[0]
    lines = split_lines(source)
    assert block.startswith(f'<<<FILE path="{path}" view=full lines=1-{len(lines)}/{len(lines)}>>>\n')
    assert block.endswith(f'<<<END FILE "{path}">>>\n')
    assert f"1|{lines[0]}\n" in block


def test_questions_text_lists_every_canary_by_id() -> None:
    canaries = make_canaries(3, languages=["java"], seed=9, forbidden_text="")
    text = questions_text(canaries)
    for canary in canaries:
        assert f"- {canary.id}: {canary.question}\n" in text
    assert '"probes"' in text and "unknown" in text
    assert questions_text(()) == ""


# --------------------------------------------------------------------------------------
# Placement.
# --------------------------------------------------------------------------------------


def test_plan_positions_picks_the_boundary_nearest_each_depth() -> None:
    assert plan_positions([100, 100, 100, 100], 0, [0.0, 0.24, 0.26, 0.5, 1.0]) == (0, 1, 1, 2, 4)
    # The prefix counts toward the depth: 10% of 1000 tokens falls inside the prefix.
    assert plan_positions([300, 300, 300], 100, [0.1, 0.4]) == (0, 1)
    assert plan_positions([], 50, [0.0, 1.0]) == (0, 0)
    with pytest.raises(UsageError):
        plan_positions([10], 0, [1.5])


def test_plan_positions_is_within_one_file_boundary_of_the_target() -> None:
    rng = random.Random(7)
    for _ in range(200):
        blocks = [rng.randint(1, 5000) for _ in range(rng.randint(1, 40))]
        prefix = rng.randint(0, 3000)
        depth = rng.random()
        (position,) = plan_positions(blocks, prefix, [depth])
        offsets = [prefix + sum(blocks[:index]) for index in range(len(blocks) + 1)]
        target = depth * offsets[-1]
        # The boundaries bracketing the target: the chosen one is one of them.
        below = max((i for i, offset in enumerate(offsets) if offset <= target), default=0)
        above = min((i for i, offset in enumerate(offsets) if offset >= target), default=len(blocks))
        assert position in (below, above)
        assert abs(offsets[position] - target) == min(abs(offset - target) for offset in offsets)


def test_insert_blocks_places_canaries_before_the_given_block() -> None:
    canaries = make_canaries(2, languages=["go"], seed=4, forbidden_text="", kinds=["constant"])
    blocks = ("A", "B", "C")
    out = insert_blocks(blocks, canaries, [1, 3])
    assert out == ("A", *canary_blocks(canaries[0]), "B", "C", *canary_blocks(canaries[1]))
    with pytest.raises(ValueError):
        insert_blocks(blocks, canaries, [1])


def test_spread_depths_and_files_around() -> None:
    assert spread_depths(0) == ()
    assert spread_depths(1) == (0.5,)
    assert spread_depths(3) == (0.1, 0.5, 0.9)
    assert files_around(["a", "b", "c"], 0) == (None, "a")
    assert files_around(["a", "b", "c"], 2) == ("b", "c")
    assert files_around(["a", "b", "c"], 3) == ("c", None)


# --------------------------------------------------------------------------------------
# Scoring.
# --------------------------------------------------------------------------------------


def test_normalisation_is_exact_after_removing_formatting_only() -> None:
    assert normalise_answer(" '4,829,311'. ", numeric=True) == "4829311"
    assert normalise_answer("4 829 311", numeric=True) == "4829311"
    assert normalise_answer("4_829_311", numeric=True) == "4829311"
    assert normalise_answer("`FoldAmberHarbor()`", numeric=False) == "foldamberharbor"
    assert judge("4829311", "4,829,311") == "correct"
    assert judge("fold_amber_harbor", '"FOLD_AMBER_HARBOR"') == "correct"
    assert judge("4829311", "4829311 ms") == "wrong"
    assert judge("4829311", "The value is 4829311.") == "wrong"
    assert judge("4829311", "48293110") == "wrong"
    assert judge("fold_amber_harbor", "foldAmberHarbor") == "wrong"


@pytest.mark.parametrize("answer", [None, "", "  ", "unknown", "Unknown", '"unknown"', "N/A", "none", "not found"])
def test_missing_or_unknown_answers_are_abstentions(answer: str | None) -> None:
    assert judge("4829311", answer) == "abstained"


def test_score_matches_answers_by_id_and_counts_distractors_wrong() -> None:
    canaries = make_canaries(3, languages=["python"], seed=8, forbidden_text="")
    answers = [
        CanaryAnswer(canaries[0].id, canaries[0].expected),
        CanaryAnswer(canaries[0].id, "unknown"),  # a second answer to the same id does not count
        CanaryAnswer(canaries[1].id, canaries[1].distractors[0]),
        CanaryAnswer("p000", canaries[2].expected),  # an unknown id answers nothing
    ]
    outcomes = score(canaries, [0.1, 0.5, 0.9], answers)
    assert [outcome.outcome for outcome in outcomes] == ["correct", "wrong", "abstained"]
    assert [outcome.depth for outcome in outcomes] == [0.1, 0.5, 0.9]
    assert outcomes[2].answer is None
    with pytest.raises(ValueError):
        score(canaries, [0.1], answers)


def _honesty_canaries() -> list[tuple[Canary, str]]:
    """Canaries with the prompt text a model would have seen (their files and questions)."""
    out = []
    for seed in range(10):
        canaries = make_canaries(6, languages=LANGUAGES, seed=seed, forbidden_text="")
        prompt = "".join(block for canary in canaries for block in canary_blocks(canary)) + questions_text(canaries)
        out.extend((canary, prompt) for canary in canaries)
    return out


def test_echo_constant_and_random_answerers_score_nothing() -> None:
    pairs = _honesty_canaries()
    canaries = [canary for canary, _ in pairs]
    depths = [0.5] * len(canaries)
    rng = random.Random(0)
    answerers = {
        "echo prompt": [CanaryAnswer(canary.id, prompt) for canary, prompt in pairs],
        "echo question": [CanaryAnswer(canary.id, canary.question) for canary in canaries],
        "echo files": [CanaryAnswer(canary.id, "".join(s for _, s in canary.files)) for canary in canaries],
        "constant": [CanaryAnswer(canary.id, "4829311") for canary in canaries],
        "random": [CanaryAnswer(canary.id, str(rng.randrange(1_000_000, 10_000_000))) for canary in canaries],
        "all values": [CanaryAnswer(canary.id, " ".join([canary.expected, *canary.distractors])) for canary in canaries],
        "first distractor": [CanaryAnswer(canary.id, canary.distractors[0]) for canary in canaries],
    }
    for name, answers in answerers.items():
        # Ids repeat across seeds, so score each canary against its own answer.
        summary = summarize([score([n], [d], [a])[0] for n, d, a in zip(canaries, depths, answers)])
        assert summary.correct == 0, name
        assert summary.recall == 0.0 and summary.degraded, name


def test_summarize_counts_weighs_wrong_answers_and_flags_degraded() -> None:
    canaries = make_canaries(5, languages=["python"], seed=1, forbidden_text="", kinds=["constant"])
    answers = [
        CanaryAnswer(canaries[0].id, canaries[0].expected),
        CanaryAnswer(canaries[1].id, canaries[1].expected),
        CanaryAnswer(canaries[2].id, canaries[2].expected),
        CanaryAnswer(canaries[3].id, "unknown"),
        CanaryAnswer(canaries[4].id, "1234567"),
    ]
    summary = summarize(score(canaries, [0.0, 0.25, 0.5, 0.75, 1.0], answers))
    assert (summary.correct, summary.abstained, summary.wrong, summary.total) == (3, 1, 1, 5)
    assert summary.recall == pytest.approx(0.6)
    assert summary.weighted_score == pytest.approx((3 - 1) / 5)
    assert summary.missed_depths == (0.75, 1.0)
    assert summary.degraded
    assert not summarize(score(canaries, [0.5] * 5, answers), threshold=0.6).degraded
    empty = summarize(())
    assert empty.recall is None and not empty.degraded


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775
    low, high = wilson_interval(10, 10)
    assert round(low, 4) == 0.7225 and high == pytest.approx(1.0)
    low, high = wilson_interval(50, 100)
    assert (round(low, 4), round(high, 4)) == (0.4038, 0.5962)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_effective_length_is_the_longest_length_keeping_the_share() -> None:
    scores = {8192: 0.9, 32768: 0.8, 65536: 0.7, 131072: 0.9}
    # 0.85 x 0.9 = 0.765: 32K keeps it, 64K does not, so 128K's recovery does not count.
    assert effective_length(scores) == 32768
    assert effective_length(scores, keep=0.7) == 131072
    assert effective_length({8192: 1.0, 16384: 1.0}) == 16384
    assert effective_length({8192: 0.0, 16384: 0.0}) is None
    assert effective_length({}) is None


def test_cites_canary_matches_virtual_paths_and_identifiers() -> None:
    canaries = make_canaries(3, languages=["java"], seed=6, forbidden_text="")
    path = canaries[0].paths[0]
    function = canaries[2].expected
    assert cites_canary(path, "", canaries)
    assert cites_canary("src/App.java", f"SomeClass.{function}", canaries)
    assert not cites_canary("src/App.java", "App.main", canaries)
