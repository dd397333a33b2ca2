"""Impact: what a failure between a path's writes leaves behind, with the lines that say so.

Input: a function's path (:class:`~.grading.Step` tuple, absolute lines), its file's lines
(a callee's path is read in the callee's file) and the reason :func:`~.grading.grade` gave
for what its writes are. Output: an :class:`ImpactFinding`, the :class:`Impact` level and
the sentence that states its evidence (the rule file defines the levels).

High: data destroyed before its replacement is written (a delete, then a write of the same
kind), counters and money (``F()`` arithmetic, ``+=`` on a field, fields named like an
amount), an object created and then configured by later writes (its children, options,
relations; a call whose rows are only notices, log or history records about it tells of the
object and configures nothing). Low: what :mod:`.grading` already calls re-runnable, derived or bookkeeping,
and writes whose other rows are log, event or history records (an audit-log row beside one
write too: :data:`~.grading.AUDIT_TRAIL` keeps it shown, as pretalx's real fix asks, and the low
impact lists it after the findings whose partial state is worse). Medium: the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.grading import (
    BOOKKEEPING_ONLY,
    DERIVED,
    ONLY_IDEMPOTENT,
    RERUNNABLE,
    SIDE_EFFECT_AFTER,
    DB_EFFECTS,
    Step,
)

_COUNTED = DB_EFFECTS  # every database effect, bookkeeping too


class Impact(StrEnum):
    """How bad the partial state a failure between the writes leaves is."""

    HIGH = "high"
    """Data lost, counters or money wrong, or a new object left half-configured."""
    MEDIUM = "medium"
    """A partial update or create with no sign of the above."""
    LOW = "low"
    """Bookkeeping, derived or re-runnable data: the next run or a log line repairs it."""


class ImpactKind(StrEnum):
    """What the evidence of a high or low impact shows (the report ranks by it)."""

    REPLACED = "replaced"
    """Rows deleted before their replacement is written."""
    HALF_CONFIGURED = "half-configured"
    """A new object, then writes that name it."""
    COUNTER = "counter"
    """A counter or an amount computed from what was there."""
    PLAIN = "plain"
    """Neither high nor low: a partial update or create."""
    REPAIRED = "repaired"
    """Re-runnable, derived or bookkeeping data, or log rows beside one write."""


@dataclass(frozen=True)
class ImpactFinding:
    """An impact level, what its evidence shows and the sentence that states it ("" when
    none)."""

    impact: Impact
    kind: ImpactKind
    evidence: str = ""


@dataclass(frozen=True)
class _Site:
    """One write on the path where it happens: file, line, effect and the line's text."""

    path: str
    line: int
    effect: Effect
    text: str


_LOW_REASONS = frozenset({RERUNNABLE, DERIVED, BOOKKEEPING_ONLY, ONLY_IDEMPOTENT, SIDE_EFFECT_AFTER})
"""Grades whose partial state the next run, or nobody, needs to repair. The other medium
grades (only deletes, upserts before one write, one object's row and relations) are no
claim of low impact: maintainers fixed such sequences (benchmarks/real_fixes)."""
_COUNTER = re.compile(
    r"\bF\(\s*['\"]\w+['\"]\s*\)\s*[-+*/]|\b\w+\.\w+\s*[-+]=|"
    r"\b(?:balance|amount|quantity|stock|credit|debit|price|total|counter|num_\w+|\w+_count|count|position|quota)\s*[-+]?=(?!=)"
)
_BOOKKEEPING_ROW = re.compile(r"\b[A-Z]\w*(?:Log|Logs|Event|Events|Audit|History|Notification|Activity)\b|\blog_\w+\(|\baudit\w*\(")
# A notice about an object (a ``Notification`` row, an ``AuditLog`` or ``ChangeHistory``
# record) is no part of it: a call whose every row is one sends word of the object, it does
# not configure it. Read from the model a write's line names first (``Notification.objects.
# create(...)``, ``AuditLog(...)``), never from a name elsewhere on the line
# (``channel=Notification.EMAIL``); a ``RuleNotification`` is the rule's own setting.
_NOTICE_MODEL = re.compile(r"^(?:Notifications?|\w*(?:Log|Logs|History|Audit))$")
_WRITTEN_MODEL = re.compile(r"\b([A-Z]\w*)\s*(?:\.\s*objects\b|\()")
_ASSIGNED = re.compile(r"^\s*(?:const\s+|let\s+|var\s+|final\s+)?(?:\w+(?:<[^>]*>)?\s+)?([a-z_]\w*)(?:\s*,\s*\w+)?\s*:?=(?!=)")
_SAVED = re.compile(r"\b([a-z_]\w*)\.(?:save|persist|insert)\w*\(")
_KIND_NOISE = frozenset({
    "self", "objects", "filter", "delete", "create", "save", "all", "get", "exclude", "update", "bulk", "remove",
    "clear", "set", "add", "session", "db", "query", "none", "true", "false", "pk", "id", "request", "user",
    "_", "err", "error", "result", "res", "rows",  # a discarded value or a statement's result, not a new object
})
_MANAGER_CREATE = re.compile(r"\.(?:objects|_default_manager|_base_manager)\.create\(")
_ROWS = re.compile(r"(\w+)\s*\.\s*(?:objects|all|filter|exclude|create|delete|bulk_create|add|set|query)\b|\b([A-Z]\w+)\(")


