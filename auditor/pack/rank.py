"""Rank: which walked files the pack carries in full for the selected rules, and in what order.

Input: walked files (``PackInput``), the rules, and a file-neighbour function from the call
graph. Output: a ``Ranking``: the candidates in packing order (files matching a rule's relevance patterns,
most matches first, then their call-graph neighbours, walked breadth-first so callers sit
next to callees) and the rest in rank order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterable, Mapping, Sequence

from auditor.pack.deadline import FileDeadline
from auditor.pack.reasons import PackReason
from auditor.rules.loader import Rule
from auditor.rules.patterns import LinearPattern
from auditor.storage.digests import DigestStore, digest_of

NeighborFn = Callable[[str], Iterable[str]]
"""A file's call-graph neighbours (the files it calls into or is called from)."""


@dataclass(frozen=True)
class PackInput:
    """A walked, decodable file as the packer needs it."""

    path: str
    text: str
    language: str | None
    content_hash: str = ""  # the walk's content hash; keys cached per-file values when set



def relevance_scores(
    files: Sequence[PackInput], rules: Sequence[Rule], cache: DigestStore | None = None,
    deadline: FileDeadline | None = None,
) -> dict[str, int]:
    """Matches of the rules' relevance patterns per file (0 for none).

    With ``cache``, a file's score is remembered under its content hash and the exact
    pattern set, so an unchanged file is not searched again. With ``deadline``, each file's
    search is timed against the per-file deadline (``auditor.pack.deadline``); the score of a
    file that overran is not remembered, and a file that overran already is not searched.
    """
    patterns = [pattern for rule in rules for pattern in rule.relevance_patterns()]
    signature = "\n".join(f"re2:{pattern.pattern}" for pattern in patterns)
    key_of = {
        entry.path: digest_of(f"relevance\0{signature}\0{entry.content_hash}")
        for entry in files
        if cache is not None and entry.content_hash
    }
    known = dict(zip(key_of, cache.get_many(list(key_of.values())))) if cache is not None else {}
    scores: dict[str, int] = {}
    computed: dict[bytes, int] = {}
    for entry in files:
        score = known.get(entry.path)
        if score is None and deadline is not None and deadline.overran(entry.path):
            score = 0
        elif score is None:
            search = partial(_matches, entry.text, patterns)
            score = search() if deadline is None else deadline.run(entry.path, "the relevance scan", search)
            if entry.path in key_of and not (deadline is not None and deadline.overran(entry.path)):
                computed[key_of[entry.path]] = score
        scores[entry.path] = score
    if cache is not None and computed:
        cache.put_many(computed)
    return scores


def _matches(text: str, patterns: Sequence[LinearPattern]) -> int:
    return sum(len(pattern.findall(text)) for pattern in patterns)


@dataclass(frozen=True)
class Ranking:
    """The walked paths split for packing: ``candidates`` (carried in full, in packing
    order) with why each is one, and ``rest`` (filler, in rank order)."""

    candidates: tuple[str, ...]
    rest: tuple[str, ...]
    reasons: Mapping[str, PackReason]
    # Files in ``rest`` that match a rule's relevance patterns: off the candidates because
    # their rules pick candidates by chain, not by keyword (``rank_files``' ``keyword_rules``).
    off_chain: frozenset[str] = frozenset()
    # Files in none of the rules' languages (when every rule names its languages): not
    # candidates, not filler; listed in the map only.
    foreign: frozenset[str] = frozenset()


def rank_files(
    files: Sequence[PackInput],
    rules: Sequence[Rule],
    neighbors: NeighborFn | None,
    neighbor_depth: int,
    seed_paths: Sequence[str] = (),
    relevance_cache: DigestStore | None = None,
    keyword_rules: Sequence[Rule] | None = None,
    deadline: FileDeadline | None = None,
) -> Ranking:
    """Split paths into candidates in packing order (each with its ``PackReason``: changed,
    rule-relevant, neighbour, or repository when there are no rules) and the rest in rank order.

    ``seed_paths`` come first, in their order. With no rules every file is a candidate.
    Otherwise seeds are the seed paths, then files matching a relevance pattern; candidates are seeds plus files within ``neighbor_depth`` call-graph hops.
    Candidates are ordered by a breadth-first walk from the strongest seed so that callers
    and callees land next to each other (and hence in the same window).

    ``keyword_rules`` (default: all of ``rules``) are the rules whose relevance patterns make
    a file a candidate; the others pick their files by call chain (the packer's chains), so a
    file only their patterns match is ranked first among the rest (filler), listed in
    ``off_chain``. When every rule names its languages, a file in none of them (a template,
    a stylesheet, a Svelte component for a Python rule) is neither a candidate nor filler:
    it is listed in ``foreign`` (seed paths excepted).

    With ``deadline``, the relevance scan of each file is timed (``relevance_scores``), and a
    file whose pack-stage work overran it is ranked nowhere (the packer lists it as not audited).
    """
    if not rules:
        paths = sorted(entry.path for entry in files)
        first = [path for path in dict.fromkeys(seed_paths) if path in set(paths)]
        everything = first + [path for path in paths if path not in set(first)]
        changed = {path: PackReason.CHANGED for path in first}
        return Ranking(tuple(everything), (), {**{path: PackReason.REPOSITORY for path in everything}, **changed})
    scores = relevance_scores(files, rules, relevance_cache, deadline)
    by_keyword = scores if keyword_rules is None else (
        relevance_scores(files, keyword_rules, relevance_cache, deadline) if keyword_rules else dict.fromkeys(scores, 0)
    )
    if deadline is not None:
        files = [entry for entry in files if not deadline.overran(entry.path)]
    paths = sorted(entry.path for entry in files)
    known = set(paths)
    first = [path for path in dict.fromkeys(seed_paths) if path in known]
    changed = {path: PackReason.CHANGED for path in first}
    relevant = sorted((path for path in paths if by_keyword[path] > 0 and path not in set(first)), key=lambda p: (-by_keyword[p], p))
    seeds = first + relevant
    distance: dict[str, int] = {seed: 0 for seed in seeds}
    frontier = list(seeds)
    adjacency: dict[str, list[str]] = {}

    def linked(path: str) -> list[str]:
        if path not in adjacency:
            adjacency[path] = sorted({n for n in (neighbors(path) if neighbors else ()) if n in known and n != path})
        return adjacency[path]

    for depth in range(1, neighbor_depth + 1):
        next_frontier: list[str] = []
        for path in frontier:
            for other in linked(path):
                if other not in distance:
                    distance[other] = depth
                    next_frontier.append(other)
        frontier = next_frontier
    ordered: list[str] = []
    visited: set[str] = set()
    for seed in seeds:
        if seed in visited:
            continue
        queue = deque([seed])
        visited.add(seed)
        while queue:
            path = queue.popleft()
            ordered.append(path)
            for other in linked(path):
                if other in distance and other not in visited:
                    visited.add(other)
                    queue.append(other)
    rest = sorted((path for path in paths if path not in distance), key=lambda p: (-scores[p], p))
    reasons = {
        path: PackReason.RELEVANT if distance[path] == 0 else PackReason.NEIGHBOUR for path in ordered
    }
    languages = {language for rule in rules for language in rule.languages}
    foreign = frozenset()
    if languages and all(rule.languages for rule in rules):
        language_of = {entry.path: entry.language for entry in files}
        foreign = frozenset(path for path in rest if language_of[path] not in languages)
        rest = [path for path in rest if path not in foreign]
    off_chain = frozenset(path for path in rest if scores[path] > 0)
    return Ranking(tuple(ordered), tuple(rest), {**reasons, **changed}, off_chain, foreign)
