"""Sequences: the heaviest feasible path of uncovered effects through a function, with its
callees' effects counted at their call sites.

Each function's events are its uncovered effect sites and its unblocked calls into
functions with effects (the callee's own heaviest path, with the parameters the call
switches off; a session scope's commit of a ``with`` block that only read is none:
:mod:`.session_scopes`). A call whose result decides an immediate return or raise counts,
on the path that carries on, only the callee's paths returning the other kind of value
(:mod:`.outcomes`); the path that returns there counts them all. The path walker (:mod:`.paths`) picks the heaviest feasible path; a
base-class method's self-calls into subclass overrides are taken per concrete class (the
heaviest class counts, never a sum of different classes' overrides).

Inputs: the per-file facts, reachability (:mod:`.reach`), boundaries
(:mod:`.boundaries`) and call arguments (:mod:`.arguments`). Output:
:meth:`Sequences.path_of`, a tuple of :class:`~.grading.Step`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from collections.abc import Callable, Mapping

from tree_sitter import Node

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import MAIN_FUNCTION, strip_arguments
from auditor.analysis.transactions import outcomes, paths
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.arity import Arity
from auditor.analysis.transactions.base import Effect
from auditor.analysis.transactions.boundaries import Boundaries
from auditor.analysis.transactions.chain_receivers import ChainReceivers
from auditor.analysis.transactions.receivers import CREATED
from auditor.analysis.transactions.snapshots import Snapshots
from auditor.analysis.transactions.sqlalchemy_series import releases_savepoint
from auditor.analysis.transactions.value_cases import parameter_names, value_cases
from auditor.analysis.transactions.dispatch import OVERRIDE, class_of
from auditor.analysis.transactions.ensured_rows import EnsuredRows
from auditor.analysis.transactions.facts import FileFacts, enclosing_of
from auditor.analysis.transactions.bound_parameters import Bound, bound_at, bound_callees
from auditor.analysis.transactions.committed_objects import handed_back
from auditor.analysis.transactions.grading import (
    DB_EFFECTS,
    WRITES,
    Step,
    bookkeeping,
    caught,
    saved_once,
    caught_later,
    weight,
)
from auditor.analysis.transactions.grading import (
    receiver as receiver_of,
)
from auditor.analysis.transactions.grading import (
    subject as subject_of,
)
from auditor.analysis.transactions.languages import traits
from auditor.analysis.transactions.lazy_inits import effect_lines, lazily_initializes, lazy_call
from auditor.analysis.transactions.memo import Memos, once_per_key
from auditor.analysis.transactions.missing_methods import MissingMethods
from auditor.analysis.transactions.paths import Body
from auditor.analysis.transactions.reach import Reach
from auditor.analysis.transactions.read_commits import NOTHING, done_after_commit, flushes_through, quiet_after, reads_only_before
from auditor.analysis.transactions.registry_rows import RegistryRows
from auditor.analysis.transactions.repeated_saves import without_repeated_saves
from auditor.analysis.transactions.saved_rows import SavedRows
from auditor.analysis.transactions.scanning import call_text
from auditor.analysis.transactions.session_scopes import SessionScopes
from auditor.analysis.transactions.set_aside import SetAside
from auditor.analysis.transactions.store_clients import StoreClients
from auditor.analysis.transactions.stored_flags import Known, StoredFlags
from auditor.analysis.transactions.throwaway import memory_names, unbound_names
from auditor.index.model import CallSite, Definition
from auditor.languages.grammars import parser_for

_MAX_DEPTH = 60
_ASSIGNED_BEFORE = 3  # lines above a bookkeeping call read for a field set on its object
_BOOKKEEPING_CLASS = re.compile(r"(?i)(token_?bucket|rate_?limit|throttl)")  # counters of attempts
# A line between two commits that may leave something pending: a call, or an assignment.
_PENDING = re.compile(r"\w\s*\(|[^=!<>]=(?!=)")
# ``session.add(x)`` of one named object: it stages ``x`` when ``x`` is new (transient) or
# detached, and does nothing to an object the session already holds, persistent
# (sqlalchemy/orm/session.py ``Session.add`` -> ``_save_or_update_state``).
_SESSION_ADD = re.compile(r"^\s*(?:[\w.]*\.)?\w*[sS]ession\.add\(\s*([A-Za-z_]\w*)\s*\)\s*$")
_NO_BODY: Body = (None, b"", 0)


class Sequences:
    """Every function's heaviest path, computed once per set of parameters switched off."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts], reach: Reach, boundaries: Boundaries,
                 arguments: Arguments, savepoint_commits: bool = False) -> None:  # fmt: skip
        self.graph = graph
        self.savepoint_commits = savepoint_commits  # SQLAlchemy < 2: a commit after begin_nested() releases it
        self.facts = facts
        self.reach = reach
        self.boundaries = boundaries
        self.arguments = arguments
        self.scopes = SessionScopes(graph, facts, reach)  # scopes that only commit a read-only block
        self.saved_rows = SavedRows(graph)  # the key under which a save counts once on its path
        self.memos = Memos(graph, facts, arguments)  # which calls go into a helper memoized on an object
        self.flags = StoredFlags(graph, facts, reach, arguments, self.memos.tree)  # which false parameters a method stores on self
        self.registry = RegistryRows(graph, facts, reach, arguments)  # which effects are registry rows, set aside
        self.lazy = SetAside()  # the calls into lazy initializers set aside (:mod:`.lazy_inits`)
        self.ensured = EnsuredRows(graph, facts, self.registry, reach)  # helpers that only ensure a constant row
        self.clients = StoreClients(graph, facts)  # search-index and key-value clients
        self.receivers = ChainReceivers(reach)  # the class ``self`` has along a chain, and its dispatch
        self.snapshots = Snapshots(graph, facts)  # which "changed since built" tests a call leaves false
        self.missing = MissingMethods(graph, facts, reach.dispatch.receivers)  # calls that always raise
        self.arity = Arity(graph, facts, arguments, boundaries.wrapper_target)  # calls whose arguments their callee cannot take
        self._paths: dict[tuple[FunctionRef, frozenset[str], FunctionRef | None, Bound], tuple[Step, ...]] = {}
        self._active: set[tuple[FunctionRef, FunctionRef | None]] = set()
        self._bodies: dict[FunctionRef, Body] = {}
        # On which return values a function's effects happen (for calls that decide a return).
        self.outcomes = outcomes.Outcomes(graph, facts, lambda ref: self._body(ref, facts.get(ref.path)))

    def path_of(
        self, ref: FunctionRef, off: frozenset[str] = frozenset(), depth: int = 0, receiver: FunctionRef | None = None,
        bound: Bound = frozenset(),
    ) -> tuple[Step, ...]:
        """The heaviest feasible sequence of uncovered effects through ``ref`` (callees'
        effects counted at their call sites), with the parameters ``off`` false and, when
        ``receiver`` (a subclass of ``ref``'s class) is given, ``self`` of that class or
        below: its self-calls then run the overrides of ``receiver``'s MRO and its
        subclasses, not those of every subclass of ``ref``'s class. With ``bound``
        parameters, a method called on an object built from one runs that class's only."""
        receiver = self.receivers.of(ref, receiver)
        key = (ref, off, receiver, bound)
        cached = self._paths.get(key)
        if cached is not None:
            return cached
        if not self.reach.reaches_effect(ref):
            return ()  # no effect anywhere below: nothing to sequence
        active = (ref, receiver)
        if active in self._active or depth > _MAX_DEPTH:
            return ()  # recursion (whatever its arguments switch off): the cycle adds nothing new
        self._active.add(active)
        try:
            result = self._compute_path(ref, off, depth, receiver, bound)
        finally:
            self._active.discard(active)
        self._paths[key] = result
        return result

    def off_along(self, trail: tuple[Edge, ...]) -> frozenset[str]:
        """What is known false in the last function of ``trail``: the parameters its last
        call passes a false constant (or leaves at a false default: :meth:`Arguments.off`),
        and its object is a row that exists when that call saves one read from the
        database."""
        if not trail:
            return frozenset()
        edge = trail[-1]
        call = self.reach.call_for(edge)
        return self.arguments.off(edge.callee, call, caller=edge.caller) | self._row_known(edge, call)

    def _row_known(self, edge: Edge, call: CallSite | None) -> frozenset[str]:
        """What the call behind ``edge`` makes known of the object it saves (:meth:`.Snapshots.row_known`)."""
        created = self.reach.dispatch.kinds.get(edge) == CREATED and self.reach.dispatch.stands_for(edge) in _BUILDS_NEW
        return self.snapshots.row_known(edge, call, _saves_existing_row(self.facts, edge), created)

    def narrowing(self, edge: Edge) -> frozenset[str]:
        """What is known false in ``edge.callee`` from its caller's call that decides which
        of its hand-built saves run (:meth:`.SerializerEdges.narrowing`; mostly empty)."""
        serializers = self.reach.framework.serializer_edges
        if not serializers.instance_parameters(edge.callee):
            return frozenset()
        return serializers.narrowing(edge.callee, self.off_along((edge,)))

    def switched_off(self, edge: Edge, call: CallSite | None) -> bool:
        """A call whose constant false keyword arguments leave the callee no effect."""
        if not self.reach.reaches_effect(edge.callee):
            return False  # no effect to switch off
        off = self.arguments.off(edge.callee, call, caller=edge.caller)
        return bool(off) and not self.path_of(edge.callee, off) and bool(self.path_of(edge.callee))

    def _compute_path(self, ref: FunctionRef, off: frozenset[str], depth: int, receiver: FunctionRef | None, bound: Bound) -> tuple[Step, ...]:
        facts = self.facts.get(ref.path)
        throwaway = _throwaway(self.graph, self.arguments, ref, facts, off)
        callees, stood_for = bound_callees(self.reach, ref, bound)
        unbound_events = self._own_events(ref, facts, throwaway, stood_for, off)  # no override chosen
        by_line: dict[int, list[Edge]] = defaultdict(list)
        for edge in callees:
            by_line[edge.line].append(edge)
        off = self.flags.kept(ref, off)
        stored = self.flags.known(ref, off)
        calls: dict[int, Step] = {}
        stepped: dict[int, list[Edge]] = defaultdict(list)  # the edges behind ``calls``, by line
        overrides: dict[int, dict[FunctionRef, Step]] = defaultdict(dict)
        silent: dict[int, set[FunctionRef]] = defaultdict(set)  # overrides whose path has no effect
        for line, edges in sorted(by_line.items()):
            for edge in edges:
                if not self.receivers.serializer_feasible(edge, receiver):
                    continue  # another serializer's create/update than self's
                if not self.reach.framework.serializer_edges.instance_feasible(edge, off):
                    continue  # a save without an instance on this path runs create, never update
                step = self._edge_step(edge, off, depth, receiver, stored=stored)
                dispatched = edge.approximate and self.reach.dispatch.kinds.get(edge) == OVERRIDE
                if step is None:
                    silent[line].update([class_of(edge.callee)] if dispatched else [])
                    continue
                if dispatched:
                    overrides[line][edge.callee] = step
                    continue
                stepped[line].append(edge)
                if line not in calls or len(step.effects) > len(calls[line].effects):
                    calls[line] = step
        body: Body | None = None
        decided: dict[int, tuple[Step | None, int]] = {}
        if calls and (off or sum(map(len, unbound_events.values())) + len(calls) + len(overrides) > 1):
            body = self._body(ref, facts)
            decided = self._decided(body, stepped, overrides, off, depth, receiver, stored)
        heaviest: tuple[Step, ...] = ()
        for chosen in _override_variants(self.reach, ref, overrides, receiver, silent):
            # A self-call the chosen override runs counts through that override, never
            # also as its own effect (one ``self.save()``, one write).
            dispatched = frozenset((line, step.callee.qualname.rsplit(".", 1)[-1]) for line, step in chosen.items() if step.callee is not None)
            events = self._own_events(ref, facts, throwaway, dispatched | stood_for, off) if dispatched else unbound_events
            # Every decided call with the effects of the outcome that carries on, and once
            # per decided call its full effects on the path that returns at its ``if``.
            for returning in (None, *decided):
                steps = {**calls, **chosen}
                for line, (filtered, _) in decided.items():
                    if line != returning and filtered is None:
                        del steps[line]
                    elif line != returning and filtered is not None:
                        steps[line] = filtered
                cut = frozenset({decided[returning][1]}) if returning is not None else frozenset()
                found, body = self._walked(ref, facts, events, steps, off, stored, body, cut)
                if sum(map(weight, found)) > sum(map(weight, heaviest)):
                    heaviest = found
        return heaviest

    def _walked(
        self, ref: FunctionRef, facts: FileFacts | None, events: Mapping[int, list[Step]], steps: Mapping[int, Step],
        off: frozenset[str], stored: Known, body: Body | None, cut: frozenset[int],
    ) -> tuple[tuple[Step, ...], Body | None]:
        """The heaviest feasible path of ``ref``'s own ``events`` and call ``steps`` (the
        walks :meth:`.Outcomes.exits` asks for when ``off`` requires a kind of result; the
        ``if`` statements at ``cut`` left through an ending arm; the ``self`` attributes
        ``stored`` false switch off arms too; a memoized helper's repeated key counted
        once), and the body, parsed when the walk needed it."""
        variant: dict[int, list[Step]] = {line: list(found) for line, found in events.items()}
        for line, step in sorted(steps.items()):
            variant.setdefault(line, []).append(step)
        if not variant:
            return (), body
        if not off and not cut and sum(len(found) for found in variant.values()) == 1:
            found = tuple(variant[next(iter(variant))])
        else:
            if body is None:
                body = self._body(ref, facts)
            node, source, offset = body
            shifted = {line - offset: found for line, found in variant.items()}
            raising_lines = self.missing.raising_lines(ref) | self.arity.raising_lines(ref, self.reach.callees(ref), self.reach.call_for)
            raising = frozenset(line - offset for line in raising_lines)
            found = ()
            for exits in self.outcomes.exits(ref, body, outcomes.required(off)):
                exits = replace(exits, cut=cut or exits.cut, raising=raising) if cut or raising else exits
                text = source[node.start_byte : node.end_byte] if node is not None else b""
                for walked_off in _cases(off | frozenset(stored), text, parameter_names(facts, self.graph.definition(ref))):
                    walk = saved_once(once_per_key(tuple(paths.heaviest_path(node, source, shifted, weight, walked_off, caught, exits))))
                    found = walk if sum(map(weight, walk)) > sum(map(weight, found)) else found
        if body is not None and body[0] is not None:
            found = _marked_in_loops(found, body)
        if facts is not None:
            found = _without_idle_commits(found, facts, body, lambda step: handed_back(self.graph, self.arguments, facts, step), lambda ref, line: _quiet_before(self.graph, self.facts, ref, line),
                                          lambda ref, line: _quiet_after(self.graph, self.facts, ref, line))
            found = without_repeated_saves(found, facts, body, self.graph, self.facts, ref)
            found = self.ensured.without_repeats(found, facts, body)
        return found, body

    def _decided(
        self, body: Body, stepped: Mapping[int, list[Edge]], overrides: Mapping[int, object], off: frozenset[str], depth: int,
        receiver: FunctionRef | None, stored: Known,
    ) -> dict[int, tuple[Step | None, int]]:
        """Per line of a call whose result decides an immediate return or raise
        (:func:`.outcomes.decisions`): its step with only the effects of the outcome that
        carries on, and the deciding ``if``. A line with another call that has effects, or
        an override, is left as it is."""
        node, _, offset = body
        decided: dict[int, tuple[Step | None, int]] = {}
        for decision in outcomes.decisions(node, offset):
            edges = stepped.get(decision.line, [])
            if not edges or decision.line in overrides or decision.line in decided:
                continue
            if any(_called_name(self.reach, edge) != decision.name for edge in edges):
                continue
            filtered: Step | None = None
            for edge in edges:
                step = self._edge_step(edge, off, depth, receiver, decision.requirement, stored)
                if step is not None and (filtered is None or len(step.effects) > len(filtered.effects)):
                    filtered = step
            decided[decision.line] = (filtered, decision.statement)
        return decided

    def _own_events(
        self, ref: FunctionRef, facts: FileFacts | None, throwaway: frozenset[str], dispatched: frozenset[tuple[int, str]],
        off: frozenset[str] = frozenset(),
    ) -> dict[int, list[Step]]:
        """The function's own uncovered effects by line, less the calls a graph, receiver, framework or
        ``dispatched`` edge stands for (counted through it), writes on a ``throwaway`` in-memory
        connection and savepoint releases (a row saved again on one path counts once, by the walk)."""
        events: dict[int, list[Step]] = defaultdict(list)
        if facts is None:
            return events
        enclosing = enclosing_of(ref)
        definition = self.graph.definition(ref)
        exact_calls = {(edge.line, edge.callee.qualname.rsplit(".", 1)[-1]) for edge in self.graph.callees(ref) if not edge.approximate}
        exact_calls |= {(edge.line, name) for edge in self.reach.callees(ref) if (name := self.reach.dispatch.stands_for(edge)) is not None and self.reach.dispatch.binding(edge) is None}
        exact_calls |= _framework_stood_for(self.reach, ref, off)
        exact_calls |= dispatched
        for site in facts.sites.get(ref, ()):
            call = site.call
            if (call.line, call.name) in exact_calls or facts.covered(enclosing, call.line, call.callee, call.arguments):
                continue
            if throwaway and call.callee.split(".", 1)[0] in throwaway:
                continue  # written to an in-memory database: nothing persists
            if self.savepoint_commits and site.effect is Effect.COMMIT and _releases_savepoint(facts, definition, call):
                continue  # SQLAlchemy 1.x: the commit releases the savepoint; the outer transaction stays open
            if site.effect in DB_EFFECTS and "." in call.callee and self.clients.is_client(ref.path, definition, call.callee.split(".", 1)[0], call.line, _held_attribute(call.callee)):
                continue  # a search index's or key-value store's call: no database write
            if site.effect in DB_EFFECTS and self.registry.sets_aside_site(ref, site, call_text(call, facts.line_text(call.line))):
                continue  # the same constant row on every call: no business write
            # The same row saved again on one path counts once (``saved_once`` on the walk).
            saved_row = self.saved_rows.key(ref, facts, call) if call.name == "save" and site.effect in (Effect.WRITE, Effect.UPDATE) else None
            text = call_text(call, facts.line_text(call.line))
            reads = site.effect is Effect.COMMIT and definition is not None and reads_only_before(facts.lines, definition.body_start_line, call.line)
            events[call.line].append(Step(call.line, text, (site.effect,), subject=subject_of(call, site.orm), saved_row=saved_row, reads_before=reads))
        return events

    def _edge_step(
        self, edge: Edge, off: frozenset[str], depth: int, receiver: FunctionRef | None = None, returns: str | None = None,
        stored: Known | None = None,
    ) -> Step | None:
        """The event a call into ``edge.callee`` adds at its line (its heaviest path, with
        ``self`` of the class it has there when the caller's has ``receiver``, only the
        paths returning what ``returns`` requires, one of :data:`.outcomes.REQUIREMENTS`,
        and the ``self`` attributes the caller knows false: ``stored`` after their lines),
        or None when the call is blocked or the callee has no effect."""
        call = self.reach.call_for(edge)
        if self.arity.rejects(edge, call):
            return None  # the arguments bind to no signature: TypeError before the body runs
        inner_off = self.flags.inner_off(edge, call, off, stored)
        if self.boundaries.edge_blocked(edge, call):
            return _own_transaction_step(self, edge, call, inner_off, depth)
        if not self.reach.reaches_effect(edge.callee):
            return None
        if self.registry.sets_aside_call(edge, call):
            return None  # the same constant row on every call: no business write
        inner_off = inner_off | self._row_known(edge, call)
        if returns is not None:
            inner_off = inner_off | {returns}
        bound = bound_at(self.reach, edge, call)
        alternatives = [self.path_of(edge.callee, inner_off, depth + 1, inner, bound) for inner in self.receivers.alternatives(edge, receiver)]
        steps = max(alternatives, key=lambda found: sum(map(weight, found)))  # the heaviest serializer's, the first of equals
        callee_facts = self.facts.get(edge.callee.path)
        if lazy_call(edge, call, self.arguments) and lazily_initializes(
            steps, self._body(edge.callee, callee_facts), effect_lines(callee_facts, self.reach, edge.callee)
        ):
            self.lazy.note(edge.caller, edge.line, f"calls {edge.callee.qualname}")
            return None  # one row made when missing: every later call reads it
        effects = tuple(effect for step in steps for effect in step.effects)
        target = None  # the callee's self, seen from here, when it writes only that
        if call is not None and {step.subject for step in steps if any(e in WRITES for e in step.effects)} == {"self"}:
            target = receiver_of(call.callee)
        owner = edge.callee.qualname.rpartition(".")[0]
        if (bookkeeping(edge.callee) or (owner and _BOOKKEEPING_CLASS.search(owner))) and not _saves_assigned(self.facts, edge, target):
            effects = tuple(Effect.AUDIT if effect in WRITES else effect for effect in effects)
        if not effects or (all(effect is Effect.COMMIT for effect in effects) and self.scopes.idle(edge)):
            return None  # no effect, or a session scope's commit of a block that changed nothing
        return Step(
            edge.line, f"calls {edge.callee.qualname}", effects, edge.callee, edge.approximate, target,
            carries_on=caught_later(steps), inner=steps, memo=self.memos.key(edge, call, steps),
        )

    def _body(self, ref: FunctionRef, facts: FileFacts | None) -> Body:
        """:func:`_parsed_body`, once per function (its paths with different parameters off
        walk the same body)."""
        found = self._bodies.get(ref)
        if found is None:
            found = self._bodies[ref] = _parsed_body(self.graph, ref, facts)
        return found

