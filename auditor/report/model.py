"""The scan result every reporter renders: findings, rejected claims, windows, errors,
coverage and notices, as frozen data.

Input: built by the scan pipeline. Output: read by the reporters in ``auditor.report``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from auditor.errors import Shortfall, worst_shortfall
from auditor.findings.injection import InjectionFlag
from auditor.findings.model import ChainStep, Claim, ClaimedStep, EffectSite, Finding, Rejected
from auditor.findings.suppress import SuppressedFinding
from auditor.rules.loader import Rule
from auditor.rules.severity import Severity

__all__ = [
    "Coverage",
    "FileCoverage",
    "InjectionFlag",
    "NotAudited",
    "ReviewSummary",
    "ReviewedFinding",
    "ScanError",
    "ScanResult",
    "SuppressedFinding",
    "WindowOutcome",
    "WindowRecall",
]

# Error kinds that mean the scan did not read everything it was asked to.
INCOMPLETE_ERROR_KINDS = frozenset({"engine", "incomplete-window", "fatal"})
# Error kinds that mean part of the repository was not audited at all: the coverage is
# partial, and a scan with ``--error`` does not pass.
PARTIAL_ERROR_KINDS = frozenset({"not-audited", "windows-capped", "nothing-audited", "rule-not-run"})


@dataclass(frozen=True)
class WindowRecall:
    """Recall measured by the canaries planted in one window.

    ``missed`` holds (depth fraction, file before, file after) for each canary not answered
    correctly, so a reader can see which stretch of the window the model did not retrieve.
    """

    planted: int
    correct: int
    abstained: int
    wrong: int
    recall: float
    degraded: bool
    missed: tuple[tuple[float, str | None, str | None], ...] = ()


@dataclass(frozen=True)
class WindowOutcome:
    """What happened to one packed window sent to the engine.

    ``complete`` is False when the answer was cut off (finish_reason "length"), empty
    after reasoning, or failed; such a window must never read as "no findings".
    """

    index: int
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    complete: bool
    files_full: tuple[str, ...]
    files_skeleton: tuple[str, ...]
    reasoning: str = ""
    cached_prompt_tokens: int | None = None
    error: str | None = None
    recall: WindowRecall | None = None


@dataclass(frozen=True)
class ScanError:
    """A problem met during the scan: kind ("incomplete-window", "engine", "parse", "rule", ...),
    a message for the user and the window it concerns, if any."""

    kind: str
    message: str
    window: int | None = None


@dataclass(frozen=True)
class NotAudited:
    """A file the walk found but no stage audited, and why (``reason`` is the walk's skip
    reason, e.g. "too-large"). ``source`` is True for a file in a language a selected rule
    covers: leaving one out makes the scan's coverage partial."""

    path: str
    reason: str
    detail: str = ""
    source: bool = False


@dataclass(frozen=True)
class Coverage:
    """Which files the model saw in full, as skeletons only, or not at all; and the files
    found but not audited, with why."""

    full: tuple[str, ...]
    skeleton: tuple[str, ...]
    omitted: tuple[str, ...]
    not_audited: tuple[NotAudited, ...] = ()


@dataclass(frozen=True)
class ReviewedFinding:
    """How a reported finding relates to the change under review.

    ``status`` is "new" (not on the base) or "existing" (the base has the same
    fingerprint). ``path``/``line``/``function`` is the primary location: the changed line
    on the finding's chain, so that a pull-request view shows it. ``touched_by`` says which
    part of the chain the change touches, e.g. "sink line changed".
    """

    fingerprint: str
    status: str
    path: str
    line: int
    function: str
    touched_by: str
    blocks: bool = True
    """Whether the finding can fail the run: False for a disputed or unverified one
    (``Finding.contested``) unless ``--block-disputed``."""


@dataclass(frozen=True)
class FileCoverage:
    """What the model saw of a changed file (``role`` "changed") or of a call-graph
    neighbour of one (``role`` "neighbour"): ``tier`` "full", "skeleton" or "not packed"."""

    path: str
    role: str
    tier: str


