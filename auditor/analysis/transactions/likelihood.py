"""Likelihood: what on a graded path can fail between its first and its last write for a
reason other than the database, with the line that says so.

Input: a function's path (:class:`~.grading.Step` tuple, absolute lines) and its file's
lines; a call's callee path (``Step.inner``) is read in the callee's file. Output: the
:class:`Evidence` found, most telling first, and the :class:`Likelihood` it gives
(the rule file defines the levels).

The region read is the source between the first and the last write of the sequencing
function (the last write's own line too: its arguments run before it commits), plus the
same region inside every call on the path that holds two or more writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.grading import DB_EFFECTS, SIDE_EFFECTS, Step
from auditor.analysis.transactions.scanning import closing_bracket

# What commits a row on its own: a write, a commit, a repository call (not bookkeeping).
_COMMITTING = tuple(effect for effect in DB_EFFECTS if effect is not Effect.AUDIT)


class Likelihood(StrEnum):
    """How likely a failure between the writes is, for a reason other than the database."""

    LIKELY = "likely"
    """Something between the writes fails on bad input or a bad peer: a raise, a
    validation, a lookup that raises, parsing, an external call."""
    POSSIBLE = "possible"
    """The writes repeat in a loop: a later iteration can fail after earlier ones committed."""
    UNLIKELY = "unlikely"
    """Nothing between the writes but the database can fail."""


@dataclass(frozen=True)
class Evidence:
    """One reason a path can fail between its writes: ``kind`` (one of :data:`KINDS`) at
    ``line`` of ``path``, with the source text that shows it."""

    path: str
    line: int
    kind: str
    text: str

    def describe(self, path: str = "") -> str:
        """The evidence as a reader sees it: ``line 12 validates (form.full_clean())``,
        the file named too when it is not ``path``."""
        where = f"line {self.line}" if self.path == path else f"{self.path}:{self.line}"
        return f"{where} {_VERBS[self.kind]} ({self.text})"


# Most telling first: the order of the kinds is the order the explanation names them.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("raise", re.compile(r"^\s*(?:raise\b|throw\b|panic\()|\breturn\b[^\n]*\berr\b|\babort\(")),
    ("validation", re.compile(
        r"\b(?:full_clean|validated_save|clean_fields|validate_unique|validate\w*)\s*\("
        r"|\bis_valid\s*\(\s*raise_exception\s*=\s*True|\.clean\(\s*\)|^\s*assert\b"
    )),
    ("lookup", re.compile(
        r"\.objects\.get\(|\bget_object_or_404\(|\bget_list_or_404\(|\.get_or_404\(|\.first_or_404\("
        r"|\.one\(\)|\.get\(\s*(?:pk|id)\s*=|\.findById\(|\.orElseThrow\(|\b(?:request\.\w+|data|kwargs|params|payload)\[['\"]"
    )),
    ("parsing", re.compile(
        # A conversion of a literal (``Decimal(0)``, ``int("5")``) cannot fail: only one of a value.
        r"\b(?:int|float|Decimal|UUID)\((?!\s*(?:[-+]?[\d.]+|'[^']*'|\"[^\"]*\")?\s*\))|\bjson\.loads?\(|\bstrptime\(|\bparse\w*\(|\bparseInt\(|\bstrconv\.\w+\(|\bliteral_eval\("
    )),
    ("external call", re.compile(
        r"\brequests\.\w+\(|\bhttpx\.\w+\(|\burlopen\(|\bsend_mail\(|\bsend_mass_mail\(|\.send_\w*mail\w*\(|\.delay\("
        r"|\.apply_async\(|\bstorage\.\w+\(|\.upload\w*\(|\bboto3?\.|\bsubprocess\.\w+\(|\bhttp\.(?:Get|Post|NewRequest)\("
    )),
)
KINDS = (*(kind for kind, _ in _PATTERNS), "loop")
"""The kinds of evidence, most telling first."""
_VERBS = {
    "raise": "can raise",
    "validation": "validates",
    "lookup": "looks up a row or key that may be missing",
    "parsing": "parses input",
    "external call": "calls out",
    "loop": "writes in a loop, so a later iteration can fail after earlier ones committed",
}
_SUBSCRIPT_STORE = re.compile(r"""^\s*[A-Za-z_][\w.]*\[\s*(?:"[^"]*"|'[^']*')\s*\]\s*=(?!=)""")  # a string key: a mapping's store
_COMMENT = re.compile(r"^\s*(?:#|//|\*|/\*)")
_NESTED_DEFINITION = re.compile(r"^\s*(?:async\s+)?def\s|^\s*class\s")