def _own_transaction_step(sequences: Sequences, edge: Edge, call: CallSite | None, inner_off: frozenset[str], depth: int) -> Step | None:
    """A call from outside any transaction into a function that opens its own (a boundary
    decorator: ``@atomic``, ``@Transactional``): one committed unit at the call site when the
    callee writes (``inner_off`` false in it), like a Spring Data repository call. None when
    the call itself runs inside a boundary."""
    if sequences.boundaries.call_covered(edge, call):
        return None
    inner = sequences.path_of(edge.callee, inner_off, depth + 1)
    if not any(effect in DB_EFFECTS for step in inner for effect in step.effects):
        return None
    return Step(edge.line, f"calls {edge.callee.qualname} (its own transaction)", (Effect.REPOSITORY,), edge.callee)


def _framework_stood_for(reach: Reach, ref: FunctionRef, off: frozenset[str]) -> set[tuple[int, str]]:
    """The ``(line, name)`` of the calls in ``ref`` a framework edge that may run on a
    path whose known-false set is ``off`` stands for: a hand-built save whose instance is
    not ``None`` there keeps its own effect when its ``update`` runs DRF's
    ``super().update(...)``, even though its ``create`` edge would stand for the call."""
    framework = reach.framework
    feasible = (edge for edge in framework.edges(ref) if framework.serializer_edges.instance_feasible(edge, off))
    return {(edge.line, name) for edge in feasible if (name := framework.stands_for(edge)) is not None}


