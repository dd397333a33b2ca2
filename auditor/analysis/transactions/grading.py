"""Severity of a function's sequence of effects: the grades of the tx-outside-transaction
rule (the analysis module's docstring, item 4, and the rule file say what each means).

A path is a tuple of :class:`Step` events. :func:`grade` returns its severity and, for a
sequence graded below critical or high for what its writes are, the reason in a few words
(the finding's explanation ends with it). The write kinds it reads come from the analysis:
``Effect.UPSERT`` and ``Effect.IDEMPOTENT`` from :func:`idempotent`, a step's ``subject``
from :func:`subject` and :func:`instance`; a step's ``caught`` from the path walker
(:func:`caught` marks an effect in a ``try`` body whose handler carries on).

The medium grades for only deletes, only idempotent writes, upserts before one write and
one object's writes rest on a retry completing the sequence. They do not apply when a
write after the first is caught, on this path or inside a callee on it (``carries_on``): the
code handles that failure and goes on, nobody retries, and what the earlier writes did is
the outcome.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from auditor.callgraph.graph import FunctionRef
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.base import DOTTED, Effect
from auditor.index.model import CallSite
from auditor.rules.severity import Severity

DB_EFFECTS = (Effect.WRITE, Effect.UPDATE, Effect.DELETE, Effect.IDEMPOTENT, Effect.UPSERT, Effect.AUDIT, Effect.REPOSITORY, Effect.COMMIT)
WRITES = (Effect.WRITE, Effect.UPDATE, Effect.DELETE, Effect.IDEMPOTENT, Effect.UPSERT)
SIDE_EFFECTS = (Effect.SIDE_EFFECT, Effect.UPLOAD)
# Writes to rows that exist that a re-run with the same input repeats to the same end:
# updates to given values (constants too) and deletes. Not upserts or links: they may
# create rows.
_RERUNNABLE = (Effect.UPDATE, Effect.IDEMPOTENT, Effect.DELETE)
RERUNNABLE = "every write updates or deletes existing rows to values a re-run with the same input writes again"
"""The reason of a sequence graded medium for being re-runnable (:func:`grade`)."""
DERIVED = "by its name the function rebuilds derived data, which the next run rewrites"
"""The reason of a function graded medium for its name (:func:`grade_function`)."""
SIDE_EFFECT_AFTER = "the side effect comes after the last write, the right order: a transaction would not undo it"
BOOKKEEPING_ONLY = "one write, the rest bookkeeping (event rows, search vectors, rate-limit counters)"
ONLY_DELETES = "only deletes: a retry finishes the cleanup"
ONLY_IDEMPOTENT = "only idempotent writes (upserts, relation changes, constant updates): a re-run completes them"
UPSERTS_FIRST = "only upserts or links before the last write: a re-run finds what they left and completes the path"
AUDIT_TRAIL = "one write and the audit-log row recording it: a failure leaves the change with no record of who made it"
"""The reason of a write beside the audit-log row that records it (graded high, no demotion)."""
ONE_OBJECT = "every write is to one object's row and its relations: what a failure leaves is that object, valid and editable"
# Bookkeeping: records of what happened and derived data a later run rebuilds. A failure
# between the real write and one of these loses a log line or leaves an index stale.
_BOOKKEEPING_FUNCTION = re.compile(r"(?i)(_events?$|^events?_|search_(vector|document|index)|mark_\w*dirty|_audit|^audit|_log$|^log_)")
# Audit trails among the bookkeeping: the record of who did what (``log_action``,
# ``AuditLog`` rows, history). Unlike event counters, search vectors or derived data nothing
# rebuilds an entry a failure lost, and maintainers make it atomic with the change it
# records (benchmarks/real_fixes: pretalx-orga-user-settings; issue 25).
_AUDIT_FUNCTION = re.compile(r"(?i)(_audit|^audit|_log$|^log_)")
_AUDIT_ROW = re.compile(r"(?:^|\.)(?:\w*Log|\w*History|\w*Audit\w*)\.")
# Derived data: prices, totals and caches a recalculation writes and the next one rewrites.
_DERIVED_FUNCTION = re.compile(r"(?i)^_?(?:re)?calculate|^_?(?:invalidate|refresh|recompute|rebuild)_|_if_expired$")
# Writes a re-run completes without harm: upserts, many-to-many and related-manager
# changes (adding an existing link is a no-op), and queryset updates to constant values.
_UPSERTS = frozenset({"update_or_create", "get_or_create"})
_RELATION_CHANGES = frozenset({"add", "set", "remove", "clear"})
_CONSTANT = re.compile(r"[-+]?\d[\d_.]*|True|False|None|'[^'\\]*'|\"[^\"\\]*\"|(?:[A-Za-z_]\w*\.)*[A-Z][A-Z0-9_]+")
# An upsert's defaults computed from a value read before it (``balance=src.balance - x``).
_RELATIVE_VALUE = re.compile(r"\bF\s*\(|[\w)\]]\s*[-+*/]\s*[\w(]")
# A string literal, emptied before the arithmetic check ("in-progress" is no subtraction).
_STRING_LITERAL = re.compile(r"'[^'\\\n]*'|\"[^\"\\\n]*\"")
_SAVES = frozenset({"save", "delete"})
DEMOTIONS = frozenset({ONLY_DELETES, UPSERTS_FIRST, ONE_OBJECT, RERUNNABLE, SIDE_EFFECT_AFTER})
"""The reasons that grade a sequence medium on a claim about who repairs its partial state
(a retry or re-run completes it, the object stays valid and editable, the side effect comes
in the right order). On a request's path the claim yields to a failure point between the
writes (:mod:`.assessment`): the user who got the error does not re-submit reliably, a
re-run meets the same failure, and maintainers fixed such sequences (benchmarks/real_fixes).
Only idempotent writes keep their grade: whatever a failure leaves is part of what the path
writes anyway."""
_UNRETRIED = "a later write's failure is caught and the function carries on, so no retry completes the earlier writes"
_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Step:
    """One event on a function's path: a direct effect, or a call whose callee's heaviest
    path has ``effects``."""

    line: int
    text: str
    effects: tuple[Effect, ...]
    callee: FunctionRef | None = None
    approximate: bool = False
    subject: str | None = None
    """The one object whose row and relations every database effect of the step writes
    (``channel`` for ``channel.save()`` or ``channel.checks.add(...)``; ``self`` inside
    its methods), or None when the step writes anything else."""
    caught: bool = False
    """Whether the step sits in a ``try`` body whose handler catches a database error (or
    everything) and carries on (no return, raise or throw): when it fails, the function
    goes on with what the earlier steps did."""
    carries_on: bool = False
    """For a call: whether the callee's path goes on past a caught write failure
    (:func:`caught_later`), leaving a partial state of its own that nobody retries."""
    in_loop: bool = False
    """Whether the step sits in a loop of its function: a re-run after a failure in a later
    iteration repeats the earlier iterations' writes."""
    memo: str | None = None
    """For a call into a memoized helper (:mod:`.memo`): the object and attribute it caches
    its result on, seen from this function (``request.user._perms``); a later call with the
    same key on the path writes nothing."""
    saved_row: str | None = None
    """For a direct ``save()`` of a row: the object saved (``event`` for ``event.save()``)
    with how often the function rebound it above and the loop holding it
    (:meth:`.Sequences._saved_row`); a later save with the same key on the same path writes
    that row's state again, not a second row, and counts once (:func:`saved_once`). None
    for a save that counts on its own (narrowed by ``update_fields``, bindings unknown)."""
    reads_before: bool = False
    """For a direct commit: whether its function only reads through the session before it
    (:mod:`.read_commits`), so it commits only what its callers staged."""
    inner: tuple[Step, ...] = field(default=(), compare=False, repr=False)
    """For a call: the callee's path whose effects the step counts (empty for a direct
    effect and for a call into a function that opens its own transaction)."""