def failure_points(
    path: str, steps: tuple[Step, ...], lines_of: Callable[[str], Sequence[str]], *, to_side_effect: bool = False
) -> tuple[Evidence, ...]:
    """Every reason ``steps`` (the path of a function in ``path``) can fail between its
    first and last write, most telling kind first, then by line; one piece per line. With
    ``to_side_effect``, also between the last write and a side effect after it (the lines
    before the side effect's own): what fails there leaves the writes without it."""
    found: dict[tuple[str, int], Evidence] = {}
    collected = _collect(path, steps, lines_of)
    if to_side_effect:
        collected += _before_side_effect(path, steps, lines_of)
    for evidence in collected:
        found.setdefault((evidence.path, evidence.line), evidence)
    order = {kind: position for position, kind in enumerate(KINDS)}
    return tuple(sorted(found.values(), key=lambda evidence: (order[evidence.kind], evidence.path, evidence.line)))


def likelihood(evidence: tuple[Evidence, ...]) -> Likelihood:
    """The level ``evidence`` gives: likely for any failure point but a loop."""
    if any(piece.kind != "loop" for piece in evidence):
        return Likelihood.LIKELY
    return Likelihood.POSSIBLE if evidence else Likelihood.UNLIKELY


def _collect(path: str, steps: tuple[Step, ...], lines_of: Callable[[str], Sequence[str]]) -> list[Evidence]:
    writing = [position for position, step in enumerate(steps) if any(effect in _COMMITTING for effect in step.effects)]
    found: list[Evidence] = []
    for step in steps:
        if step.callee is not None and step.inner and sum(effect in _COMMITTING for effect in step.effects) >= 2:
            found += _collect(step.callee.path, step.inner, lines_of)
    if len(writing) < 2 and not (writing and _writes_more_than_once(steps[writing[0]])):
        return found
    first, last = steps[writing[0]], steps[writing[-1]]
    lines = lines_of(path)
    # The first write's own arguments run before it commits: the scan starts after its call.
    found += _scan(path, lines, _last_line(lines, first.line) + 1, last.line)
    for step in steps[writing[0] : writing[-1] + 1]:
        if step.callee is None and any(effect in SIDE_EFFECTS for effect in step.effects):
            found.append(Evidence(path, step.line, "external call", _text(lines, step.line) or step.text))
        if step.in_loop and any(effect in _COMMITTING for effect in step.effects):
            found.append(Evidence(path, step.line, "loop", _text(lines, step.line) or step.text))
    return found


def _before_side_effect(path: str, steps: tuple[Step, ...], lines_of: Callable[[str], Sequence[str]]) -> list[Evidence]:
    """The evidence between the path's last write and the last side effect after it."""
    writing = [position for position, step in enumerate(steps) if any(effect in _COMMITTING for effect in step.effects)]
    if not writing:
        return []
    after = [step for step in steps[writing[-1] + 1 :] if any(effect in SIDE_EFFECTS for effect in step.effects)]
    if not after:
        return []
    return _scan(path, lines_of(path), steps[writing[-1]].line + 1, after[-1].line - 1)


_CALL_LINES = 40
"""How far past its first line a call's closing parenthesis is looked for."""


def _last_line(lines: Sequence[str], line: int) -> int:
    """The last line of the statement that begins a call at ``line``: the line holding the
    parenthesis that closes the last one ``line`` leaves open (``line`` itself when all close
    there, or none closes within ``_CALL_LINES``)."""
    if not 0 < line <= len(lines):
        return line
    text = "\n".join(lines[line - 1 : line - 1 + _CALL_LINES])
    first = lines[line - 1]
    last = line
    position = first.find("(")
    while position >= 0:
        end = closing_bracket(text, position, quotes="\"'`", strings_end_at_newline=True)
        if end is None:
            break
        last = max(last, line + text.count("\n", 0, end))
        position = first.find("(", end + 1) if end < len(first) else -1
    return last


def _writes_more_than_once(step: Step) -> bool:
    """A write repeated by a loop: one step, several rows."""
    return step.in_loop and any(effect in _COMMITTING for effect in step.effects)


def _scan(path: str, lines: Sequence[str], start: int, end: int) -> list[Evidence]:
    """The evidence in ``lines`` ``start``..``end`` (1-based, inclusive): one per line,
    its most telling kind."""
    found: list[Evidence] = []
    for number in range(max(start, 1), min(end, len(lines)) + 1):
        text = lines[number - 1]
        if _COMMENT.match(text) or _NESTED_DEFINITION.match(text):
            continue
        for kind, pattern in _PATTERNS:
            if pattern.search(_read_part(text) if kind == "lookup" else text):
                found.append(Evidence(path, number, kind, text.strip()[:80]))
                break
    return found


def _read_part(text: str) -> str:
    """The part of a line that reads: an assignment's value, when its target is a string-keyed
    subscript (``request.session["selected"] = selected`` stores a key, it cannot miss one; a
    list's ``items[i] = x`` may raise ``IndexError`` and stays a failure point)."""
    store = _SUBSCRIPT_STORE.match(text)
    return text[store.end() :] if store is not None else text


def _text(lines: Sequence[str], line: int) -> str:
    return lines[line - 1].strip()[:80] if 0 < line <= len(lines) else ""

