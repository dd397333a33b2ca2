"""Repeated saves: a Django ``x.save()`` whose previous write on the path saved or created
the same object, with nothing done to that object in between, writes the row it wrote
again — the same values, not a second piece of state.

Django's ``Model.save()`` writes every concrete field of the instance from its in-memory
values (django/db/models/base.py ``Model.save`` -> ``save_base`` -> ``_save_table``: an
UPDATE of all non-primary-key fields with ``f.pre_save(self, False)`` once the instance has
a primary key and is no longer ``_state.adding``), and ``QuerySet.create`` builds the
instance and saves it with ``force_insert=True`` (django/db/models/query.py
``QuerySet.create``), leaving it saved. When nothing assigned to the instance, called a
method on it or handed it anywhere in between, and no other database effect ran on the
path between the two, the second save writes what the first wrote (an ``auto_now`` field
gets a new time: no partial state either way). A failure between the two leaves the state
the second would have left.

The previous write is one of: ``x = M.objects.create(...)``; ``x, created =
M.objects.get_or_create(...)`` or ``update_or_create`` (``x`` holds the row as read or as
written: django/db/models/query.py ``QuerySet.get_or_create``, ``update_or_create``); a plain ``x.save()`` (a save
override whose every database effect saves ``self`` whole counts as one); or a call
``x.m(...)`` into a method whose every database effect is a plain ``self.save()`` and whose
body never mentions ``self`` again after its last save (``self._recreate_search_captions()``,
which sets fields and saves). A save narrowed by ``update_fields`` is none of these: fields
set in memory before it stay unsaved (``Model.save``: "only the fields named in
update_fields are updated"), so the next full save writes them (ephios's
``reset_calendar_token`` after ``set_unusable_password``). The repeated save is a plain ``x.save()`` with no arguments, outside any loop,
whose effects are writes only (an override with a side effect, or writes to other rows,
stays).

Input: a function's path of :class:`~.grading.Step`, its facts and parsed body, the call
graph and every file's facts. Output: :func:`without_repeated_saves`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.analysis.transactions import paths
from auditor.analysis.transactions.base import DOTTED, Effect
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.grading import DB_EFFECTS, Step
from auditor.analysis.transactions.paths import Body
from auditor.analysis.transactions.scanning import python_code

_PLAIN_SAVE = re.compile(r"^\s*(?:return\s+)?([A-Za-z_][\w.]*)\.save\(\s*\)\s*(?:#.*)?$")
_CREATED = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*[A-Z]\w*\.objects\.create\(")
# ``x, created = M.objects.get_or_create(...)`` (or update_or_create): ``x`` is the row as
# read, or as just created or saved (django/db/models/query.py ``QuerySet.get_or_create``
# returns ``self.get(**kwargs)`` or ``self.create(**params)``; ``update_or_create`` saves the
# object it returns): its fields in memory are the row's.
_GOT_OR_CREATED = re.compile(r"^\s*([A-Za-z_]\w*)\s*,\s*[A-Za-z_]\w*\s*=\s*[A-Z]\w*\.objects\.(?:get_or_create|update_or_create)\(")
_SUPER_SAVE = re.compile(r"^\s*(?:return\s+)?super\([^)]*\)\.save\(")
# ``update_fields`` given anything but the override's own parameter: a partial save.
_NARROWED = re.compile(r"\bupdate_fields\s*=\s*(?!update_fields\b)")
_METHOD_CALL = re.compile(r"^\s*(?:[A-Za-z_]\w*\s*=\s*)?([A-Za-z_][\w.]*)\.(\w+)\(")
# A save of the method's own row, seen inside it: ``self.save(...)``, ``super().save(...)``.
_OWN_SUBJECTS = frozenset({"self", "super"})
_SAVE_EFFECTS = frozenset({Effect.WRITE, Effect.UPDATE})
_DEPTH = 4
_STATEMENT_LINES = 20


def without_repeated_saves(
    steps: tuple[Step, ...], facts: FileFacts, body: Body | None, graph: CallGraph, all_facts: Mapping[str, FileFacts],
    function: FunctionRef,
) -> tuple[Step, ...]:
    """``steps`` (``function``'s path) less each plain ``x.save()`` whose previous database
    step on the path saved or created ``x``, with no line between the two (in the arms the
    path takes) naming ``x``'s root or calling ``setattr``, no other name bound to ``x`` in
    the function, and no other database effect between them."""
    if facts.index.language != "python" or len(steps) < 2:
        return steps
    node = body[0] if body is not None else None
    offset = body[2] if body is not None else 0
    kept: list[Step] = []
    last_db: Step | None = None
    for step in steps:
        if not any(effect in DB_EFFECTS for effect in step.effects):
            kept.append(step)
            continue
        repeated = (
            last_db is not None
            and not step.in_loop
            and last_db.line < step.line
            and (saved := _repeated_save(step, facts, graph, all_facts)) is not None
            and _saved_or_created(last_db, facts, graph, all_facts, 0) == saved
            and not _named_between(saved, last_db.line, step.line, facts, node, offset)
            and not _aliased(saved, step.line, facts, graph, function)
        )
        if not repeated:
            kept.append(step)
            last_db = step
    return tuple(kept)


def _repeated_save(step: Step, facts: FileFacts, graph: CallGraph, all_facts: Mapping[str, FileFacts]) -> str | None:
    """The object ``step`` saves, when it is a plain ``x.save()`` with writes only: a direct
    save, or a call into a save override whose every database effect saves ``self``."""
    if not step.effects or any(effect not in _SAVE_EFFECTS for effect in step.effects):
        return None
    plain = _PLAIN_SAVE.match(facts.line_text(step.line))
    if plain is None or not DOTTED.match(plain.group(1)):
        return None
    if step.callee is None:
        return plain.group(1) if step.subject == plain.group(1) else None
    if step.callee.qualname.rsplit(".", 1)[-1] != "save" or not _saves_only_self(step.inner, step.callee, graph, all_facts, 0, forwarded=True):
        return None
    return plain.group(1)


def _saved_or_created(step: Step, facts: FileFacts, graph: CallGraph, all_facts: Mapping[str, FileFacts], depth: int) -> str | None:
    """The object ``step`` leaves saved as its last write: ``x`` of ``x = M.objects.create(...)``,
    of a plain ``x.save()``, or of ``x.m(...)`` into a method that only saves ``self`` and
    never names ``self`` after its last save."""
    text = facts.line_text(step.line)
    if step.callee is None:
        if step.effects == (Effect.WRITE,) and (created := _CREATED.match(text)) is not None and "create(...)" in step.text:
            return created.group(1)
        if step.effects in {(Effect.WRITE,), (Effect.UPSERT,)} and (got := _GOT_OR_CREATED.match(text)) is not None and "create(...)" in step.text:
            return got.group(1)
        return _repeated_save(step, facts, graph, all_facts)
    called = _METHOD_CALL.match(text)
    if called is None or called.group(2) != step.callee.qualname.rsplit(".", 1)[-1] or not DOTTED.match(called.group(1)):
        return None
    if called.group(2) == "save":
        return _repeated_save(step, facts, graph, all_facts)
    if depth > _DEPTH or not step.inner or any(effect not in _SAVE_EFFECTS for effect in step.effects):
        return None
    if not _saves_only_self(step.inner, step.callee, graph, all_facts, depth + 1):
        return None
    definition = graph.definition(step.callee)
    callee_facts = all_facts.get(step.callee.path)
    if definition is None or callee_facts is None:
        return None
    last = step.inner[-1].line
    self_named = re.compile(r"(?<![\w.])self\b")
    if any(self_named.search(python_code(callee_facts.line_text(line))) for line in range(last + 1, definition.end_line + 1)):
        return None  # the method goes on with its object after saving it
    return called.group(1)


def _saves_only_self(
    steps: tuple[Step, ...], ref: FunctionRef, graph: CallGraph, all_facts: Mapping[str, FileFacts], depth: int, *, forwarded: bool = False
) -> bool:
    """Whether every database step of ``ref``'s path ``steps`` saves ``ref``'s own object
    whole: a plain ``self.save()`` (a save override's own steps checked alike), or, inside an
    override called plainly (``forwarded``), ``super().save(...)`` passing on no
    ``update_fields`` but its own. A save limited by ``update_fields`` leaves other fields
    set in memory unsaved: the next save writes them."""
    facts = all_facts.get(ref.path)
    if depth > _DEPTH or not steps or facts is None:
        return False
    for step in steps:
        if not any(effect in DB_EFFECTS for effect in step.effects):
            return False  # a side effect the repeated save would run again
        if any(effect not in _SAVE_EFFECTS for effect in step.effects):
            return False
        text = python_code(facts.line_text(step.line))
        plain = _PLAIN_SAVE.match(text)
        whole_call = _statement(facts, step.line)
        if step.callee is None:
            if step.subject not in _OWN_SUBJECTS or not step.text.endswith(".save(...)"):
                return False
            whole = (plain is not None and plain.group(1) == "self") or (
                forwarded and _SUPER_SAVE.match(text) is not None and _NARROWED.search(whole_call) is None
            )
            if not whole:
                return False
        elif (
            step.callee.qualname.rsplit(".", 1)[-1] != "save"
            or plain is None
            or plain.group(1) != "self"
            or not _saves_only_self(step.inner, step.callee, graph, all_facts, depth + 1, forwarded=True)
        ):
            return False
    return True


def _statement(facts: FileFacts, line: int) -> str:
    """The code of the statement starting at ``line``: its lines until brackets balance."""
    parts: list[str] = []
    depth = 0
    for number in range(line, min(line + _STATEMENT_LINES, len(facts.lines) + 1)):
        code = python_code(facts.line_text(number))
        parts.append(code)
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth <= 0:
            break
    return " ".join(parts)


def _aliased(saved: str, line: int, facts: FileFacts, graph: CallGraph, function: FunctionRef) -> bool:
    """Whether ``function``, before ``line``, binds another name to ``saved``'s root
    (``other = x``): a change through that name would not name ``x``."""
    definition = graph.definition(function)
    if definition is None:
        return True
    alias = re.compile(rf"^\s*[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*=\s*{re.escape(saved.split('.', 1)[0])}\s*$")
    return any(alias.search(python_code(facts.line_text(number)).rstrip()) for number in range(definition.start_line, line))


def _named_between(saved: str, first: int, last: int, facts: FileFacts, body, offset: int) -> bool:
    """Whether a line strictly between ``first`` and ``last``, in an arm the path through
    both takes, names the root of ``saved`` (an assignment to it, a call on it or with it)
    or calls ``setattr``."""
    root = re.compile(rf"(?<![\w.])(?:{re.escape(saved.split('.', 1)[0])}\b|setattr\s*\()")
    named = [line for line in range(first + 1, last) if root.search(python_code(facts.line_text(line)))]
    if not named or body is None:
        return bool(named)
    untaken = paths.untaken_arms(body, first - offset) + paths.untaken_arms(body, last - offset)
    return any(not any(start <= line - offset <= end for start, end in untaken) for line in named)
