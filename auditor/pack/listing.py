"""Listing: what the static candidates a window lists cost in its prompt, for planning.

A window's task lists every static candidate whose cited lines it carries in full
(``auditor.pack.prompt.render_candidates``): a fixed section (heading, instructions, the
verdicts' answer example) once, then one line per candidate. The packer plans a window's
content against its budget less this cost, so a window that completes a candidate still
fits; the finished window is then counted exactly, list included (``auditor.pack.packer``).

Input: the tokenizer, the rules, the candidates to judge. Output: ``CandidateListing``, the
section's and each line's token count (each counted once), and the largest list a single
file can complete on its own: a chunk of that file alone in a window must leave room for it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from auditor.pack.prompt import CandidateChain, render_candidate_line, render_task
from auditor.rules.loader import Rule
from auditor.tokens.tokenizer import PromptTokenizer

# A listed line or section tokenizes within a few tokens of its own count where it meets
# its neighbours; each is planned at this many tokens more (the finished count is exact).
SEAM_TOKENS = 2


@dataclass(frozen=True)
class CandidateListing:
    """Planned token costs of listing candidates: ``section`` once for a window listing any,
    ``lines[id]`` per listed candidate; ``paths[id]`` the files a candidate cites (listed
    only where all of them are carried in full)."""

    section: int = 0
    lines: Mapping[str, int] = field(default_factory=dict)
    paths: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def cost(self, listed: Iterable[str]) -> int:
        """Planned tokens of a list of the candidates ``listed`` (ids); 0 for none."""
        ids = list(listed)
        if not ids or not self.lines:
            return 0
        return self.section + sum(self.lines[candidate] for candidate in ids)

    def completed_by(self, paths: Collection[str]) -> tuple[str, ...]:
        """The candidates whose every cited file is among ``paths`` (whole files carried)."""
        if not self.paths:
            return ()
        return tuple(candidate for candidate, cited in self.paths.items() if cited <= paths)

    def paths_cost(self, paths: Collection[str]) -> int:
        """Planned tokens of the list a window carrying ``paths`` whole gives."""
        return self.cost(self.completed_by(paths))

    def single_file_reserve(self) -> int:
        """The largest list one file completes alone: room a chunk of it must leave."""
        if not self.paths:
            return 0
        per_file: dict[str, list[str]] = {}
        for candidate, cited in self.paths.items():
            if len(cited) == 1:
                per_file.setdefault(next(iter(cited)), []).append(candidate)
        return max((self.cost(ids) for ids in per_file.values()), default=0)


def candidate_listing(
    tokenizer: PromptTokenizer, rules: Sequence[Rule], candidates: Sequence[CandidateChain]
) -> CandidateListing:
    """The listing costs of ``candidates`` under ``rules``' task: the section is what the task
    grows by when it lists the first candidate, less that candidate's line."""
    if not candidates:
        return CandidateListing()
    line_texts = [render_candidate_line(candidate) for candidate in candidates]
    bare, with_first, *line_counts = tokenizer.count_many(
        [render_task(rules), render_task(rules, candidates=candidates[:1]), *line_texts]
    )
    section = max(with_first - bare - line_counts[0], 0) + SEAM_TOKENS
    return CandidateListing(
        section=section,
        lines={candidate.id: count + SEAM_TOKENS for candidate, count in zip(candidates, line_counts)},
        paths={candidate.id: frozenset(path for path, _ in candidate.locations()) for candidate in candidates},
    )
