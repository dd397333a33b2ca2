"""Transaction boundaries on functions and calls: which decorators and ``with``
expressions open a transaction (the rule's patterns, or a repository function wrapping
one), which entry points Django runs inside ``ATOMIC_REQUESTS``, which signal receivers
run inside the transaction of the call that sends their signal (``pre_delete``/
``post_delete`` inside ``Collector.delete``: rows ``kind: inside`` of the framework facts),
which hooks the framework runs inside a transaction of its own (rows ``kind: runs-inside``),
and which call edges a boundary blocks.

Inputs: the call graph, the per-file facts (whose regions grow by the wrappers found
here), the rule's patterns, the request setting the project runs with
(:class:`~.django_settings.RequestSettings`), and the
signals each receiver is connected to with those sent inside a transaction. Output:
:class:`Boundaries` (``entry_covered``, ``edge_blocked``, ``decorated_boundary``,
``request_note``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import EntryPoint
from auditor.analysis.transactions.base import DOTTED
from auditor.analysis.transactions.django_settings import RequestSettings
from auditor.analysis.transactions.facts import FileFacts, RulePatterns, enclosing_of
from auditor.analysis.transactions.languages import traits
from auditor.index.model import CallSite, FileIndex

_WRAPPER_DEPTH = 4
_MAX_BASES = 32
_SELF_PARAMETERS = ("self", "cls")


_POST_HOOKS = frozenset({"form_valid", "form_invalid"})
_FROM_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+(\w+)(?:\s+as\s+(\w+))?\s*(?:#.*)?$")
_IMPORT_FALLBACK = re.compile(r"^\s*except\s*\(?\s*(?:ImportError|ModuleNotFoundError)\b")
_RETURN_NAME = re.compile(r"^\s*return\s+([A-Za-z_][\w.]*)\s*(?:#.*)?$")
_METHOD_DECORATOR = re.compile(r"^(?:[\w.]*\.)?method_decorator\(\s*([\w.]+(?:\(\s*\))?)")
_DECORATED_METHOD = re.compile(r"\bname\s*=\s*['\"](\w+)['\"]")


def _unwrapped(decorator: str) -> str:
    """``method_decorator(transaction.non_atomic_requests, ...)`` as the decorator it wraps."""
    found = _METHOD_DECORATOR.match(decorator)
    return found.group(1) if found else decorator


def _applies_to(class_decorator: str, method: str) -> bool:
    """Whether a decorator written on a class wraps its method ``method``: one written
    ``method_decorator(d, name="post")`` wraps only the method it names
    (django/utils/decorators.py ``method_decorator``: on a class it replaces the attribute
    ``name`` and nothing else); any other class decorator is taken to cover every method, as
    Spring's ``@Transactional`` on a class does."""
    if _METHOD_DECORATOR.match(class_decorator) is None:
        return True
    named = _DECORATED_METHOD.search(class_decorator)
    return named is not None and named.group(1) == method