def saved_once(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """``steps`` (one path) less every save of an object an earlier step on the path saved
    under the same key (not rebound between, in the same loop body or in none, the earlier
    not narrowed by ``update_fields``): one row's state written again, not a second row. Saves of one object on exclusive arms
    (an early-return branch and the main path) are on different paths and each counts."""
    seen: set[str] = set()
    kept: list[Step] = []
    for step in steps:
        if step.saved_row is not None:
            if step.saved_row in seen:
                continue
            seen.add(step.saved_row)
        kept.append(step)
    return tuple(kept) if len(kept) < len(steps) else steps


def caught(step: Step) -> Step:
    """``step`` marked as sitting in a ``try`` body whose handler carries on."""
    return replace(step, caught=True)


def weight(step: Step) -> int:
    """A step's weight on a path: how many effects it holds."""
    return len(step.effects)


def grade(steps: tuple[Step, ...], *, demote: bool = True) -> tuple[Severity, str] | None:
    """The severity of a function's path and, when a sequence is graded below critical or
    high for what its writes are, the reason in a few words; None when it is no finding.
    With ``demote`` false, none of the :data:`DEMOTIONS` applies and a side effect after the
    last write counts as one between them: the grade the path's effects have without a
    claim about their partial state."""
    effects = [effect for step in steps for effect in step.effects]
    if len(steps) == 1:
        single = steps[0].callee is None and len(effects) == 1 and effects[0] in (*WRITES, Effect.AUDIT)
        return (Severity.LOW, "") if single else None
    database = [position for position, effect in enumerate(effects) if effect in DB_EFFECTS]
    # Only a side effect between two database effects leaves a partial state behind: one
    # after the last write is the right order (the mail goes out for committed data).
    between = effects[database[0] : database[-1]] if database else []
    after = effects[database[-1] :] if database else []
    # A file stored after the row that names it is the wrong order (the row points to a
    # file that may never arrive): it counts wherever it comes.
    side_effects = sum(effect in SIDE_EFFECTS for effect in between) + after.count(Effect.UPLOAD)
    if not demote:
        side_effects += after.count(Effect.SIDE_EFFECT)
    # An update is a plain write to every grade but the re-runnable one (_rerunnable).
    graded = _grade_writes(steps, [Effect.WRITE if effect is Effect.UPDATE else effect for effect in effects], side_effects, demote)
    if demote and Effect.SIDE_EFFECT in after and (graded is None or graded[0] == Severity.LOW):
        return Severity.MEDIUM, SIDE_EFFECT_AFTER
    return graded


def grade_function(ref: FunctionRef, steps: tuple[Step, ...]) -> tuple[Severity, str] | None:
    """:func:`grade` of ``ref``'s path, demoted to medium when the function's name says it
    rebuilds derived data (the name says more than "re-runnable" does)."""
    graded = grade(steps)
    if graded is not None and (graded[0] in (Severity.CRITICAL, Severity.HIGH) or graded[1] == RERUNNABLE) and derived(ref):
        return Severity.MEDIUM, DERIVED
    return graded


def _grade_writes(
    steps: tuple[Step, ...], effects: list[Effect], side_effects: int, demote: bool
) -> tuple[Severity, str] | None:
    """:func:`grade` for the path's writes, commits and the side effects between them."""
    plain = effects.count(Effect.WRITE)
    deletes = effects.count(Effect.DELETE)
    upserts = effects.count(Effect.UPSERT)
    writes = plain + deletes + upserts + effects.count(Effect.IDEMPOTENT)
    bookkeeping = effects.count(Effect.AUDIT)
    commits = effects.count(Effect.COMMIT) + effects.count(Effect.REPOSITORY)
    if writes == 1 and not (bookkeeping or commits or side_effects):
        direct = [step for step in steps if step.callee is None and any(effect in WRITES for effect in step.effects)]
        return (Severity.LOW, "") if direct else None
    # A row created or changed and the entry recording it (a pruning delete is cleanup).
    if plain == 1 and writes == 1 and not (commits or side_effects) and any(map(_audit_trail, steps)):
        return Severity.HIGH, AUDIT_TRAIL
    unretried = ""
    if demote and not commits and not side_effects and writes + bookkeeping >= 2:
        retried = _retried(steps, effects, writes, plain, deletes, upserts)
        if retried is not None and not caught_later(steps):
            return retried
        if retried is not None:
            unretried = _UNRETRIED
    if demote and not commits and not side_effects and _rerunnable(steps):
        if not caught_later(steps):
            return Severity.MEDIUM, RERUNNABLE
        unretried = _UNRETRIED
    if writes >= 2 or (writes and (commits or side_effects)):
        return Severity.CRITICAL, unretried
    if commits >= 2 or (commits and side_effects):
        return Severity.HIGH, ""
    if writes + bookkeeping >= 2 or (bookkeeping and (commits or side_effects)):
        return Severity.MEDIUM, BOOKKEEPING_ONLY
    return None


def _retried(
    steps: tuple[Step, ...], effects: list[Effect], writes: int, plain: int, deletes: int, upserts: int
) -> tuple[Severity, str] | None:
    """The medium grade of a sequence whose partial state a retry or re-run completes, if
    the path's writes are such a sequence."""
    if writes and deletes == writes:
        return Severity.MEDIUM, ONLY_DELETES
    if writes and not plain and not deletes:
        return Severity.MEDIUM, ONLY_IDEMPOTENT
    rerun_completes = not _creates_in_loop(steps)  # a re-run creates the earlier iterations' rows again
    if plain == 1 and upserts == writes - 1 and [effect for effect in effects if effect in WRITES][-1] is Effect.WRITE and rerun_completes:
        return Severity.MEDIUM, UPSERTS_FIRST
    if _one_object(steps):
        return Severity.MEDIUM, ONE_OBJECT
    return None


def _creates_in_loop(steps: tuple[Step, ...]) -> bool:
    """Whether a plain write (a new row) on the path sits in a loop, here or in a callee."""
    for step in steps:
        if Effect.WRITE in step.effects and (step.in_loop or _creates_in_loop(step.inner)):
            return True
    return False


def caught_later(steps: tuple[Step, ...]) -> bool:
    """Whether a write after the path's first one is caught (its failure handled, the
    function carrying on), here or inside a callee."""
    written = False
    for step in steps:
        writes = sum(effect in WRITES for effect in step.effects)
        if writes:
            # A caught call holding two writes leaves the first when the second fails.
            if step.carries_on or (step.caught and (written or writes > 1)):
                return True
            written = True
    return False


def _rerunnable(steps: tuple[Step, ...]) -> bool:
    """Whether every database effect on the path is a write a re-run repeats to the same
    end and at least one is an update to given values (the other mixes have their own
    grades): nothing creates a row or a link, nothing is relative, nothing is bookkeeping."""
    database = [effect for step in steps for effect in step.effects if effect in DB_EFFECTS]
    return Effect.UPDATE in database and all(effect in _RERUNNABLE for effect in database) and not _moves_then_deletes(steps)


def _moves_then_deletes(steps: tuple[Step, ...]) -> bool:
    """Whether the path deletes one object (``source.delete()``) after updating rows of a
    queryset: the merge of an object into another, its rows re-pointed before it goes. A run
    that stops between the writes leaves the object's data split between two owners until
    someone notices, not a maintenance pass the next run completes (les-emplois made its
    organisation merge atomic: benchmarks/real_fixes, lesemplois-merge-organizations)."""
    moved = False
    for step in steps:
        if step.callee is not None and step.inner and _moves_then_deletes(step.inner):
            return True
        if step.callee is None and Effect.UPDATE in step.effects and step.subject is None:
            moved = True
        elif moved and step.callee is None and Effect.DELETE in step.effects and step.subject is not None:
            return True
    return False


def relative_value(arguments: str) -> bool:
    """Whether a write's argument text computes from a value read before it (``F()``,
    arithmetic): a re-run applies it again."""
    return _RELATIVE_VALUE.search(_STRING_LITERAL.sub("''", arguments)) is not None


def bookkeeping(ref: FunctionRef) -> bool:
    """Whether a function's name says its writes are bookkeeping or derived data (at a
    call site: its effects count as bookkeeping beside the caller's real writes)."""
    name = ref.qualname.rsplit(".", 1)[-1]
    return bool(_BOOKKEEPING_FUNCTION.search(name) or _DERIVED_FUNCTION.search(name))


def _audit_trail(step: Step) -> bool:
    """Whether a bookkeeping step writes an audit-log row: a call into a function named
    like an audit-log helper, or a write to a ``...Log``/``...History``/``...Audit`` model."""
    if Effect.AUDIT not in step.effects:
        return False
    if step.callee is not None:
        return bool(_AUDIT_FUNCTION.search(step.callee.qualname.rsplit(".", 1)[-1]))
    return bool(_AUDIT_ROW.search(step.text))


def derived(ref: FunctionRef) -> bool:
    """Whether a function's name says it rebuilds derived data (its own finding is graded
    medium: the next run rewrites what a failure left)."""
    return bool(_DERIVED_FUNCTION.search(ref.qualname.rsplit(".", 1)[-1]))


def _one_object(steps: tuple[Step, ...]) -> bool:
    """Whether every step that writes writes the same object (its row and relations): one
    subject, and its saves all under one key (a name rebound between two saves, or saved in
    two loops, names two rows: :attr:`Step.saved_row`)."""
    writing = [step for step in steps if any(effect in WRITES for effect in step.effects)]
    subjects = {step.subject for step in writing}
    rows = {step.saved_row for step in writing if step.saved_row is not None}
    return len(subjects) == 1 and None not in subjects and len(rows) <= 1


def idempotent(call: CallSite, orm: str) -> Effect | None:
    """The kind of write a re-run repeats without harm, if an autocommit write is one:
    ``UPSERT`` for an upsert or a link change, ``IDEMPOTENT`` for a queryset update to
    constant values; None for any other write."""
    if call.name in _RELATION_CHANGES and orm == "link":
        return Effect.UPSERT
    if call.name in _UPSERTS and not relative_value(call.arguments):
        return Effect.UPSERT
    if call.name != "update" or orm != "rows":
        return None  # JdbcTemplate.update("... SET n = n - ?"): SQL, not keyword constants
    values = [argument.partition("=")[2].strip() for argument in split_arguments(call.arguments)]
    return Effect.IDEMPOTENT if values and all(_CONSTANT.fullmatch(value) for value in values) else None


def subject(call: CallSite, orm: str) -> str | None:
    """The object a direct write changes, when it is one object: the receiver of
    ``x.save()``/``x.delete()``, the owner of ``x.tags.add(...)`` (a link changed); None
    for ``x.address_set.create(...)`` (a new row of its own), a class, a manager, a
    queryset or anything else."""
    if call.name in _SAVES:
        return receiver(call.callee)
    if call.name in _RELATION_CHANGES and orm == "link" and "." in call.callee:
        return receiver(call.callee.rsplit(".", 1)[0])
    return None


def receiver(callee: str) -> str | None:
    """The object a call is made on, when the callee text names one instance (``channel``
    in ``channel.save``, ``self.order`` in ``self.order.save``); None for a call result or
    a subscript (``get_account(1).save``, ``accounts[0].save``: not one name), a class or
    a manager."""
    text = callee.rsplit(".", 1)[0] if "." in callee else ""
    return instance(text.split(".")) if DOTTED.match(text) else None


def instance(receiver: list[str]) -> str | None:
    """``receiver`` as an object path when it names an instance (``self``, ``channel``,
    ``self.order``), not a class, a manager or a call chain."""
    if not receiver or not receiver[0][:1].islower() or "objects" in receiver:
        return None
    return ".".join(receiver) if all(_NAME.fullmatch(part) for part in receiver) else None
