"""Read-only session scopes: a ``with scope() as session:`` block whose context manager
commits the session on exit, around a body that never changes the session.

SQLAlchemy's ``Session.commit()`` flushes the pending changes (new, dirty and deleted
objects) and commits the connection's transaction (sqlalchemy/orm/session.py
``Session.commit`` -> ``SessionTransaction.commit``, which runs ``_prepare_impl`` -> ``flush``);
with nothing added, changed or executed, it writes nothing. A ``@contextmanager`` function
that yields a session and commits after the ``yield`` (dispatch's ``get_session``) commits
what the ``with`` body did: when the body only reads, that commit is no effect.

The body is read-only when none of its lines changes the session or an object it holds:
no ``session.add/delete/merge/flush/execute/...`` on the ``as`` name, no attribute
assignment (``org.name = x`` dirties a loaded row), no ``commit``, and every call that is
handed the session resolves to a repository function that (through its own resolved
calls, a few levels down) does none of these either. A call handed the session that does
not resolve (a plugin's method) may write: the body is not read-only.

A block that ends committed is the other idle case: its session's last change is followed
by an unconditional ``session.commit()`` (at the block's top level, or in the body of a
``try`` there), no ``return``/``break``/``continue`` leaves the block before it, and nothing
after it can change the session (:meth:`SessionScopes.idle`'s second case:
``session.merge(row); session.commit()`` and then the scope's own commit at exit). What is
proven of the lines after that commit: no effect site; no session write call
(``add/merge/delete/flush/execute/...``) on any receiver, whatever its name (``self.db.add``
on a shared ``scoped_session`` is the scope's session); every call resolves to a repository
function, and that function reaches no effect site (:meth:`~.reach.Reach.reaches_effect`),
and neither it nor anything it reaches (every edge followed) makes a session write call or a
call that does not resolve; no use of the session; no attribute or item set on an object the
session may hold, and every call handed such an object resolves to code that changes none
either. A call that does not resolve (a plugin's hook) may stage something the exit commit
writes: the scope's commit is then a second commit. A standard ``logging`` call
(:mod:`.logging_calls`) handed no object the session may hold stages nothing. The
objects the session may hold are those read through it (``row = session.get(...)``, and
what is read from them), those handed to ``session.add/add_all/delete``, and those handed
to a call together with one it holds (a relationship's save-update cascade attaches them).
``session.merge(x)`` leaves ``x`` itself "unmodified, and un-associated with the Session if
not already" (sqlalchemy/orm/session.py ``Session.merge`` docstring): only what it returns
is held.

Inputs: the call graph and the per-file facts. Output: :meth:`SessionScopes.idle`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.index.model import Definition
from auditor.analysis.transactions.facts import FileFacts, enclosing_of
from auditor.analysis.transactions.logging_calls import is_logging_call, is_string_literal_call, logging_names
from auditor.analysis.transactions.reach import Reach
from auditor.analysis.transactions.scanning import python_code

_WITH = re.compile(r"^(\s*)(?:async\s+)?with\s+(?:[\w.]+\.)?(\w+)\s*\(.*\bas\s+([A-Za-z_]\w*)\s*:\s*(?:#.*)?$")
_CONTEXT_MANAGER = re.compile(r"(?:^|\.)(?:async)?contextmanager$")
# What changes a session: its own write calls, or an attribute set on a row it holds.
_SESSION_WORK = ("add", "add_all", "merge", "delete", "flush", "execute", "commit", "bulk_save_objects",
                 "bulk_insert_mappings", "bulk_update_mappings", "update", "insert")  # fmt: skip
_ATTRIBUTE_SET = re.compile(r"^\s*[A-Za-z_]\w*(?:\.\w+)+\s*(?:[-+*/|]?=)(?!=)")
# ``self.name = ...``: the object's own state, no row it holds (``self.row.name = ...`` is one).
_OWN_ATTRIBUTE = re.compile(r"^\s*(?:self|cls)\.\w+\s*(?:[-+*/|]?=)(?!=)")
_SESSION_ARGUMENT = re.compile(r"(?i)session")
# A session handed to a call: ``f(session)``, ``f(x, db_session=session)``.
_PASSED_SESSION = re.compile(r"(?i)[(,]\s*(?:\w+\s*=\s*)?\w*session\b")
_DEPTH = 4
_EXIT = re.compile(r"^\s*(?:return|break|continue|yield)\b")
_TRY = re.compile(r"^\s*try\s*:\s*(?:#.*)?$")
_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\b(?!\s*\()")
# A binding: ``a, b = value``, ``for a in value:``, ``with value as a:`` (names, then the value).
_BINDINGS = (
    re.compile(r"^\s*for\s+([A-Za-z_][\w\s,()]*?)\s+in\s+(.*)$"),
    re.compile(r"^\s*(?:async\s+)?with\s+(.*)\s+as\s+([A-Za-z_]\w*)\s*:"),
    re.compile(r"^\s*(?!(?:if|elif|while|return|assert|yield|await|del|print)\b)([A-Za-z_][\w\s,()]*?)\s*=(?!=)(.*)$"),
)
_ITEM_OR_ATTRIBUTE_SET = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:\.\w+|\[[^\]]*\])+\s*(?:[-+*/|]?=)(?!=)")
_CALL = re.compile(r"\w\s*\(")
_ATTACHING = re.compile(r"\.(?:add|add_all|delete)\s*\((.*)\)")
_KEYWORDS = frozenset({"None", "True", "False", "and", "or", "not", "in", "is", "if", "else", "for", "lambda", "await", "return"})


class SessionScopes:
    """Which ``with scope() as session:`` calls commit a block that changed nothing."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts], reach: Reach) -> None:
        self.graph = graph
        self.reach = reach
        self.facts = facts
        self._idle: dict[Edge, bool] = {}
        self._work: dict[tuple[FunctionRef, bool], bool] = {}
        self._changes: dict[FunctionRef, bool] = {}
        self._inert_refs: dict[FunctionRef, bool] = {}
        self._loggers: dict[str, frozenset[str]] = {}
        self._work_calls = re.compile(rf"\.(?:{'|'.join(_SESSION_WORK)})\s*\(")

    def idle(self, edge: Edge) -> bool:
        """Whether ``edge`` is a ``with`` statement's call into a ``@contextmanager``
        function, with an ``as`` name, whose body is read-only or ends committed with only
        provably inert code after its last commit (:meth:`_ends_committed`): the callee's
        commit on exit commits nothing."""
        found = self._idle.get(edge)
        if found is None:
            found = self._idle[edge] = self._compute_idle(edge)
        return found

    def _compute_idle(self, edge: Edge) -> bool:
        facts = self.facts.get(edge.caller.path)
        definition = self.graph.definition(edge.callee)
        if facts is None or definition is None or not any(_CONTEXT_MANAGER.search(d.split("(", 1)[0]) for d in definition.decorators):
            return False
        opening = _WITH.match(facts.line_text(edge.line))
        if opening is None or opening.group(2) != edge.callee.qualname.rsplit(".", 1)[-1]:
            return False
        indent, name = len(opening.group(1)), opening.group(3)
        body = _block(facts, edge.line, indent)
        if not body:
            return False
        callees = self._callees_by_line(edge.caller)
        return self._read_only(facts, body, name, callees) or self._ends_committed(facts, edge, body, name, callees)

    def _callees_by_line(self, ref: FunctionRef) -> dict[int, list[FunctionRef]]:
        """The functions ``ref`` calls, by the line of the call."""
        callees: dict[int, list[FunctionRef]] = {}
        for edge in self.graph.callees(ref):
            callees.setdefault(edge.line, []).append(edge.callee)
        return callees

    def _read_only(self, facts: FileFacts, body: list[int], name: str, callees: Mapping[int, list[FunctionRef]]) -> bool:
        """Whether no line of the block changes the session ``name``."""
        uses = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
        passed = re.compile(rf"[(,]\s*(?:\w+\s*=\s*)?{re.escape(name)}\b")
        for line in body:
            text = facts.line_text(line)
            if _ATTRIBUTE_SET.match(text) or (uses.search(text) and self._work_calls.search(text) and f"{name}." in text):
                return False
            if passed.search(text):
                if line not in callees:
                    return False  # the session handed to code the graph cannot see
                if any(self._does_work(callee, 0) for callee in callees[line]):
                    return False
        return True

    def _ends_committed(
        self, facts: FileFacts, edge: Edge, body: list[int], name: str, callees: Mapping[int, list[FunctionRef]]
    ) -> bool:
        """Whether the block opened at ``edge`` commits its session ``name`` unconditionally
        after its last change, and nothing after that commit may change the session: no
        effect site of the caller, no call that does not resolve, no call into code that
        reaches an effect (:meth:`_effect_free_after`), and none of :meth:`_may_change`."""
        opening = edge.line
        commits = [line for line in body if facts.line_text(line).strip() == f"{name}.commit()"]
        if not commits or not _unconditional(facts, commits[-1], opening):
            return False
        last = commits[-1]
        before = [line for line in body if line < last]
        if any(_EXIT.match(facts.line_text(line)) for line in before):
            return False  # a path leaves the block before the commit: the scope's may be its only one
        held = _held_names(facts, before, name, frozenset())
        after = [line for line in body if line > last]
        return self._effect_free_after(facts, edge.caller, after) and not self._may_change(facts, after, name, held, callees, 0)

    def _effect_free_after(self, facts: FileFacts, caller: FunctionRef, lines: list[int]) -> bool:
        """Whether ``lines`` of ``caller`` hold no effect site and every call on them
        resolves (graph, framework or dispatch edge of that name on that line) and only to
        code that reaches no effect (:meth:`~.reach.Reach.reaches_effect`, every edge below
        followed). Whatever session such code finds for itself (a shared
        ``scoped_session``, ``self.db.add(...)``) it stages nothing the scope's exit commit
        would write; an unresolved call (a plugin's, a library's) may."""
        wanted = set(lines)
        if any(self._work_calls.search(python_code(facts.line_text(line))) for line in lines):
            return False  # a session write call on any receiver (``db.add(x)``, an alias of the session)
        return self._calls_inert(facts, caller, wanted) and all(
            self._inert(edge.callee) for edge in self.reach.callees(caller) if edge.line in wanted
        )

    def _calls_inert(self, facts: FileFacts, caller: FunctionRef, wanted: set[int]) -> bool:
        """Whether the lines ``wanted`` of ``caller`` hold no effect site and every call on
        them resolves (a graph, framework or dispatch edge of the call's name on its line)
        or emits a standard ``logging`` record or is a string literal's method
        (:mod:`.logging_calls`: it changes nothing it is handed; what it is handed is
        :meth:`_may_change`'s to check)."""
        if any(site.call.line in wanted for site in facts.sites.get(caller, ())):
            return False
        resolved = {(edge.line, edge.callee.qualname.rsplit(".", 1)[-1]) for edge in self.reach.callees(caller) if edge.line in wanted}
        enclosing = enclosing_of(caller)
        loggers = self._logging_names(facts, caller)
        return all(
            (call.line, call.name) in resolved or is_logging_call(call.callee, loggers) or is_string_literal_call(call.callee)
            for call in facts.index.calls
            if call.line in wanted and call.enclosing == enclosing
        )

    def _logging_names(self, facts: FileFacts, caller: FunctionRef) -> frozenset[str]:
        """The module's ``logging`` names (:func:`.logging_names`) that ``caller`` does not
        bind itself (a local ``logger = ...`` may be anything)."""
        path = caller.path
        if path not in self._loggers:
            self._loggers[path] = logging_names(facts.lines, facts.index.imports)
        names = self._loggers[path]
        definition = self.graph.definition(caller)
        if not names or definition is None:
            return frozenset()
        body = " ".join(facts.line_text(line) for line in range(definition.start_line, definition.end_line + 1))
        return frozenset(name for name in names if not re.search(rf"(?<![\w.]){re.escape(name)}\s*(?::[^=\n]+)?=(?!=)|\b(?:as|for|global|nonlocal|def|import)\s+{re.escape(name)}\b", body))

    def _inert(self, ref: FunctionRef) -> bool:
        """Whether ``ref`` provably changes no session: it reaches no effect site
        (:meth:`~.reach.Reach.reaches_effect`), and it and every function it reaches
        (every edge followed) has a definition in the repository, makes no session write
        call on any receiver (``self.db.add(...)`` on a shared ``scoped_session``) and no
        call that does not resolve."""
        known = self._inert_refs.get(ref)
        if known is not None:
            return known
        inert = not self.reach.reaches_effect(ref)
        seen = {ref}
        queue = [ref]
        while inert and queue:
            node = queue.pop()
            definition = self.graph.definition(node)
            facts = self.facts.get(node.path)
            if definition is None or facts is None:
                inert = False
                break
            lines = range(definition.start_line, definition.end_line + 1)
            if any(self._work_calls.search(python_code(facts.line_text(line))) for line in lines) or not self._calls_inert(facts, node, set(lines)):
                inert = False
                break
            for edge in self.reach.callees(node):
                if edge.callee not in seen:
                    seen.add(edge.callee)
                    queue.append(edge.callee)
        self._inert_refs[ref] = inert
        return inert

    def _may_change(
        self, facts: FileFacts, lines: list[int], session: str | None, held: frozenset[str],
        callees: Mapping[int, list[FunctionRef]], depth: int,
    ) -> bool:
        """Whether one of ``lines`` may change the session (named ``session``, when the code
        sees it) or an object it may hold (``held``, grown along the lines): a use of the
        session, an attribute or item set on a held object, a call handed one that does not
        resolve or resolves to code that may, or a call into code that writes through a
        session of its own finding (:meth:`_does_work`, a shared ``scoped_session``)."""
        uses = re.compile(rf"(?<![\w.]){re.escape(session)}\b") if session is not None else None
        for numbers, text in _statements(facts, lines):
            if uses is not None and uses.search(text):
                return True
            if self._work_calls.search(text) and _mentions(text, held | {"self", "cls"}):
                return True  # a write call on something that may be the session
            target = _ITEM_OR_ATTRIBUTE_SET.match(text)
            if target is not None and target.group(1) in held:
                return True
            if _CALL.search(text):
                targets = [callee for number in numbers for callee in callees.get(number, [])]
                if _mentions(text, held) and (not targets or any(self._changes_arguments(callee, depth + 1) for callee in targets)):
                    return True
                if any(self._does_work(callee, 0, attributes=False) for callee in targets):
                    return True
            held = _held_after([text], session, held)
        return False

    def _changes_arguments(self, ref: FunctionRef, depth: int) -> bool:
        """Whether a function handed objects the session may hold may change one of them (all
        its parameters, ``self`` too, taken as held) or the session."""

        def changes(definition: Definition, facts: FileFacts) -> bool:
            held = frozenset(_parameters(facts, definition.start_line, definition.body_start_line))
            lines = list(range(definition.body_start_line, definition.end_line + 1))
            return self._may_change(facts, lines, None, held, self._callees_by_line(ref), depth)

        return self._recursive(self._changes, ref, ref, depth, changes)

    def _does_work(self, ref: FunctionRef, depth: int, *, attributes: bool = True) -> bool:
        """Whether a function changes a session it is handed: a session write call, an
        attribute set (unless ``attributes`` is false), or a call passing a session on that
        does not resolve or does so."""

        def works(definition: Definition, facts: FileFacts) -> bool:
            callees = self._callees_by_line(ref)
            for line in range(definition.body_start_line, definition.end_line + 1):
                text = facts.line_text(line)
                if (
                    (attributes and _ATTRIBUTE_SET.match(text) is not None and _OWN_ATTRIBUTE.match(text) is None)
                    or (_SESSION_ARGUMENT.search(text) is not None and self._work_calls.search(text) is not None)
                    or (_PASSED_SESSION.search(text) is not None and line not in callees)
                    or any(self._does_work(callee, depth + 1, attributes=attributes) for callee in callees.get(line, ()))
                ):
                    return True
            return False

        return self._recursive(self._work, (ref, attributes), ref, depth, works)

    def _recursive(
        self, cache: dict, key: object, ref: FunctionRef, depth: int, compute: Callable[[Definition, FileFacts], bool]
    ) -> bool:
        """``compute`` of ``ref``'s definition and facts, once per ``key`` in ``cache``; True
        (may change) past the depth limit or where ``ref`` is not known, False for a
        recursive call while it is being computed (it adds nothing new)."""
        known = cache.get(key)
        if known is not None:
            return known
        if depth > _DEPTH:
            return True
        cache[key] = False
        definition = self.graph.definition(ref)
        facts = self.facts.get(ref.path)
        result = True if definition is None or facts is None else compute(definition, facts)
        cache[key] = result
        return result