def _parsed_body(graph: CallGraph, ref: FunctionRef, facts: FileFacts | None) -> Body:
    """The function's body node, the source it was parsed from and the number of lines
    before that source. A Python function is parsed on its own (dedented): most files
    are far longer than the functions that need their branches."""
    if facts is None:
        return _NO_BODY
    if ref.qualname == MAIN_FUNCTION and facts.index.main_block is not None:
        if facts.tree is None:
            return _NO_BODY
        start, _ = facts.index.main_block
        node = next((node for node in facts.tree.named_children if paths.first_line(node) == start), None)
        return (node.child_by_field_name("consequence") if node is not None else None), facts.source, 0
    definition = graph.definition(ref)
    if definition is None:
        return _NO_BODY
    if traits(facts.index.language).parse_functions_alone:
        parser = parser_for(facts.index.language)
        if parser is None:
            return _NO_BODY
        return paths.dedented_body(parser, facts.lines, definition.start_line, definition.end_line)
    if facts.tree is None:
        return _NO_BODY
    return paths.function_body(facts.tree, definition.start_line, definition.end_line), facts.source, 0


def _quiet_before(graph: CallGraph, facts: Mapping[str, FileFacts], ref: FunctionRef, line: int) -> bool:
    """Whether nothing of ``ref``'s body above ``line`` may stage session work: only blank
    lines, comments, a docstring and ``try:`` (:func:`.read_commits.reads_only_before`)."""
    definition = graph.definition(ref)
    found = facts.get(ref.path)
    return definition is not None and found is not None and reads_only_before(found.lines, definition.body_start_line, line, NOTHING)


