"""Suppression: inline ``auditor: ignore[rule-id] reason`` comments and baseline files.

Inputs: grounded findings, the text of every scanned file, the known rule ids and an
optional baseline. Output: ``SuppressionResult`` — the findings kept, the findings
suppressed (each with the reason it was suppressed: the comment's text or "baseline"),
and warnings (an ignore comment naming a rule nobody knows). Suppressed findings are
reported and counted, never dropped silently.

Inline comments. A comment holding ``auditor: ignore[rule-id, other-rule] why`` suppresses
findings of those rules whose sink is on the comment's line, or on the next line when the
comment stands on a line of its own. Any common comment syntax is recognised: ``#``,
``//``, ``/* ... */`` and ``--`` (so Python, shell, JavaScript/TypeScript, Go, Java, C,
SQL and Lua all work). The marker must follow a comment opener on that line; text inside
string literals that happens to contain a comment opener is not told apart (as with
semgrep's ``nosemgrep``).

Baselines. A baseline is a JSON list of ``{"fingerprint", "rule", "path", "function",
"scheme"}`` objects (written by ``auditor scan --write-baseline FILE``); ``scheme`` is
the fingerprint definition that wrote it (``findings.fingerprints.SCHEME``) and only the
fingerprint is matched. An entry without ``scheme`` was written before fingerprints were
structural (scheme 1, the raw sink line): its fingerprint can no longer match, so it
matches a finding of the same rule, path and function instead, until the baseline is
written again. ``read_baseline`` also accepts a list of bare fingerprint strings and a
JSON report (its ``findings``), both matched by fingerprint only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import AuditorError
from auditor.findings.fingerprints import SCHEME
from auditor.findings.grounding import file_lines
from auditor.findings.model import Finding

BASELINE_REASON = "baseline"

# A comment opener, then the marker. ``--`` must not be glued to a word (``x--`` in C).
# A line inside a block comment may start with "*" instead.
_IGNORE = re.compile(
    r"(?:#|//|/\*|(?<![\w-])--|^[ \t]*\*)[ \t]*(?:[*#/!]+[ \t]*)?auditor:[ \t]*ignore\[(?P<rules>[^\]]*)\](?P<reason>.*)$"
)
_BLOCK_END = re.compile(r"\s*(?:\*/|-->).*$")


class BaselineError(AuditorError):
    """A baseline file is missing, unreadable or not in a baseline format."""


@dataclass(frozen=True)
class IgnoreComment:
    """One ``auditor: ignore[...]`` comment: where it is, the rule ids it names and why.

    ``own_line`` is True when the comment is the only thing on its line, so it also covers
    the line below it.
    """

    path: str
    line: int
    rules: tuple[str, ...]
    reason: str
    own_line: bool

    def covers(self, rule: str, line: int) -> bool:
        """Whether this comment suppresses a finding of ``rule`` whose sink is on ``line``."""
        if rule not in self.rules:
            return False
        return line == self.line or (self.own_line and line == self.line + 1)


@dataclass(frozen=True)
class SuppressedFinding:
    """A finding that a comment or the baseline suppressed, and why.

    ``source`` is "inline" or "baseline"; ``reason`` is the comment's text (the rule
    list and justification, e.g. "ignore[tx-outside-transaction] idempotent job") or
    "baseline"; ``location`` is "path:line" of the comment, or the baseline file.
    """

    finding: Finding
    source: str
    reason: str
    location: str


@dataclass(frozen=True)
class SuppressionResult:
    """Findings after suppression: kept, suppressed (with reasons) and warnings, all sorted."""

    kept: tuple[Finding, ...]
    suppressed: tuple[SuppressedFinding, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class BaselineEntry:
    """One baselined finding: its fingerprint, plus rule, path and function for readers,
    and the fingerprint scheme that wrote it (1: an older auditor's, see the module docstring)."""

    fingerprint: str
    rule: str = ""
    path: str = ""
    function: str = ""
    scheme: int = SCHEME

    def accepts(self, finding: Finding) -> bool:
        """Whether this entry baselines ``finding``: by fingerprint, or for an entry of an
        older scheme (its fingerprint means something else now) by rule, path and function."""
        if self.scheme == SCHEME:
            return self.fingerprint == finding.fingerprint
        return bool(self.rule) and (self.rule, self.path, self.function) == (finding.rule, finding.path, finding.function)


@dataclass(frozen=True)
class Baseline:
    """The findings a team has accepted (see ``BaselineEntry.accepts``)."""

    entries: tuple[BaselineEntry, ...]
    source: str = BASELINE_REASON

    @property
    def fingerprints(self) -> frozenset[str]:
        """Every fingerprint in the baseline."""
        return frozenset(entry.fingerprint for entry in self.entries)

    def accepts(self, finding: Finding) -> bool:
        """Whether some entry baselines ``finding``."""
        return finding.fingerprint in self.fingerprints or any(
            entry.accepts(finding) for entry in self.entries if entry.scheme != SCHEME
        )


def find_ignore_comments(path: str, text: str) -> tuple[IgnoreComment, ...]:
    """Every ignore comment in a file, in line order (lines counted from 1 as editors do)."""
    if "auditor:" not in text:
        return ()
    comments: list[IgnoreComment] = []
    for number, line in enumerate(file_lines(text), start=1):
        if "auditor:" not in line:
            continue
        match = _IGNORE.search(line)
        if match is None:
            continue
        rules = tuple(part.strip() for part in match.group("rules").split(",") if part.strip())
        reason = _BLOCK_END.sub("", match.group("reason")).strip()
        comments.append(
            IgnoreComment(
                path=path,
                line=number,
                rules=rules,
                reason=reason,
                own_line=not line[: match.start()].strip().removesuffix("<!"),
            )
        )
    return tuple(comments)


def _describe(comment: IgnoreComment) -> str:
    named = f"ignore[{', '.join(comment.rules)}]"
    return f"{named} {comment.reason}" if comment.reason else named


def apply_suppressions(
    findings: Iterable[Finding],
    texts: Mapping[str, str],
    known_rules: Collection[str],
    baseline: Baseline | None = None,
) -> SuppressionResult:
    """Split findings into kept and suppressed, and warn about ignore comments for unknown rules.

    An inline comment wins over the baseline when both apply (its reason is more useful).
    ``texts`` maps repository paths to file text (the scanned files); every one of them is
    searched for ignore comments so that a misspelt rule id is reported even where no
    finding is. Kept findings keep their order; suppressed ones and warnings are sorted.
    """
    comments: dict[str, tuple[IgnoreComment, ...]] = {}
    warnings: list[str] = []
    known = set(known_rules)
    for path in sorted(texts):
        found = find_ignore_comments(path, texts[path])
        if found:
            comments[path] = found
        for comment in found:
            if not comment.rules:
                warnings.append(f"{path}:{comment.line}: ignore comment names no rule (write auditor: ignore[rule-id] reason)")
            for rule in comment.rules:
                if rule not in known:
                    warnings.append(f"{path}:{comment.line}: ignore comment names unknown rule {rule!r}")

    kept: list[Finding] = []
    suppressed: list[SuppressedFinding] = []
    for finding in findings:
        covering = next((c for c in comments.get(finding.path, ()) if c.covers(finding.rule, finding.line)), None)
        if covering is not None:
            suppressed.append(SuppressedFinding(finding, "inline", _describe(covering), f"{covering.path}:{covering.line}"))
        elif baseline is not None and baseline.accepts(finding):
            suppressed.append(SuppressedFinding(finding, "baseline", BASELINE_REASON, baseline.source))
        else:
            kept.append(finding)
    suppressed.sort(key=lambda item: (item.finding.sort_key(), item.source, item.location))
    return SuppressionResult(kept=tuple(kept), suppressed=tuple(suppressed), warnings=tuple(sorted(warnings)))


def baseline_from_findings(findings: Iterable[Finding]) -> Baseline:
    """A baseline holding every given finding once, sorted by fingerprint."""
    by_fingerprint = {
        finding.fingerprint: BaselineEntry(finding.fingerprint, finding.rule, finding.path, finding.function)
        for finding in findings
    }
    return Baseline(tuple(by_fingerprint[key] for key in sorted(by_fingerprint)))


def baseline_json(baseline: Baseline) -> str:
    """The baseline file's text: a JSON list of entries, sorted, 2-space indent, trailing newline."""
    entries = [
        {"fingerprint": entry.fingerprint, "rule": entry.rule, "path": entry.path, "function": entry.function, "scheme": entry.scheme}
        for entry in sorted(baseline.entries, key=lambda entry: entry.fingerprint)
    ]
    return json.dumps(entries, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_baseline(path: Path, findings: Iterable[Finding]) -> Baseline:
    """Write a baseline of ``findings`` to ``path`` atomically; returns what was written.

    Raises ``BaselineError`` when the file cannot be written.
    """
    from auditor.storage.atomic import write_atomically

    baseline = baseline_from_findings(findings)
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, baseline_json(baseline))
    except OSError as error:
        raise BaselineError(f"cannot write baseline {target}: {error.strerror or error}") from error
    except AuditorError as error:
        raise BaselineError(f"cannot write baseline: {error}") from error
    return Baseline(baseline.entries, source=str(target))


def read_baseline(path: Path) -> Baseline:
    """Read a baseline file: a list of entries or of fingerprint strings, or a JSON report.

    Raises ``BaselineError`` naming the file and the problem when it cannot be used.
    """
    source = Path(path)
    try:
        data: Any = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise BaselineError(f"baseline not found: {source}") from error
    except OSError as error:
        raise BaselineError(f"cannot read baseline {source}: {error.strerror or error}") from error
    except ValueError as error:
        raise BaselineError(f"baseline {source} is not valid JSON: {error}") from error
    report = isinstance(data, dict) and isinstance(data.get("findings"), list)
    if report:
        data = data["findings"]
    if not isinstance(data, list):
        raise BaselineError(f"baseline {source} must be a JSON list of findings or fingerprints")
    entries: list[BaselineEntry] = []
    for number, item in enumerate(data, start=1):
        if isinstance(item, str) and item.strip():
            entries.append(BaselineEntry(item.strip()))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("fingerprint"), str) or not item["fingerprint"].strip():
            raise BaselineError(f"baseline {source}: entry {number} has no fingerprint")
        fields = {key: item.get(key) for key in ("rule", "path", "function")}
        scheme = item.get("scheme", SCHEME if report else 1)
        entries.append(
            BaselineEntry(
                item["fingerprint"].strip(),
                *(value if isinstance(value, str) else "" for value in fields.values()),
                scheme=scheme if isinstance(scheme, int) else 1,
            )
        )
    return Baseline(tuple(entries), source=str(source))