def _block(facts: FileFacts, line: int, indent: int) -> list[int]:
    """The lines of the block a statement at ``line`` (indented ``indent``) opens."""
    found: list[int] = []
    number = line + 1
    while number <= len(facts.lines):
        text = facts.line_text(number)
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        if text.strip():
            found.append(number)
        number += 1
    return found


def _unconditional(facts: FileFacts, line: int, opening: int) -> bool:
    """Whether the statement at ``line`` runs whenever the block opened at ``opening`` runs
    to its end: every block between them is a ``try`` body."""
    indent = _indent(facts.line_text(line))
    number = line - 1
    while number > opening:
        text = facts.line_text(number)
        if text.strip() and not text.lstrip().startswith("#") and _indent(text) < indent:
            if not _TRY.match(text):
                return False
            indent = _indent(text)
        number -= 1
    return True


def _held_names(facts: FileFacts, lines: list[int], session: str | None, held: frozenset[str]) -> frozenset[str]:
    """``held`` after the statements on ``lines`` (:func:`_held_after`)."""
    return _held_after([text for _, text in _statements(facts, lines)], session, held)


def _held_after(statements: list[str], session: str | None, held: frozenset[str]) -> frozenset[str]:
    """``held`` after ``statements`` (code, one statement each): a name bound from an
    expression that reads the session or a held object is held (one bound from anything else
    is not); what is handed to ``session.add/add_all/delete`` is; and every name handed to a
    call together with a held object is (a cascade may attach it). ``session.merge(x)``
    attaches a copy, not ``x``."""
    sources = held | ({session} if session is not None else frozenset())
    for text in statements:
        if text.lstrip().startswith("except"):
            continue
        attached = _ATTACHING.search(text) if session is not None and f"{session}." in text else None
        if attached is not None:
            held = held | _names(attached.group(1))
        elif _CALL.search(text) and _mentions(text, held):
            held = held | _names(text)
        for position, pattern in enumerate(_BINDINGS):
            binding = pattern.match(text)
            if binding is not None:
                names, value = (binding.group(2), binding.group(1)) if position == 1 else (binding.group(1), binding.group(2))
                targets = set(_names(names))
                while position == 2 and (chained := _BINDINGS[2].match(value)) is not None:
                    targets |= _names(chained.group(1))  # ``a = b = value``
                    value = chained.group(2)
                held = (held | targets) if _mentions(value, sources) else (held - targets)
                break
        sources = held | ({session} if session is not None else frozenset())
    return held