@dataclass(frozen=True)
class ReviewSummary:
    """The review of one change: revisions, changed files, per-finding status and coverage.

    ``findings`` has one entry per reported finding (those whose chain touches the
    change); ``outside_diff`` counts head findings left out because it does not.
    ``existing_blocking`` is True when existing findings fail the run too (``--all``);
    ``base_compared`` is False when the base was not scanned (every finding is "new").
    ``scope`` says how much was packed; ``head_prompt_tokens`` and ``base_prompt_tokens``
    what each tree's windows cost.
    """

    base: str
    head: str
    changed_files: tuple[str, ...]
    deleted_files: tuple[str, ...]
    renamed: tuple[tuple[str, str], ...]
    findings: tuple[ReviewedFinding, ...]
    outside_diff: int
    coverage: tuple[FileCoverage, ...]
    base_compared: bool = True
    existing_blocking: bool = False
    # "diff": the head packed only the change's subgraph; "full": both trees whole (--full).
    scope: str = "diff"
    head_prompt_tokens: int = 0  # prompt tokens the head's windows sent
    base_prompt_tokens: int = 0  # prompt tokens a base run sent (0: decided without a model)

    def reviewed(self, fingerprint: str) -> ReviewedFinding | None:
        """The review entry of the finding with this fingerprint, or None."""
        return next((item for item in self.findings if item.fingerprint == fingerprint), None)

    @property
    def new_count(self) -> int:
        """Reported findings that are not on the base."""
        return sum(item.status == "new" for item in self.findings)

    @property
    def existing_count(self) -> int:
        """Reported findings the base has too."""
        return sum(item.status == "existing" for item in self.findings)

    @property
    def blocking_count(self) -> int:
        """Findings that fail the run under ``--error``: new ones, and existing ones with
        ``--all``; a disputed or unverified one only with ``--block-disputed``."""
        return sum(item.blocks and (item.status == "new" or self.existing_blocking) for item in self.findings)

    @property
    def contested_count(self) -> int:
        """Reported findings that do not block because they are disputed or unverified (none
        with ``--block-disputed``)."""
        return sum(not item.blocks for item in self.findings)

    def contested_note(self, separator: str) -> str:
        """``separator`` + "N contested (disputed or unverified, not blocking)" for the
        summaries; "" when there are none."""
        count = self.contested_count
        return f"{separator}{count} contested (disputed or unverified, not blocking)" if count else ""


@dataclass(frozen=True)
class ScanResult:
    """Everything a report shows about one scan."""

    tool_version: str
    root: str
    engine: str
    model: str | None
    tokenizer_source: str
    tokenizer_exact: bool
    rules: tuple[Rule, ...]
    findings: tuple[Finding, ...]
    rejected: tuple[Rejected, ...]
    windows: tuple[WindowOutcome, ...]
    errors: tuple[ScanError, ...]
    notices: tuple[str, ...]
    coverage: Coverage
    injection_flags: tuple[InjectionFlag, ...]
    prompt_tokens_sent: int
    suppressed: tuple[SuppressedFinding, ...] = ()
    warnings: tuple[str, ...] = ()
    review: ReviewSummary | None = None
    block_disputed: bool = False
    """Whether disputed and unverified findings fail the run too (``--block-disputed``)."""

    def blocks(self, finding: Finding) -> bool:
        """Whether ``finding`` fails the run under ``--error``: any finding but a disputed or
        unverified one (``Finding.contested``), which does only with ``--block-disputed``."""
        return self.block_disputed or not finding.contested

    @property
    def blocking_count(self) -> int:
        """The findings that fail a scan under ``--error``."""
        return sum(self.blocks(finding) for finding in self.findings)

    @property
    def complete(self) -> bool:
        """True when every window completed and no engine or incomplete-window error occurred."""
        return all(window.complete for window in self.windows) and not any(
            error.kind in INCOMPLETE_ERROR_KINDS for error in self.errors
        )

    @property
    def partial(self) -> bool:
        """True when part of the repository was not audited (a skipped source file, windows
        cut by ``--max-windows``, nothing selected): never a clean pass under ``--error``."""
        return any(error.kind in PARTIAL_ERROR_KINDS for error in self.errors)

    @property
    def recall_degraded(self) -> bool:
        """True when some window's canary recall fell below the threshold."""
        return any(window.recall is not None and window.recall.degraded for window in self.windows)

    @property
    def shortfall(self) -> Shortfall | None:
        """What keeps this result from a clean pass (the worst), or None."""
        return worst_shortfall(incomplete=not self.complete, recall_degraded=self.recall_degraded, partial=self.partial)

    @property
    def incomplete_windows(self) -> tuple[WindowOutcome, ...]:
        """The windows whose answer was cut off, empty or failed, by index."""
        return tuple(sorted((window for window in self.windows if not window.complete), key=lambda w: w.index))

    def sorted_findings(self) -> tuple[Finding, ...]:
        """The findings in report order (``Finding.sort_key``)."""
        return tuple(sorted(self.findings, key=lambda finding: finding.sort_key()))

    def sorted_rejected(self) -> tuple[Rejected, ...]:
        """The rejected claims in a stable order: window, sink path, sink line, rule, reason."""
        return tuple(sorted(self.rejected, key=_rejected_key))

    def sorted_suppressed(self) -> tuple[SuppressedFinding, ...]:
        """The suppressed findings in report order, then by source and location."""
        return tuple(sorted(self.suppressed, key=lambda item: (item.finding.sort_key(), item.source, item.location)))

    def severity_counts(self) -> tuple[tuple[str, int], ...]:
        """(severity, count) for each severity that has findings, most severe first."""
        counts = Counter(finding.severity for finding in self.findings)
        ordered = sorted(counts, key=lambda severity: (Severity.rank_of(severity), severity))
        return tuple((severity, counts[severity]) for severity in ordered)

    def rule_for(self, rule_id: str) -> Rule | None:
        """The rule with this id among the scan's rules, or None."""
        return next((rule for rule in self.rules if rule.id == rule_id), None)