def impact(
    path: str, steps: tuple[Step, ...], lines_of: Callable[[str], Sequence[str]], reason: str
) -> ImpactFinding:
    """The impact of a failure between the writes of ``steps`` (a function's path in
    ``path``) whose grade gave ``reason``."""
    if reason == DERIVED:
        return ImpactFinding(Impact.LOW, ImpactKind.REPAIRED, "by its name the function rebuilds derived data")
    sites = list(_sites(path, steps, lines_of))
    replaced = _destroyed_then_replaced(sites, path)
    if replaced:
        return ImpactFinding(Impact.HIGH, ImpactKind.REPLACED, replaced)
    configured = _half_configured(path, steps, lines_of, path)
    if configured:
        return ImpactFinding(Impact.HIGH, ImpactKind.HALF_CONFIGURED, configured)
    counter = _counter(sites, path)
    if counter:
        return ImpactFinding(Impact.HIGH, ImpactKind.COUNTER, counter)
    if reason in _LOW_REASONS:
        return ImpactFinding(Impact.LOW, ImpactKind.REPAIRED, reason)
    business = [site for site in sites if site.effect is not Effect.AUDIT and not _BOOKKEEPING_ROW.search(site.text)]
    if len(business) <= 1 < len(sites):
        return ImpactFinding(Impact.LOW, ImpactKind.REPAIRED, "the other writes are log, event or history rows")
    return ImpactFinding(Impact.MEDIUM, ImpactKind.PLAIN)


def _sites(path: str, steps: tuple[Step, ...], lines_of: Callable[[str], Sequence[str]]) -> Iterator[_Site]:
    """Every write on the path where it happens, as the call sites count them (a
    bookkeeping callee's writes are bookkeeping)."""
    lines = lines_of(path)
    for step in steps:
        if step.callee is not None and step.inner:
            inner = list(_sites(step.callee.path, step.inner, lines_of))
            counted = [effect for effect in step.effects if effect in _COUNTED]
            for site, effect in zip(inner, counted):
                yield _Site(site.path, site.line, effect, site.text)
        else:
            for effect in step.effects:
                if effect in _COUNTED:
                    yield _Site(path, step.line, effect, _text(lines, step.line) or step.text)


def _destroyed_then_replaced(sites: list[_Site], path: str) -> str:
    """A delete and, after it, a write of the same kind of row: the old rows are gone
    before the new ones exist (lines named as ``_where`` does, from ``path``)."""
    for position, deleted in enumerate(sites):
        if deleted.effect is not Effect.DELETE:
            continue
        kinds = _kinds(deleted.text)
        for written in sites[position + 1 :]:
            if written.effect in (Effect.WRITE, Effect.UPSERT) and kinds & _kinds(written.text):
                return (
                    f"{_where(deleted.path, deleted.line, path)} deletes ({deleted.text}) and {_where(written.path, written.line, path)} writes the same kind again "
                    f"({written.text}): a failure in between loses what was deleted"
                )
    return ""


def _counter(sites: list[_Site], path: str) -> str:
    """A write of a counter, a position or an amount computed from what was there."""
    for site in sites:
        if site.effect is not Effect.AUDIT and _COUNTER.search(site.text):
            return f"{_where(site.path, site.line, path)} changes a counter or an amount ({site.text}): a failure after it leaves the numbers wrong"
    return ""


