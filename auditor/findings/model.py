"""The findings' value objects: a grounded ``Finding`` with its ``ChainStep`` chain (its
fingerprint comes from ``findings.fingerprints``), and the claims as a model stated them (``Claim``, ``ClaimedStep``,
``CanaryAnswer``) before grounding; ``Rejected`` keeps a claim grounding refused, with the
reason, for the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.rules.severity import Severity


@dataclass(frozen=True)
class ChainStep:
    """One function on the call chain from the entry point (first) to the sink's function (last)."""

    path: str
    line: int
    function: str
    verified: bool = False
    note: str = ""


@dataclass(frozen=True)
class EffectSite:
    """One database effect or side effect on a finding's path, where it happens: a write a
    callee makes sits at its own line in the callee (the explanation counts it at the call
    site). ``effect`` names its kind as the explanation does ("write", "commit", ...)."""

    path: str
    line: int
    function: str
    effect: str


CONFIRMED = "confirmed"
REFUTED = "refuted"


@dataclass(frozen=True)
class FindingChain:
    """One entry chain reaching a finding's sink: its steps, who traced it, and that
    finder's explanation (a model's explanation stays with the model's chain)."""

    steps: tuple[ChainStep, ...]
    found_by: tuple[str, ...]
    explanation: str = ""

    def route(self) -> tuple[tuple[str, str], ...]:
        """The chain's identity: (path, function) per step, lines aside."""
        return tuple((step.path, step.function) for step in self.steps)


@dataclass(frozen=True)
class Verdict:
    """The model's judgement of one static candidate in one window: ``confirmed`` or
    ``refuted``, the reason, and the location that proves it (for a refutation)."""

    candidate: str
    verdict: str
    reason: str
    path: str | None = None
    line: int | None = None
    window: int | None = None


@dataclass(frozen=True)
class Finding:
    """A grounded finding: the sink location, the chain that reaches it, and who found it."""

    rule: str
    severity: Severity
    title: str
    path: str
    line: int
    function: str
    chain: tuple[ChainStep, ...]
    explanation: str
    found_by: tuple[str, ...]
    fingerprint: str
    window: int | None = None
    # Every distinct entry chain reaching the sink, each with who traced it (set by
    # ``merge_findings``; empty on an unmerged finding: ``entry_chains()`` then gives ``chain``).
    chains: tuple[FindingChain, ...] = ()
    # The model's verdicts on this finding as a static candidate, in window order.
    verdicts: tuple[Verdict, ...] = ()
    # The static pass's sequence: every effect on the finding's path in path order, each
    # where it happens (empty for a model-only finding).
    sequence: tuple[EffectSite, ...] = ()
    # How convincing the static pass's evidence is (higher: more; 0 for a model's finding):
    # findings of one severity are reported most convincing first.
    strength: int = 0

    def entry_chains(self) -> tuple[FindingChain, ...]:
        """Every distinct chain to the sink, the primary one (``chain``) first."""
        return self.chains or (FindingChain(self.chain, self.found_by, self.explanation),)

    @property
    def verdict(self) -> str | None:
        """How the model judged this static candidate: ``confirmed`` when a window confirmed
        it, ``refuted`` when every verdict refuted it, None when it was never judged."""
        if not self.verdicts:
            return None
        return CONFIRMED if any(v.verdict == CONFIRMED for v in self.verdicts) else REFUTED

    @property
    def disputed(self) -> bool:
        """True when the model refuted this static candidate (it stays in the report)."""
        return self.verdict == REFUTED

    @property
    def unverified(self) -> bool:
        """True for a model's finding that no static pass found and whose every chain step
        grounding could not confirm (the chain may be invented)."""
        return "static" not in self.found_by and bool(self.chain) and not any(step.verified for step in self.chain)

    @property
    def contested(self) -> bool:
        """Disputed or unverified: reported, but by default not blocking (``--block-disputed``)."""
        return self.disputed or self.unverified

    def sort_key(self) -> tuple[object, ...]:
        """Deterministic report order: severity, strength of evidence (most convincing
        first), rule, path, line, fingerprint."""
        return (Severity.rank_of(self.severity), -self.strength, self.rule, self.path, self.line, self.fingerprint)


@dataclass(frozen=True)
class ClaimedStep:
    """A location as the model stated it: a path, an optional line and a function name."""

    path: str
    line: int | None
    function: str


@dataclass(frozen=True)
class Claim:
    """A finding as the model stated it, before it is checked against the repository."""

    rule: str
    title: str
    severity: str
    sink: ClaimedStep
    chain: tuple[ClaimedStep, ...]
    explanation: str


@dataclass(frozen=True)
class CanaryAnswer:
    """The model's answer to one recall canary's question (an entry of the answer's ``probes`` list)."""

    id: str
    answer: str


@dataclass(frozen=True)
class Rejected:
    """A claim that could not be grounded, with the reason, kept for the report."""

    reason: str
    claim: Claim
    window: int | None = None