def _rejected_key(rejected: Rejected) -> tuple[object, ...]:
    sink = rejected.claim.sink
    return (
        rejected.window is None,
        rejected.window if rejected.window is not None else 0,
        sink.path,
        sink.line if sink.line is not None else 0,
        rejected.claim.rule,
        rejected.reason,
        sink.function,
    )


def severity_summary(result: ScanResult) -> str:
    """'3 findings (1 critical, 2 high)', or '0 findings'."""
    total = len(result.findings)
    noun = "finding" if total == 1 else "findings"
    counts = result.severity_counts()
    if not counts:
        return f"{total} {noun}"
    return f"{total} {noun} (" + ", ".join(f"{count} {severity}" for severity, count in counts) + ")"


def names_its_window(error: ScanError) -> bool:
    """Whether the error's message already starts with its window ("window 3: ..."), so a
    report need not say the window twice."""
    return error.window is not None and re.match(rf"window {error.window}\b", error.message) is not None


def error_text(error: ScanError) -> str:
    """The error's message, led by "window N: " when it concerns a window and does not say so."""
    if error.window is None or names_its_window(error):
        return error.message
    return f"window {error.window}: {error.message}"


def window_problem(window: WindowOutcome) -> str:
    """Why a window is incomplete, in one line."""
    if window.error:
        return f"window {window.index} INCOMPLETE: {window.error}"
    if window.finish_reason == "length":
        return f"window {window.index} INCOMPLETE: the answer hit the token limit (finish_reason length)"
    return f"window {window.index} INCOMPLETE: no complete answer (finish_reason {window.finish_reason})"


def recall_line(window: WindowOutcome) -> str | None:
    """The window's canary recall in one line, with where the misses sit; None without canaries."""
    recall = window.recall
    if recall is None:
        return None
    text = (
        f"window {window.index} recall {recall.correct}/{recall.planted} canaries"
        f" ({recall.wrong} wrong, {recall.abstained} abstained)"
    )
    if recall.degraded:
        text += " RECALL-DEGRADED"
    for depth, before, after in recall.missed:
        text += f"; missed at {depth:.0%} between {before or 'the start'} and {after or 'the end'}"
    return text


def step_location(path: str, line: int) -> str:
    """'path:line', or just 'path' when the line is unknown (0)."""
    return f"{path}:{line}" if line > 0 else path


# The text and Markdown reports list at most this many effects of a sequence (JSON and SARIF
# list every one).
MAX_WHERE_SITES = 20


def where_text(finding: Finding, location: Callable[[EffectSite], str]) -> str:
    """The finding's effects, each as ``location(site)`` and its kind, when some lie outside
    its own function (those in it are in the explanation's own words); "" otherwise."""
    sites = finding.sequence
    if all((site.path, site.function) == (finding.path, finding.function) for site in sites):
        return ""
    shown = "; ".join(f"{location(site)} {site.effect}" for site in sites[:MAX_WHERE_SITES])
    more = len(sites) - MAX_WHERE_SITES
    return shown + (f"; … and {more} more (the JSON and SARIF reports list every one)" if more > 0 else "")


_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def revision_label(revision: str) -> str:
    """A full commit id shortened to 12 characters; anything else (e.g. "working tree") as is."""
    return revision[:12] if _COMMIT_ID.fullmatch(revision) else revision