def _statements(facts: FileFacts, lines: list[int]) -> list[tuple[tuple[int, ...], str]]:
    """``lines`` grouped into statements (a line and those its open brackets carry on to),
    each with its code joined."""
    found: list[tuple[tuple[int, ...], str]] = []
    numbers: list[int] = []
    parts: list[str] = []
    depth = 0
    for line in lines:
        code = python_code(facts.line_text(line))
        numbers.append(line)
        parts.append(code.strip())
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth <= 0:
            found.append((tuple(numbers), " ".join(parts)))
            numbers, parts, depth = [], [], 0
    if numbers:
        found.append((tuple(numbers), " ".join(parts)))
    return found


def _mentions(text: str, names: frozenset[str] | set[str]) -> bool:
    return any(re.search(rf"(?<![\w.]){re.escape(name)}\b", text) for name in names)


def _names(text: str) -> frozenset[str]:
    """The bare names in ``text``: neither called nor an attribute, nor a keyword."""
    return frozenset(name for name in _IDENTIFIER.findall(python_code(text)) if name not in _KEYWORDS)



def _parameters(facts: FileFacts, start: int, body_start: int) -> set[str]:
    """The parameter names of the function defined on lines ``start`` up to its body."""
    header = " ".join(facts.line_text(line) for line in range(start, body_start))
    header = header[max(header.find("def "), 0) :]
    opened = header.find("(")
    if opened < 0:
        return set()
    inside = header[opened + 1 : header.rfind(")")]
    return {part.split("=", 1)[0].split(":", 1)[0].strip(" *") for part in inside.split(",")} - {""}


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())
