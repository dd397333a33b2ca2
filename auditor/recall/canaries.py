"""Recall canaries: small pieces of code planted in a prompt, the questions that ask for
them, and the exact scoring of the answers. Scans plant them in every window
(``auditor.recall.windows``); ``auditor probe`` plants them over a grid of context lengths
and depths (``auditor.recall.grid``).

Inputs: the text a window already holds (so planted values and names are unique in it), the
languages of its files, a seed, and the token counts of the window's file blocks. Outputs:
``Canary`` objects (virtual files that never touch the disk), their rendered blocks, the
block indices where they go (file boundaries nearest to target token depths), the "recall
questions" text that rides after the task, and ``CanaryOutcome``/``RecallSummary`` scores
of the model's answers (the answer's ``probes`` list), with Wilson intervals and the effective context length.

Canary kinds (designed after RULER and RepoQA):

* ``constant`` - a module of settings; the question describes one setting in words (its
  subject and meaning, never its identifier) and asks for its 7-digit value. Near misses:
  the same subject's other setting, and another subject's same setting.
* ``two-hop`` - a constant with a random key (``AMBER_HARBOR``) in one file and a function in
  a second file that uses it; the question describes the function and asks for the value of
  the constant it uses. Near misses: keys sharing a word with the answer's key, used by a
  sibling function.
* ``described-function`` - small functions; the question describes what one computes and
  asks for its name. Near misses: names sharing two of the three words, other behaviours.

Scoring is exact: the answer field, after normalisation (surrounding quotes, digit grouping,
case for identifiers), must equal the expected literal. A value found inside free text is
not credited, so echoing the prompt or guessing scores nothing.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from auditor import defaults
from auditor.errors import AuditorError, UsageError
from auditor.findings.model import CanaryAnswer
from auditor.pack.prompt import render_full_block, split_lines
from auditor.recall.syntax import (
    ADJECTIVES,
    ATTRIBUTES,
    BEHAVIOURS,
    NOUNS,
    ROOT_WORDS,
    SUBJECTS,
    SYNTAX,
    VERBS,
    batch_module,
    class_identifiers,
    constant_name,
    constants_module,
    function_name,
    functions_module,
    module_path,
    pascal,
    snake,
)

KINDS: Final = ("constant", "two-hop", "described-function")
# Index languages that canaries are written in: TSX files get TypeScript canaries.
LANGUAGE_ALIASES: Final = {"tsx": "typescript"}
OUTCOMES: Final = ("correct", "abstained", "wrong")
DEFAULT_KEEP: Final = 0.85
# A wrong answer is a hallucination: in the weighted score it cancels one correct answer,
# while an abstention costs nothing. A model that guesses can therefore never beat one
# that says "unknown" when it did not find the value.
WRONG_WEIGHT: Final = 1.0
# Identifiers and paths that would make a canary look like a credential to a reviewer or a
# secret scanner; no planted name contains any of them.
SECRET_LOOKING: Final = ("key", "token", "passw", "secret", "credential", "auth", "private", "cert", "salt", "signature")
ABSTENTIONS: Final = frozenset(
    {"", "unknown", "n/a", "na", "none", "null", "not found", "not shown", "i don't know", "unsure", "-", "?"}
)
_MAX_DRAWS = 2000


class CanaryError(AuditorError):
    """Canaries cannot be planted as asked (e.g. no fresh names left for this many canaries)."""


@dataclass(frozen=True)
class Canary:
    """One recall canary: virtual files planted in a prompt and the question about them.

    ``files`` are (path, source) pairs under a directory that exists nowhere in the packed
    text; a two-hop canary has two files (the constant's definition first, its use second).
    ``expected`` is the exact answer (a 7-digit value or an identifier as written);
    ``distractors`` are the near-miss answers planted next to it; ``identifiers`` are every
    name the canary defines (for discarding findings that cite a canary).
    """

    id: str
    kind: str
    language: str
    files: tuple[tuple[str, str], ...]
    question: str
    expected: str
    distractors: tuple[str, ...]
    identifiers: tuple[str, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        """The virtual paths of the canary's files."""
        return tuple(path for path, _ in self.files)


# --------------------------------------------------------------------------------------
# Drawing fresh names and values.
# --------------------------------------------------------------------------------------

T = TypeVar("T")


class _Drawer:
    """Random choices that are fresh: not in the packed text, not used by another canary."""

    def __init__(self, rng: random.Random, forbidden_text: str):
        self.rng = rng
        self._forbidden = forbidden_text.casefold()
        self._names: set[str] = set()
        self._values: set[int] = set()
        self.subject_attributes: set[tuple[int, int]] = set()
        self.batch_subjects: set[int] = set()
        self.behaviours: set[int] = set()

    def fresh(self, text: str) -> bool:
        """True when ``text`` (a name or path) is unused, absent from the packed text and not secret-looking."""
        folded = text.casefold()
        return (
            folded not in self._names
            and folded not in self._forbidden
            and not any(word in folded for word in SECRET_LOOKING)
        )

    def claim(self, *names: str) -> None:
        self._names.update(name.casefold() for name in names)

    def draw(self, make: Callable[[], T], ok: Callable[[T], bool], what: str) -> T:
        for _ in range(_MAX_DRAWS):
            candidate = make()
            if ok(candidate):
                return candidate
        raise CanaryError(f"cannot find a fresh {what} for a recall probe (too many needles for the vocabulary?)")

    def value(self) -> int:
        """A 7-digit value that appears nowhere in the packed text or another canary."""

        def ok(number: int) -> bool:
            return number not in self._values and str(number) not in self._forbidden

        number = self.draw(lambda: self.rng.randrange(1_000_000, 10_000_000), ok, "7-digit value")
        self._values.add(number)
        return number


def _make_constant(drawer: _Drawer, language: str, root: str, canary_id: str) -> Canary:
    rng = drawer.rng
    subject_count, attribute_count = len(SUBJECTS), len(ATTRIBUTES)

    def pick() -> tuple[int, int, int, int]:
        subject = rng.randrange(subject_count)
        attribute = rng.randrange(attribute_count)
        other_attribute = rng.choice([a for a in range(attribute_count) if a != attribute])
        other_subject = rng.choice([s for s in range(subject_count) if s != subject])
        return subject, attribute, other_attribute, other_subject

    def names(choice: tuple[int, int, int, int]) -> tuple[list[tuple[int, int]], list[str]]:
        subject, attribute, other_attribute, other_subject = choice
        pairs = [(subject, attribute), (subject, other_attribute), (other_subject, attribute)]
        return pairs, [constant_name(language, SUBJECTS[s][1] + ATTRIBUTES[a][1]) for s, a in pairs]

    def ok(choice: tuple[int, int, int, int]) -> bool:
        pairs, identifiers = names(choice)
        leaf = snake(SUBJECTS[choice[0]][1])
        return not drawer.subject_attributes.intersection(pairs) and all(map(drawer.fresh, identifiers + [f"{root}/{leaf}"]))

    choice = drawer.draw(pick, ok, "setting name")
    pairs, identifiers = names(choice)
    drawer.subject_attributes.update(pairs)
    leaf = snake(SUBJECTS[choice[0]][1])
    class_name = pascal(SUBJECTS[choice[0]][1]) + "Settings"
    drawer.claim(*identifiers, f"{root}/{leaf}", class_name)
    values = [drawer.value() for _ in identifiers]
    constants = list(zip(identifiers, values))
    rng.shuffle(constants)
    source = constants_module(language, (root, leaf), class_name, "Operational limits for the background workers.", constants)
    subject_phrase, attribute_phrase = SUBJECTS[choice[0]][0], ATTRIBUTES[choice[1]][0]
    question = (
        f"What value does the code configure as the {attribute_phrase} of the {subject_phrase}? "
        "Answer with the number only."
    )
    return Canary(
        id=canary_id,
        kind="constant",
        language=language,
        files=((module_path(language, root, leaf, "settings", class_name), source),),
        question=question,
        expected=str(values[0]),
        distractors=tuple(str(value) for value in values[1:]),
        identifiers=tuple(sorted([*identifiers, *class_identifiers(language, class_name)])),
    )


def _make_two_hop(drawer: _Drawer, language: str, root: str, canary_id: str) -> Canary:
    rng = drawer.rng

    def pick() -> tuple[str, str, str, str, int, int]:
        adjective, other_adjective = rng.sample(ADJECTIVES, 2)
        noun, other_noun = rng.sample(NOUNS, 2)
        subject, other_subject = rng.sample(range(len(SUBJECTS)), 2)
        return adjective, other_adjective, noun, other_noun, subject, other_subject

    def names(choice: tuple[str, str, str, str, int, int]) -> tuple[list[str], list[str], str]:
        adjective, other_adjective, noun, other_noun, subject, other_subject = choice
        keys = [
            constant_name(language, (adjective, noun)),
            constant_name(language, (adjective, other_noun)),
            constant_name(language, (other_adjective, noun)),
        ]
        functions = [
            function_name(language, ("take", *SUBJECTS[subject][1], "batch")),
            function_name(language, ("take", *SUBJECTS[other_subject][1], "batch")),
        ]
        return keys, functions, f"{root}/{other_adjective}_{other_noun}"

    def ok(choice: tuple[str, str, str, str, int, int]) -> bool:
        keys, functions, directory = names(choice)
        if choice[4] in drawer.batch_subjects or choice[5] in drawer.batch_subjects:
            return False
        return all(map(drawer.fresh, keys + functions + [directory]))

    choice = drawer.draw(pick, ok, "two-hop key")
    keys, functions, directory = names(choice)
    drawer.batch_subjects.update((choice[4], choice[5]))
    drawer.claim(*keys, *functions, directory)
    leaf = directory.split("/", 1)[1]
    values = [drawer.value() for _ in keys]
    constants = list(zip(keys, values))
    rng.shuffle(constants)
    uses = [(functions[0], keys[0]), (functions[1], keys[1])]
    rng.shuffle(uses)
    constants_source = constants_module(language, (root, leaf), "Limits", "Limits shared by the background workers.", constants)
    batch_source = batch_module(language, (root, leaf), "limits", "Limits", uses)
    files = (
        (module_path(language, root, leaf, "limits", "Limits"), constants_source),
        (module_path(language, root, leaf, "batches", "Batches"), batch_source),
    )
    question = (
        f"The function that takes the next batch from the {SUBJECTS[choice[4]][0]} sizes the batch with a named "
        "constant defined in another file. What is that constant's value? Answer with the number only."
    )
    return Canary(
        id=canary_id,
        kind="two-hop",
        language=language,
        files=files,
        question=question,
        expected=str(values[0]),
        distractors=tuple(str(value) for value in values[1:]),
        identifiers=tuple(sorted(keys + functions + class_identifiers(language, "Limits", "Batches"))),
    )


def _make_described_function(drawer: _Drawer, language: str, root: str, canary_id: str) -> Canary:
    rng = drawer.rng

    Choice = tuple[tuple[str, str, str, str, str], tuple[str, str], tuple[int, ...]]

    def pick() -> Choice:
        verb, other_verb = rng.sample(VERBS, 2)
        adjective, leaf_adjective = rng.sample(ADJECTIVES, 2)
        noun, other_noun, leaf_noun = rng.sample(NOUNS, 3)
        behaviours = tuple(rng.sample(range(len(BEHAVIOURS)), 3))
        return (verb, other_verb, adjective, noun, other_noun), (leaf_adjective, leaf_noun), behaviours

    def names(choice: Choice) -> tuple[list[str], str]:
        (verb, other_verb, adjective, noun, other_noun), leaf, _ = choice
        functions = [
            function_name(language, (verb, adjective, noun)),
            function_name(language, (other_verb, adjective, noun)),
            function_name(language, (verb, adjective, other_noun)),
        ]
        return functions, f"{root}/{snake(leaf)}"

    def ok(choice: Choice) -> bool:
        functions, directory = names(choice)
        return not drawer.behaviours.intersection(choice[2]) and all(map(drawer.fresh, functions + [directory]))

    choice = drawer.draw(pick, ok, "function name")
    functions, directory = names(choice)
    drawer.behaviours.update(choice[2])
    class_name = pascal(directory.split("/", 1)[1].split("_")) + "Math"
    drawer.claim(*functions, directory, class_name)
    leaf = directory.split("/", 1)[1]
    definitions = [(name, BEHAVIOURS[behaviour][1]) for name, behaviour in zip(functions, choice[2])]
    rng.shuffle(definitions)
    source = functions_module(language, (root, leaf), class_name, definitions)
    question = (
        f"Which function returns {BEHAVIOURS[choice[2][0]][0]}? "
        "Answer with the function's name exactly as it is defined, without parentheses."
    )
    return Canary(
        id=canary_id,
        kind="described-function",
        language=language,
        files=((module_path(language, root, leaf, "arithmetic", class_name), source),),
        question=question,
        expected=functions[0],
        distractors=tuple(functions[1:]),
        identifiers=tuple(sorted([*functions, *class_identifiers(language, class_name)])),
    )


_MAKERS: Final[Mapping[str, Callable[[_Drawer, str, str, str], Canary]]] = {
    "constant": _make_constant,
    "two-hop": _make_two_hop,
    "described-function": _make_described_function,
}


def canary_language(language: str) -> str | None:
    """The language a canary is written in for files of ``language`` (None: no canaries for it)."""
    language = LANGUAGE_ALIASES.get(language, language)
    return language if language in SYNTAX else None


def make_canaries(
    count: int,
    *,
    languages: Sequence[str],
    seed: int,
    forbidden_text: str,
    kinds: Sequence[str] = KINDS,
) -> tuple[Canary, ...]:
    """``count`` canaries, cycling through ``kinds``, each in a language drawn from ``languages``.

    Deterministic for a seed. Every planted value, identifier and virtual directory is
    absent from ``forbidden_text`` (pass the packed prompt) and from the other canaries,
    compared case-insensitively; no name looks like a credential. Languages with no canary
    rendering are ignored; with none left the canaries are Python. Raises ``UsageError`` for
    an unknown kind and ``CanaryError`` when the vocabulary runs out of fresh names.
    """
    if count < 0:
        raise UsageError(f"needle count must be >= 0, not {count}")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        raise UsageError(f"unknown needle kind(s) {unknown or list(kinds)}; known: {', '.join(KINDS)}")
    if count == 0:
        return ()
    usable = sorted({language for language in map(canary_language, languages) if language is not None}) or ["python"]
    rng = random.Random(seed)
    drawer = _Drawer(rng, forbidden_text)
    root = drawer.draw(
        lambda: f"{rng.choice(ROOT_WORDS)}_{rng.randrange(10, 100)}", lambda name: drawer.fresh(name), "virtual directory"
    )
    drawer.claim(root)
    if count > 900:
        raise UsageError(f"at most 900 needles per prompt, not {count}")
    ids = rng.sample(range(100, 1000), count)
    canaries = []
    for number in range(count):
        kind = kinds[number % len(kinds)]
        language = rng.choice(usable)
        canaries.append(_MAKERS[kind](drawer, language, root, f"p{ids[number]}"))
    return tuple(canaries)


def canary_blocks(canary: Canary) -> tuple[str, ...]:
    """The canary's files rendered exactly like every other file block (header carries the path)."""
    return tuple(render_full_block(path, split_lines(source)) for path, source in canary.files)


def canary_paths(canaries: Iterable[Canary]) -> frozenset[str]:
    """Every virtual path the canaries planted (a finding citing one is about a canary, not the repository)."""
    return frozenset(path for canary in canaries for path in canary.paths)


def cites_canary(path: str, function: str, canaries: Iterable[Canary]) -> bool:
    """True when a finding location names a canary's virtual file or one of its identifiers."""
    canaries = tuple(canaries)
    if path in canary_paths(canaries):
        return True
    names = {identifier.casefold() for canary in canaries for identifier in canary.identifiers}
    parts = {part.casefold() for part in re.split(r"[.:#/]+", function) if part}
    return bool(parts & names)


# --------------------------------------------------------------------------------------
# Placement.
# --------------------------------------------------------------------------------------


def plan_positions(
    block_tokens: Sequence[int],
    prefix_tokens: int,
    depths: Sequence[float],
    *,
    total_tokens: int | None = None,
) -> tuple[int, ...]:
    """For each depth, the block index (a file boundary) to insert a canary before.

    Boundary ``i`` sits at token ``prefix_tokens + sum(block_tokens[:i])`` (``i`` from 0,
    before the first block, to ``len(block_tokens)``, after the last). A depth is a
    fraction of ``total_tokens`` (default: the prefix plus every block); the boundary
    nearest to ``depth * total_tokens`` is chosen, the earlier one on a tie. Depths outside
    0..1 raise ``UsageError``.
    """
    offsets = [prefix_tokens]
    for tokens in block_tokens:
        offsets.append(offsets[-1] + tokens)
    total = offsets[-1] if total_tokens is None else total_tokens
    positions = []
    for depth in depths:
        if not 0.0 <= depth <= 1.0 or math.isnan(depth):
            raise UsageError(f"a probe depth is a fraction from 0 to 1, not {depth}")
        target = depth * total
        positions.append(min(range(len(offsets)), key=lambda index: (abs(offsets[index] - target), index)))
    return tuple(positions)


def insert_blocks(
    blocks: Sequence[str], canaries: Sequence[Canary], positions: Sequence[int]
) -> tuple[str, ...]:
    """``blocks`` with each canary's blocks inserted before block ``positions[i]``.

    Canaries sharing a position keep their given order; the original blocks keep theirs.
    """
    return insert_at(blocks, [canary_blocks(canary) for canary in canaries], positions)


def insert_at(items: Sequence[T], groups: Sequence[Sequence[T]], positions: Sequence[int]) -> tuple[T, ...]:
    """``items`` with each group inserted before item ``positions[i]`` (as ``insert_blocks``
    places canary blocks: for the blocks themselves, or for values parallel to them)."""
    if len(groups) != len(positions):
        raise ValueError(f"{len(positions)} positions for {len(groups)} needles")
    by_position: dict[int, list[T]] = {}
    for group, position in zip(groups, positions):
        if not 0 <= position <= len(items):
            raise ValueError(f"position {position} outside 0..{len(items)}")
        by_position.setdefault(position, []).extend(group)
    out: list[T] = []
    for index in range(len(items) + 1):
        out.extend(by_position.get(index, ()))
        if index < len(items):
            out.append(items[index])
    return tuple(out)


def spread_depths(count: int) -> tuple[float, ...]:
    """``count`` canary depths spread evenly over the window, avoiding its very edges.

    One canary sits at the middle; more are spaced evenly from 10% to 90%.
    """
    if count <= 0:
        return ()
    if count == 1:
        return (0.5,)
    return tuple(round(0.1 + 0.8 * index / (count - 1), 4) for index in range(count))


def files_around(paths: Sequence[str], position: int) -> tuple[str | None, str | None]:
    """The files just before and just after block boundary ``position`` (None at an edge)."""
    before = paths[position - 1] if 0 < position <= len(paths) else None
    after = paths[position] if 0 <= position < len(paths) else None
    return before, after


# --------------------------------------------------------------------------------------
# Questions.
# --------------------------------------------------------------------------------------


def questions_text(canaries: Sequence[Canary]) -> str:
    """The "recall questions" text that rides after the task (empty for no canaries).

    It asks for one ``{"id", "answer"}`` entry per question in the answer's ``probes`` list,
    the bare value as the answer, and "unknown" when the value was not found.
    """
    if not canaries:
        return ""
    intro = (
        "The repository above also contains the facts these questions ask about. Answer each one in "
        'the "probes" list of your JSON answer as {"id": "<question id>", "answer": "<value>"}. '
        "Give only the value: a number with no separators or units, or a name exactly as written. "
        'If you cannot find it, answer "unknown"; do not guess.\n\n'
    )
    return intro + "".join(f"- {canary.id}: {canary.question}\n" for canary in canaries)


_DIGIT_GROUPING = re.compile(r"(?<=\d)[,_ '\u00a0\u2009\u202f](?=\d)")
_NUMBER = re.compile(r"\d+")
_QUOTES = "\"'`"


def normalise_answer(text: str, *, numeric: bool) -> str:
    """An answer reduced for exact comparison.

    Strips whitespace, surrounding quotes/backticks and a final full stop; for numbers,
    removes digit grouping (``1,234,567`` and ``1 234 567`` become ``1234567``); for
    identifiers, drops a trailing ``()`` and case. Nothing is extracted from longer text.
    """
    value = text.strip()
    previous = None
    while value != previous:
        previous = value
        if value.endswith("."):
            value = value[:-1].rstrip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in _QUOTES:
            value = value[1:-1].strip()
    if numeric:
        return _DIGIT_GROUPING.sub("", value)
    if value.endswith("()"):
        value = value[:-2].rstrip()
    return value.casefold()


@dataclass(frozen=True)
class CanaryOutcome:
    """How the model answered one canary: ``outcome`` is "correct", "abstained" or "wrong"."""

    canary_id: str
    kind: str
    language: str
    depth: float
    expected: str
    answer: str | None
    outcome: str


def judge(expected: str, answer: str | None) -> str:
    """"correct" when ``answer`` equals ``expected`` after normalisation; "abstained" when it
    is missing, empty or says "unknown"; "wrong" otherwise (a distractor included)."""
    if answer is None or answer.strip().casefold() in ABSTENTIONS:
        return "abstained"
    numeric = _NUMBER.fullmatch(expected) is not None
    if normalise_answer(answer, numeric=numeric) == normalise_answer(expected, numeric=numeric):
        return "correct"
    if normalise_answer(answer, numeric=False) in ABSTENTIONS:
        return "abstained"
    return "wrong"


def score(canaries: Sequence[Canary], depths: Sequence[float], answers: Sequence[CanaryAnswer]) -> tuple[CanaryOutcome, ...]:
    """One outcome per canary, in canary order, from the model's ``probes`` answers.

    ``depths[i]`` is where canary ``i`` was placed. An answer is matched by id; when the
    model answers one id twice, the first answer counts; answers to unknown ids are ignored.
    """
    if len(canaries) != len(depths):
        raise ValueError(f"{len(depths)} depths for {len(canaries)} needles")
    first: dict[str, str] = {}
    for answer in answers:
        first.setdefault(answer.id.strip(), answer.answer)
    outcomes = []
    for canary, depth in zip(canaries, depths):
        given = first.get(canary.id)
        outcomes.append(
            CanaryOutcome(
                canary_id=canary.id,
                kind=canary.kind,
                language=canary.language,
                depth=depth,
                expected=canary.expected,
                answer=given,
                outcome=judge(canary.expected, given),
            )
        )
    return tuple(outcomes)


@dataclass(frozen=True)
class RecallSummary:
    """Counts and scores over a set of canary outcomes.

    ``recall`` is correct/total (None when no canary was asked about). ``weighted_score`` is
    (correct - WRONG_WEIGHT x wrong)/total: abstaining costs nothing, a wrong answer (a
    hallucination) cancels a correct one, so it ranges from -1 to 1. ``missed_depths`` are
    the sorted distinct depths of canaries not answered correctly. ``degraded`` is True when
    recall is below ``threshold``.
    """

    correct: int
    abstained: int
    wrong: int
    total: int
    recall: float | None
    weighted_score: float | None
    missed_depths: tuple[float, ...]
    degraded: bool
    threshold: float


def summarize(outcomes: Sequence[CanaryOutcome], threshold: float = defaults.RECALL_THRESHOLD) -> RecallSummary:
    """Count the outcomes and score them (see ``RecallSummary``)."""
    counts = {name: sum(1 for outcome in outcomes if outcome.outcome == name) for name in OUTCOMES}
    total = len(outcomes)
    recall = counts["correct"] / total if total else None
    weighted = (counts["correct"] - WRONG_WEIGHT * counts["wrong"]) / total if total else None
    missed = tuple(sorted({outcome.depth for outcome in outcomes if outcome.outcome != "correct"}))
    return RecallSummary(
        correct=counts["correct"],
        abstained=counts["abstained"],
        wrong=counts["wrong"],
        total=total,
        recall=recall,
        weighted_score=weighted,
        missed_depths=missed,
        degraded=recall is not None and recall < threshold,
        threshold=threshold,
    )


def wilson_interval(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion (95% for z = 1.96).

    ``(0.0, 1.0)`` when ``total`` is 0; raises ``ValueError`` for impossible counts.
    """
    if total < 0 or not 0 <= successes <= max(total, 0):
        raise ValueError(f"cannot take {successes} successes out of {total}")
    if total == 0:
        return 0.0, 1.0
    proportion = successes / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (proportion + z2 / (2 * total)) / denominator
    half = z * math.sqrt(proportion * (1 - proportion) / total + z2 / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def effective_length(scores_by_length: Mapping[int, float], keep: float = DEFAULT_KEEP) -> int | None:
    """The longest length whose score, and every shorter length's, keeps ``keep`` of the
    shortest length's score.

    Lengths are walked from the shortest; the first one below ``keep x baseline`` ends the
    walk. None when there are no scores or the baseline is 0 (nothing to keep).
    """
    if not scores_by_length:
        return None
    lengths = sorted(scores_by_length)
    baseline = scores_by_length[lengths[0]]
    if baseline <= 0:
        return None
    longest = lengths[0]
    for length in lengths[1:]:
        if scores_by_length[length] < keep * baseline:
            break
        longest = length
    return longest


def derive_seed(*parts: object) -> int:
    """A stable 63-bit seed from any printable parts (same parts, same seed, on every run)."""
    digest = hashlib.sha256("\x1f".join(str(part) for part in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1