def _quiet_after(graph: CallGraph, facts: Mapping[str, FileFacts], ref: FunctionRef, line: int) -> bool:
    """Whether nothing of ``ref``'s body after the statement at ``line`` may stage session
    work or assign (:func:`.read_commits.quiet_after`)."""
    definition = graph.definition(ref)
    found = facts.get(ref.path)
    return definition is not None and found is not None and quiet_after(found.lines, line, definition.end_line)


def _override_variants(
    reach: Reach, ref: FunctionRef, overrides: Mapping[int, Mapping[FunctionRef, Step]], receiver: FunctionRef | None = None,
    silent: Mapping[int, set[FunctionRef]] | None = None,
) -> list[dict[int, Step]]:
    """The overrides one concrete class runs at each dispatching line, per class that
    defines one (nearest definition in its lineage), plus the base's own (none): the
    alternatives a base-class path has. Never a mix no single class runs. A class that
    overrides ``ref`` itself enters it only through its own override (``super()``,
    perhaps inside a transaction): its variant is that override's to count. With a
    known ``receiver`` class, its variant (its own override or its nearest base's) and
    those of its subclasses, never a sibling's. An override with no effect on its path
    (``silent``, by line) still hides its bases' from its class: a class runs the nearest
    definition in its MRO, even one that writes nothing (kolibri's ``AttemptLog.infer_dataset``
    reads a cached id where its base ``BaseLogModel``'s may create the default facility)."""
    if not overrides:
        return [{}]
    dispatch = reach.dispatch
    base = class_of(ref)
    method = ref.qualname.rsplit(".", 1)[-1]
    classes = sorted({class_of(target) for targets in overrides.values() for target in targets})
    if receiver is not None:  # self is receiver or below it: its own variant and its subclasses'
        classes = [receiver, *(cls for cls in classes if cls != receiver and receiver in dispatch.lineage(cls))]
    by_line = {line: {class_of(target): step for target, step in targets.items()} for line, targets in overrides.items()}
    variants: list[dict[int, Step]] = [{}]
    seen: set[tuple[tuple[int, FunctionRef], ...]] = {()}
    for cls in classes:
        override = dispatch.override_below(cls, base, method)
        if (receiver is None or cls != receiver) and override is not None and not reach.calls_super(override, method):
            continue
        lineage = dispatch.lineage(cls)
        chosen: dict[int, Step] = {}
        for line, by_class in by_line.items():
            quiet = silent.get(line, set()) if silent is not None else set()
            owner = next((item for item in lineage if item in by_class or item in quiet), None)
            if owner is not None and owner in by_class:
                chosen[line] = by_class[owner]
        key = tuple(sorted((line, step.callee) for line, step in chosen.items() if step.callee is not None))
        if key not in seen:
            seen.add(key)
            variants.append(chosen)
    return variants