# -- output bounds (docs/answer-contract.md, "Output limits") -------------------------------

# SARIF viewers (GitHub code scanning) accept at most 10,000 thread-flow locations per result.
MAX_CHAIN_STEPS = 10_000
# Model-written prose (explanations, titles, notes, function names a claim cites, errors).
MAX_TEXT_CHARS = 20_000
MAX_TITLE_CHARS = 500
# A reasoning trace in the JSON report (a 32,768-token trace is ~130,000 characters).
MAX_REASONING_CHARS = 262_144


def bounded_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated: {len(text) - limit:,} more characters]"


def bounded_chain(chain: tuple[ChainStep, ...], limit: int = MAX_CHAIN_STEPS) -> tuple[ChainStep, ...]:
    """The chain's first ``limit - 1`` steps and its last (the sink's function); the last
    kept step before the cut says how many steps were left out."""
    steps = tuple(replace(step, function=bounded_text(step.function, MAX_TITLE_CHARS), note=bounded_text(step.note, MAX_TITLE_CHARS * 2)) for step in chain)
    if len(steps) <= limit:
        return steps
    kept = list(steps[: limit - 1])
    left_out = len(steps) - limit
    marker = f"{left_out:,} chain steps left out (reports keep at most {limit:,})"
    kept[-1] = replace(kept[-1], note=f"{kept[-1].note}; {marker}" if kept[-1].note else marker)
    return (*kept, steps[-1])


def _bounded_finding(finding: Finding, text_limit: int = MAX_TEXT_CHARS, chain_limit: int = MAX_CHAIN_STEPS) -> Finding:
    return replace(
        finding,
        title=bounded_text(finding.title, MAX_TITLE_CHARS),
        function=bounded_text(finding.function, MAX_TITLE_CHARS),
        explanation=bounded_text(finding.explanation, text_limit),
        chain=bounded_chain(finding.chain, chain_limit),
    )


def _bounded_step(step: ClaimedStep) -> ClaimedStep:
    return replace(step, path=bounded_text(step.path, MAX_TITLE_CHARS), function=bounded_text(step.function, MAX_TITLE_CHARS))


def _bounded_claim(claim: Claim) -> Claim:
    chain = claim.chain if len(claim.chain) <= MAX_CHAIN_STEPS else (*claim.chain[: MAX_CHAIN_STEPS - 1], claim.chain[-1])
    return replace(
        claim,
        rule=bounded_text(claim.rule, MAX_TITLE_CHARS),
        title=bounded_text(claim.title, MAX_TITLE_CHARS),
        severity=bounded_text(claim.severity, MAX_TITLE_CHARS),
        explanation=bounded_text(claim.explanation),
        sink=_bounded_step(claim.sink),
        chain=tuple(_bounded_step(step) for step in chain),
    )


def bounded_result(
    result: ScanResult, text_limit: int = MAX_TEXT_CHARS, chain_limit: int = MAX_CHAIN_STEPS
) -> ScanResult:
    """``result`` with every model-written text and chain cut to the output limits above
    (explanations to ``text_limit``, chains to ``chain_limit`` steps), each cut marked:
    what a report renders, so no report grows without bound."""
    return replace(
        result,
        findings=tuple(_bounded_finding(finding, text_limit, chain_limit) for finding in result.findings),
        rejected=tuple(
            replace(item, reason=bounded_text(item.reason), claim=_bounded_claim(item.claim)) for item in result.rejected
        ),
        windows=tuple(
            replace(
                window,
                reasoning=bounded_text(window.reasoning, MAX_REASONING_CHARS),
                error=bounded_text(window.error) if window.error is not None else None,
            )
            for window in result.windows
        ),
        errors=tuple(replace(error, message=bounded_text(error.message)) for error in result.errors),
        suppressed=tuple(
            replace(item, finding=_bounded_finding(item.finding, text_limit, chain_limit)) for item in result.suppressed
        ),
    )


# Terminal and Markdown output: C0 controls other than newline and tab, DEL, C1, and the
# Unicode bidirectional controls (U+202E reverses what follows on screen, "Trojan Source").
_UNSAFE_CHARACTERS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible_controls(text: str) -> str:
    """``text`` with control and bidi characters written as visible escapes (``\\x1b``,
    ``\\u202e``): repository and model text must not drive a terminal or reorder a page."""
    return _UNSAFE_CHARACTERS.sub(_visible, text)