def _half_configured(path: str, steps: tuple[Step, ...], lines_of: Callable[[str], Sequence[str]], top: str) -> str:
    """A new row (a create, not an update of a row read here) and a later write that names
    it (its children, options, relations): a failure in between leaves it half-configured.
    ``steps`` run in ``path``; lines are named as ``_where`` does, from ``top`` (the file of
    the function whose path it is)."""
    lines = lines_of(path)
    created: dict[str, int] = {}
    for step in steps:
        text = _text(lines, step.line)
        writes = [effect for effect in step.effects if effect in _COUNTED and effect is not Effect.AUDIT]
        if not writes or not text:
            continue
        for name, line in created.items():
            if line == step.line:
                continue
            names_it = re.search(rf"\b{re.escape(name)}\b", text) is not None and not _only_saves(name, text)
            if (names_it or _saved_holding(name, text, lines, line, step.line)) and not _only_notices(step, lines_of):
                return (
                    f"{_where(path, line, top)} creates {name} and {_where(path, step.line, top)} writes what belongs to it ({text}): "
                    f"a failure in between leaves {name} half-configured"
                )
        # A manager create the model's own ``save`` override stands for creates its row too.
        if Effect.WRITE in writes and (step.callee is None or (step.callee.qualname.endswith(".save") and _MANAGER_CREATE.search(text))):
            name = _created_name(text)
            if name is not None:
                created.setdefault(name, step.line)
    for step in steps:
        if step.callee is not None and step.inner:
            found = _half_configured(step.callee.path, step.inner, lines_of, top)
            if found:
                return f"in {step.callee.qualname}, {found}"
    return ""


def _only_notices(step: Step, lines_of: Callable[[str], Sequence[str]]) -> bool:
    """Whether a call's writes are all notices, log or history rows (``item.send_notification()``
    whose only row is a ``Notification``) or audit-log calls: it tells of the object, it does
    not configure it."""
    if step.callee is None or not step.inner:
        return False
    sites = list(_sites(step.callee.path, step.inner, lines_of))
    return bool(sites) and all(site.effect is Effect.AUDIT or _notice_written(site.text) for site in sites)


def _notice_written(text: str) -> bool:
    """Whether the first model a write's line names is a notice's (:data:`_NOTICE_MODEL`)."""
    model = _WRITTEN_MODEL.search(text)
    return model is not None and _NOTICE_MODEL.match(model.group(1)) is not None


def _created_name(text: str) -> str | None:
    """The variable a create's line binds (``token = Token.objects.create(...)``) or the
    object a line saves (``token.save()``)."""
    assigned = _ASSIGNED.match(text)
    if assigned is not None and (assigned.group(1) not in _KIND_NOISE or (assigned.group(1) == "user" and _MANAGER_CREATE.search(text))):
        return assigned.group(1)  # ``user = User.objects.create(...)`` is a new user, not the request's
    saved = _SAVED.search(text)
    return saved.group(1) if saved is not None and saved.group(1) not in _KIND_NOISE else None


def _saved_holding(name: str, text: str, lines: Sequence[str], created: int, line: int) -> bool:
    """Whether ``text`` (at ``line``) saves an object that a line since ``created`` gave
    ``name`` as an attribute (``instance.user = user`` then ``instance.save()``)."""
    saved = _SAVED.search(text)
    if saved is None or saved.group(1) in _KIND_NOISE or saved.group(1) == name:
        return False
    holds = re.compile(rf"^\s*{re.escape(saved.group(1))}\.\w+\s*=\s*{re.escape(name)}\s*(?:#.*)?$")
    return any(holds.match(lines[number - 1]) for number in range(created + 1, min(line, len(lines) + 1)))


def _only_saves(name: str, text: str) -> bool:
    """Whether the line only saves ``name`` again (the same row, not what belongs to it)."""
    return re.fullmatch(rf"\s*{re.escape(name)}\.save\([^)]*\)\s*;?\s*", text) is not None


def _kinds(text: str) -> set[str]:
    """The names a write's line gives its rows, singular and lower case (``view.rules``,
    ``Rule.objects`` and ``rule_set`` are one kind): a class or a collection a manager
    method is called on, or a class constructed."""
    kinds = set()
    for word in _ROWS.findall(text):
        name = next(part for part in word if part)
        lowered = name.lower().removesuffix("_set").removesuffix("s")
        if lowered not in _KIND_NOISE and len(lowered) > 2:
            kinds.add(lowered)
    return kinds


def _where(path: str, line: int, top: str) -> str:
    """``line N``, or ``path:N`` when the line is in another file than ``top`` (the
    sequencing function's), as ``likelihood.Evidence.describe`` names it."""
    return f"line {line}" if path == top else f"{path}:{line}"


def _text(lines: Sequence[str], line: int) -> str:
    return lines[line - 1].strip()[:100] if 0 < line <= len(lines) else ""