def _called_name(reach: Reach, edge: Edge) -> str:
    """The last part of the name the call behind ``edge`` is written with."""
    call = reach.call_for(edge)
    return call.name if call is not None else edge.callee.qualname.rsplit(".", 1)[-1]


def _saves_assigned(facts: Mapping[str, FileFacts], edge: Edge, target: str | None) -> bool:
    """Whether the call behind ``edge`` saves an object (``target``, the callee's ``self``)
    whose fields the caller set on the lines just before it (``sound.pack = None;
    sound.mark_index_dirty()``): a bookkeeping-named method's save then writes the caller's
    change too, a real write."""
    caller_facts = facts.get(edge.caller.path)
    if target is None or caller_facts is None:
        return False
    assigned = re.compile(rf"^\s*{re.escape(target)}\.\w+\s*=(?!=)")
    lines = (caller_facts.line_text(line) for line in range(edge.line - 1, max(edge.line - 1 - _ASSIGNED_BEFORE, 0), -1))
    return any(assigned.match(text) for text in lines)


# Manager calls whose save is of an instance they just built (django/db/models/query.py
# ``QuerySet.create``: ``obj = self.model(**kwargs)``; ``get_or_create`` saves only through
# ``create``; django/contrib/auth/models.py ``UserManager._create_user``: ``user = self.model(...)``).
_BUILDS_NEW = frozenset({"create", "get_or_create", "create_user", "create_superuser"})