class Boundaries:
    """Where transactions open, for one run of the analysis."""

    def __init__(
        self,
        indexes: Mapping[str, FileIndex],
        graph: CallGraph,
        facts: Mapping[str, FileFacts],
        patterns: RulePatterns,
        requests: RequestSettings,
        receiver_signals: Mapping[FunctionRef, frozenset[str]],
        inside_signals: frozenset[str],
        run_inside: frozenset[FunctionRef],
        in_request: frozenset[FunctionRef] = frozenset(),
    ) -> None:
        self.indexes = indexes
        self._mros: dict[FunctionRef, list[FunctionRef] | None] = {}
        self.graph = graph
        self.facts = facts
        self.patterns = patterns
        self.requests = requests
        """Whether Django runs every view in a transaction (``ATOMIC_REQUESTS``), and
        where that was read."""
        self.receiver_signals = receiver_signals
        """The signals each receiver function is connected to (last names)."""
        self.inside_signals = inside_signals
        """Signals whose receivers run inside the sending call's transaction."""
        self.run_inside = run_inside
        """The methods the framework runs inside a transaction it opens (ModelAdmin hooks)."""
        self.in_request = in_request
        """The methods a framework's own view runs (an OIDC backend's ``update_user``)."""
        self._wrappers: dict[tuple[str, str], bool] = {}
        self._pattern_verdicts: dict[str, bool | None] = {}
        self._wrapper_targets: dict[tuple[str, str], FunctionRef | None] = {}
        self._blocked: dict[Edge, bool] = {}
        # Wrappers can wrap wrappers (saleor: transaction_with_commit_on_errors ->
        # traced_atomic_transaction -> transaction.atomic): widen until nothing changes.
        for _ in range(_WRAPPER_DEPTH):
            self._wrappers.clear()
            added = 0
            for path in sorted(facts):
                added += facts[path].add_wrapped_regions(partial(self.is_boundary, path))
            if not added:
                break
        self._wrappers.clear()

    def decorated_boundary(self, ref: FunctionRef) -> bool:
        """Whether a decorator of the function (or its class) opens a transaction;
        ``method_decorator(transaction.atomic)`` is ``transaction.atomic`` on a method."""
        return any(self.is_boundary(ref.path, _unwrapped(decorator)) for decorator in self.decorators(ref))

    def decorators(self, ref: FunctionRef) -> tuple[str, ...]:
        """The decorators that wrap the function: its own, then those of its class that
        apply to it (``_applies_to``)."""
        definition = self.graph.definition(ref)
        if definition is None:
            return ()
        decorators = definition.decorators
        if definition.parent is not None:
            owner = self.graph.definition(FunctionRef(ref.path, definition.parent))
            if owner is not None and owner.kind == "class":
                method = ref.qualname.rsplit(".", 1)[-1]
                decorators = (*decorators, *(d for d in owner.decorators if _applies_to(d, method)))
        return decorators

    def dispatch_boundary(self, entry: EntryPoint) -> bool:
        """Whether a class-based view's handler runs inside a transaction its ``dispatch``
        opens: ``View.dispatch`` (django/views/generic/base.py) and DRF's ``APIView.dispatch``
        (rest_framework/views.py) call the handler, so a boundary decorating the ``dispatch``
        the view's MRO finds covers it: ``@method_decorator(transaction.atomic)`` on the
        nearest class defining ``dispatch``, or ``method_decorator(transaction.atomic,
        name="dispatch")`` on a class no nearer class overrides. ``method_decorator`` with
        ``name`` rebinds the attribute on the class it decorates only
        (django/utils/decorators.py ``method_decorator._dec``: ``setattr(obj, name, ...)``),
        so a subclass's own undecorated ``dispatch`` shadows it; read conservatively: such
        an override is taken to skip the base's, whatever it calls."""
        if entry.kind != "http":
            return False
        definition = self.graph.definition(entry.ref)
        if definition is None or definition.parent is None:
            return False
        mro = self._mro(FunctionRef(entry.ref.path, definition.parent)) or []
        if self._handler_boundary(entry, mro):
            return True
        for cls in mro:
            if self._wraps_dispatch(cls):
                return True
            dispatch = FunctionRef(cls.path, f"{cls.qualname}.dispatch")
            own = self.graph.definition(dispatch)
            if own is not None and own.kind != "class":
                return dispatch != entry.ref and self.decorated_boundary(dispatch)
        return False

    def _handler_boundary(self, entry: EntryPoint, mro: list[FunctionRef]) -> bool:
        """Whether a form view's ``form_valid``/``form_invalid`` runs inside a boundary on the
        ``post`` the view's MRO finds: Django's ``ProcessFormView.post`` calls them (and
        ``put`` calls ``post``: django/views/generic/edit.py), so a project ``post``
        decorated ``@method_decorator(transaction.atomic)`` that calls ``super().post``
        covers them (tendenci's forum ``PostEditMixin``)."""
        if entry.ref.qualname.rsplit(".", 1)[-1] not in _POST_HOOKS:
            return False
        for cls in mro:
            post = FunctionRef(cls.path, f"{cls.qualname}.post")
            own = self.graph.definition(post)
            if own is not None and own.kind != "class":
                return self.decorated_boundary(post)
        return False

    def _wraps_dispatch(self, cls: FunctionRef) -> bool:
        """Whether the class is decorated ``method_decorator(<boundary>, name="dispatch")``."""
        definition = self.graph.definition(cls)
        return definition is not None and any(
            _METHOD_DECORATOR.match(decorator) is not None and _applies_to(decorator, "dispatch")
            and self.is_boundary(cls.path, _unwrapped(decorator))
            for decorator in definition.decorators)

    def _mro(self, cls: FunctionRef) -> list[FunctionRef] | None:
        """The class's method resolution order over its repository bases (C3, as
        ``type.__mro__``; external bases are left out); None when too long, cyclic or
        inconsistent (found once per class)."""
        if cls in self._mros:
            return self._mros[cls]
        self._mros[cls] = None  # a cycle through this class finds none
        bases = list(self.graph.base_classes(cls))
        sequences = [self._mro(base) for base in bases]
        if any(sequence is None for sequence in sequences):
            return None
        pending = [list(sequence) for sequence in sequences if sequence] + ([bases] if bases else [])
        order = [cls]
        while pending:
            head = next((seq[0] for seq in pending if not any(seq[0] in other[1:] for other in pending)), None)
            if head is None or len(order) > _MAX_BASES:
                return None
            order.append(head)
            pending = [rest for seq in pending if (rest := [item for item in seq if item != head])]
        self._mros[cls] = order
        return order

    def is_boundary(self, path: str, expression: str) -> bool:
        """Whether a decorator or ``with`` expression written in ``path`` opens a transaction:
        it matches the rule's boundaries, or it names a repository function that itself
        opens one (a wrapper such as ``@traced_atomic`` around ``transaction.atomic``, or a
        decorator whose inner wrapper runs the function in such a block)."""
        by_pattern = self._boundary_by_pattern(expression)
        if by_pattern is not None:
            return by_pattern
        key = (path, strip_arguments(expression))
        if key not in self._wrappers:
            self._wrappers[key] = self._opens_transaction(self.wrapper_target(*key))
        if self._wrappers[key]:
            return True
        if not expression.rstrip().endswith(")"):
            return False
        factory = (path, key[1] + "()")
        if factory not in self._wrappers:
            self._wrappers[factory] = returns_boundary(self.graph, self.facts, self.wrapper_target(*key), self._boundary_by_pattern)
        return self._wrappers[factory]

    def entry_covered(self, entry: EntryPoint) -> bool:
        """Whether the entry point runs inside a transaction: a boundary decorator, a signal
        receiver connected only to signals sent inside a transaction (a delete's
        ``pre_delete``/``post_delete``), a hook the framework runs inside one it opens and
        the project never calls (a ModelAdmin's ``save_model``), or a Django view under ``ATOMIC_REQUESTS`` that
        does not opt out."""
        if self.decorated_boundary(entry.ref) or self.dispatch_boundary(entry) or self.covering_signals(entry):
            return True
        if entry.ref in self.run_inside:
            return True
        return self.requests.atomic and self.runs_in_request(entry) and not self.opts_out(entry)

    def runs_in_request(self, entry: EntryPoint) -> bool:
        """Whether Django runs the entry point inside a view: a Django or DRF view, or a
        function a framework's own view calls (rows ``kind: in-request``: a pyhermes
        subscriber; rows ``kind: runs-in-request``: an OIDC backend's ``update_user``)."""
        if entry.kind == "http" and (entry.detail.startswith(("django", "drf")) or entry.ref in self.in_request):
            return True
        return entry.kind == "consumer" and any(self.patterns.in_request.matches(decorator) for decorator in self.decorators(entry.ref))

    def opts_out(self, entry: EntryPoint) -> bool:
        """Whether the entry point (or its class) is decorated ``non_atomic_requests``, or
        its class's ``dispatch``, its own or inherited, is: ``View.as_view()`` copies the
        attributes decorators set on ``dispatch`` onto the view function Django checks
        (django/views/generic/base.py ``View.as_view``). ``method_decorator(d)`` is ``d``."""
        decorators = list(self.decorators(entry.ref))
        definition = self.graph.definition(entry.ref)
        if definition is not None and definition.parent is not None:
            dispatch = self.graph.class_member(FunctionRef(entry.ref.path, definition.parent), "dispatch")
            if dispatch is not None and dispatch != entry.ref:
                decorators += self.decorators(dispatch)
        return any(self.patterns.non_atomic.matches(_unwrapped(decorator)) for decorator in decorators)

    def request_note(self, entry: EntryPoint) -> str:
        """For an entry point Django runs in a view, the sentence saying which request
        setting its grade assumes (and where it was read); "" for any other."""
        if not self.runs_in_request(entry):
            return ""
        if self.requests.atomic and self.opts_out(entry):
            return f"The view opts out of ATOMIC_REQUESTS (non_atomic_requests); {self.requests.note()}"
        return self.requests.note()

    def covering_signals(self, entry: EntryPoint) -> frozenset[str]:
        """The signals a receiver entry point is connected to when every one of them is sent
        inside a transaction (its writes are covered by the call that sent it); else none."""
        if entry.kind != "consumer":
            return frozenset()
        signals = self.receiver_signals.get(entry.ref, frozenset())
        return signals if signals and signals <= self.inside_signals else frozenset()

    def edge_blocked(self, edge: Edge, call: CallSite | None) -> bool:
        """Whether a boundary stands on the call ``edge`` (``call`` is its call site): the
        call runs inside a boundary, or the callee opens its own transaction (a Spring
        method called on its own class excepted: the proxy is bypassed)."""
        blocked = self._blocked.get(edge)
        if blocked is None:
            blocked = self._blocked[edge] = self._compute_blocked(edge, call)
        return blocked

    def call_covered(self, edge: Edge, call: CallSite | None) -> bool:
        """Whether the call behind ``edge`` sits inside a boundary of its caller."""
        facts = self.facts.get(edge.caller.path)
        callee, arguments = (call.callee, call.arguments) if call is not None else ("", "")
        return facts is not None and facts.covered(enclosing_of(edge.caller), edge.line, callee, arguments)

    def _compute_blocked(self, edge: Edge, call: CallSite | None) -> bool:
        if self.call_covered(edge, call):
            return True
        if not self.decorated_boundary(edge.callee):
            return False
        index = self.indexes.get(edge.callee.path)
        if index is not None and traits(index.language).proxied_boundaries and self._self_invocation(edge, call):
            return False
        return True

    def _self_invocation(self, edge: Edge, call: CallSite | None) -> bool:
        """A call from a method to another method of the same class through ``this`` or bare."""
        if edge.caller.path != edge.callee.path or call is None:
            return False
        caller = self.graph.definition(edge.caller)
        callee = self.graph.definition(edge.callee)
        if caller is None or callee is None or caller.parent is None or caller.parent != callee.parent:
            return False
        return "." not in call.callee or call.callee.startswith("this.")

    def _boundary_by_pattern(self, expression: str) -> bool | None:
        """False for a non-atomic expression, True for one the rule's boundaries match, None
        when only a repository function behind it can tell (kept per expression: the
        wrapper search asks again on every widening round)."""
        if expression not in self._pattern_verdicts:
            verdict = False if self.patterns.non_atomic.matches(expression) else True if self.patterns.boundaries.matches(expression) else None
            self._pattern_verdicts[expression] = verdict
        return self._pattern_verdicts[expression]

    def wrapper_target(self, path: str, name: str) -> FunctionRef | None:
        """The repository function a decorator or ``with`` expression's dotted name written
        in ``path`` resolves to (resolved once: the graph does not change between rounds)."""
        key = (path, name)
        if key not in self._wrapper_targets:
            self._wrapper_targets[key] = self.graph.resolve(path, name) if DOTTED.match(name) else None
        return self._wrapper_targets[key]

    def _opens_transaction(self, target: FunctionRef | None) -> bool:
        facts = self.facts.get(target.path) if target is not None else None
        if target is None or facts is None:
            return False
        if any(region.enclosing == target.qualname for region in facts.regions):
            return True
        # A decorator's wrapper opens the transaction only if the decorated function runs
        # inside it: the region must hold the call to the decorator's function parameter.
        nested = target.qualname + "."
        parameters = self._signature_names(target, facts)
        calls = [re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(") for name in parameters]
        if not calls:
            return False
        wrappers = [d for d in facts.index.definitions if d.qualname.startswith(nested)]
        call_lines = {
            line for d in wrappers for line in range(d.start_line, d.end_line + 1)
            if any(call.search(facts.line_text(line)) for call in calls)
        }
        covered = {
            line for region in facts.regions if (region.enclosing or "").startswith(nested)
            for line in range(region.start_line, region.end_line + 1)
        }
        # Every run of the decorated function is inside the transaction (a wrapper that also
        # calls it outside, e.g. on one branch only, is no boundary).
        return bool(call_lines) and call_lines <= covered

    def _signature_names(self, target: FunctionRef, facts: FileFacts) -> tuple[str, ...]:
        """The parameter names of a function, read from its signature line(s)."""
        definition = self.graph.definition(target)
        if definition is None:
            return ()
        signature = " ".join(facts.line_text(line) for line in range(definition.start_line, definition.body_start_line + 1))
        found = re.search(r"\bdef\s+\w+\s*\(([^)]*)\)", signature)
        if found is None:
            return ()
        names = (part.split(":")[0].split("=")[0].strip().lstrip("*") for part in found.group(1).split(","))
        return tuple(name for name in names if name and name not in _SELF_PARAMETERS)


def returns_boundary(
    graph: CallGraph, facts: Mapping[str, FileFacts], target: FunctionRef | None, by_pattern: Callable[[str], bool | None]
) -> bool:
    """Whether every ``return`` of a repository function returns a boundary decorator
    (``by_pattern`` true), as written (``return transaction.atomic``) or through a name the
    function imports (``from django.db.transaction import atomic as atomic_func``; a fallback
    import after ``except ImportError`` aside): calling it gives the boundary (tendenci's
    ``@method_decorator(get_atomic_func())``)."""
    found = facts.get(target.path) if target is not None else None
    definition = graph.definition(target) if target is not None else None
    if found is None or definition is None:
        return False
    imported: dict[str, str] = {}
    fallback = False
    returned: set[str] = set()
    for number in range(definition.body_start_line, definition.end_line + 1):
        text = found.line_text(number)
        fallback = fallback or _IMPORT_FALLBACK.match(text) is not None
        imported_name = _FROM_IMPORT.match(text)
        if imported_name is not None and not fallback:
            imported.setdefault(imported_name.group(3) or imported_name.group(2), f"{imported_name.group(1)}.{imported_name.group(2)}")
        value = _RETURN_NAME.match(text)
        if value is not None:
            returned.add(value.group(1))
    return bool(returned) and all(
        by_pattern(imported.get(name, name)) or by_pattern(imported.get(name, name).rsplit(".", 1)[-1]) for name in returned
    )