def _saves_existing_row(facts: Mapping[str, FileFacts], edge: Edge) -> bool:
    """Whether the call behind ``edge`` saves a row read from the database (its site is
    classified an update: ``x = M.objects.get(...); x.save()``)."""
    file_facts = facts.get(edge.caller.path)
    sites = file_facts.sites.get(edge.caller, ()) if file_facts is not None else ()
    return any(site.call.line == edge.line and site.call.name == "save" and site.effect is Effect.UPDATE for site in sites)


def _held_attribute(callee: str) -> str | None:
    """``master`` of a call ``sentinel.master.delete``: the attribute its receiver is read from."""
    parts = callee.split(".")
    return parts[1] if len(parts) >= 3 and parts[1].isidentifier() else None


def _marked_in_loops(steps: tuple[Step, ...], body: Body) -> tuple[Step, ...]:
    """``steps`` with those inside a loop of the body marked ``in_loop``."""
    node, _, offset = body
    loops = paths.loop_lines(node) if node is not None else []
    if not loops:
        return steps
    return tuple(
        replace(step, in_loop=True) if any(low <= step.line - offset <= high for low, high in loops) else step for step in steps
    )


def _throwaway(graph: CallGraph, arguments: Arguments, ref: FunctionRef, facts: FileFacts | None, off: frozenset[str]) -> frozenset[str]:
    """The names in ``ref`` that hold an in-memory database connection: its own locals
    bound to one, and the parameters ``off`` marks that its body does not bind again."""
    marked = memory_names(off)
    definition = graph.definition(ref)
    if marked and facts is not None and definition is not None:
        marked = unbound_names(marked, facts.lines[definition.body_start_line - 1 : definition.end_line])
    return marked | arguments.memory_locals(ref)


def _releases_savepoint(facts: FileFacts, definition: Definition | None, call: CallSite) -> bool:
    """Whether a commit site releases a savepoint ``begin_nested()`` opened above it
    (:func:`.sqlalchemy_series.releases_savepoint`, read in the function's body)."""
    return definition is not None and releases_savepoint(facts.lines, definition.body_start_line, call.line, strip_arguments(call.callee))


def _cases(off: frozenset[str], source: bytes, parameters: frozenset[str]) -> tuple[frozenset[str], ...]:
    """The ``off`` sets to walk a body with: :func:`_row_cases`, each split by
    :func:`.value_cases.value_cases` (``parameters``: the function's own)."""
    return tuple(case for row_case in _row_cases(off, source) for case in value_cases(row_case, source, parameters))


def _row_cases(off: frozenset[str], source: bytes) -> tuple[frozenset[str], ...]:
    """The ``off`` sets to walk a body with: as given, or, when it may test whether its object
    is new and the caller did not say, once for a new row and once for an existing one (a
    "new object only" arm and an "existing object only" arm never both run)."""
    if paths.EXISTING_ROW in off or paths.FRESH_ROW in off or not paths.row_guarded(source):
        return (off,)
    return (off | {paths.FRESH_ROW}, off | {paths.EXISTING_ROW})


def _without_idle_commits(
    steps: tuple[Step, ...], facts: FileFacts, body: Body | None = None, committed: Callable[[Step], str | None] = lambda step: None,
    quiet_before: Callable[[FunctionRef, int], bool] = lambda ref, line: False,
    quiet_after: Callable[[FunctionRef, int], bool] = lambda ref, line: False,
) -> tuple[Step, ...]:
    """``steps`` less each direct commit with nothing pending since the commit just before
    it on the path: no call, assignment or other statement between the two (a callee that
    commits, then ``session.commit()`` again) outside the if/elif/else arms the path does
    not take (read from ``body``, the function's parsed body), and no ``session.add`` but of
    the object the committing call handed back (``committed``: the session holds it). An
    attribute assignment in between (``team.captain_id = user.id``) is a pending write and
    keeps the commit. A commit just before that is a call counts only when its callee does
    nothing after its own last commit (``quiet_after``: :func:`.read_commits.done_after_commit`)."""
    node, _, offset = body if body is not None else _NO_BODY
    kept: list[Step] = []
    for step in steps:
        previous = kept[-1] if kept else None
        idle = (
            previous is not None
            and ((step.callee is None and step.effects == (Effect.COMMIT,)) or (step.callee is not None and flushes_through(step, quiet_before)))
            and previous.effects[-1] is Effect.COMMIT
            and (previous.callee is None or done_after_commit(previous, quiet_after))
            and previous.line < step.line
            and not _pending_between(previous.line, step.line, facts, node, offset, committed(previous))
        )
        if not idle:
            kept.append(step)
    return tuple(kept)


def _pending_between(first: int, last: int, facts: FileFacts, body: Node | None, offset: int, held: str | None = None) -> bool:
    """Whether a statement between lines ``first`` and ``last`` (both on one path) may
    leave something for the second commit: a call or an assignment in an arm the path takes
    (not an arm that returns or raises, which no path from ``first`` to ``last`` runs)."""
    pending = [
        line for line in range(first + 1, last)
        if _PENDING.search(facts.line_text(line)) and not _adds_held(facts.line_text(line), held)
    ]  # fmt: skip
    if not pending or body is None:
        return bool(pending)
    untaken = paths.untaken_arms(body, first - offset) + paths.untaken_arms(body, last - offset)
    untaken += paths.ending_arms(body, first - offset, last - offset)  # an arm that returns or raises is off the path
    return any(not any(start <= line - offset <= end for start, end in untaken) for line in pending)


def _adds_held(line: str, held: str | None) -> bool:
    """Whether ``line`` is a ``session.add(x)`` of ``held``, an object the session already
    holds persistent: it stages nothing."""
    added = _SESSION_ADD.match(line)
    return held is not None and added is not None and added.group(1) == held
