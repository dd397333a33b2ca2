"""The static tx-outside-transaction analysis: sequences of database effects that an entry
point reaches with no transaction boundary around them.

Inputs: the index (``FileIndex`` per path), the file texts, the rule (its ``sinks``,
``boundaries`` and ``sql_write`` patterns), optionally a prebuilt call graph, and
:class:`TxOptions`. Output: a :class:`StaticResult` of grounded findings
(``found_by=("static",)``), each listing the effects of its sequence where they happen (a
helper's writes at their own lines), and counters.

1. **Effects.** Every call that matches the rule's sinks (or runs write SQL), and every call
   a framework model knows, is classified by the first model that claims it (see
   :mod:`.base`; models in :data:`MODELS`): an autocommit write, a commit, a repository call
   that is its own transaction, an irreversible side effect, or nothing. Effects a
   boundary covers in their own function (a ``with atomic()`` block, a ``tx`` handle, a
   callback) are covered; side effects inside ``transaction.on_commit(...)`` run after the
   commit and are dropped.
2. **Reachability.** Breadth-first from the entry points (tests, fixtures and dev-data
   commands excluded unless ``include_tests``) over the call graph plus approximate
   dispatch edges (:mod:`.dispatch`) and the framework's calls into the project (DRF's
   ``create`` -> ``perform_create`` -> the serializer's ``create``, a project signal's
   ``send``: :mod:`.framework_calls`). A serializer method, ``perform_*`` hook or signal
   receiver that a real entry point reaches is no entry point of its own: it is judged on
   the paths from real entry points (:func:`.reach.real_entries`). Never through a boundary: a boundary-decorated
   callee (Spring: unless self-invoked), a call inside a boundary, an entry point Django
   wraps in ``ATOMIC_REQUESTS``; and never through a call whose constant arguments switch
   off every effect of the callee.
3. **Sequences.** Each function's events are its uncovered effects and its unblocked calls
   into functions with effects (the callee's heaviest path counted at the call site). The
   heaviest feasible path through the function (:mod:`.paths`) is its sequence; a
   base-class method's self-calls into subclass overrides are taken per concrete class
   (the heaviest class counts, never a sum of different classes' overrides); along a
   chain ``self`` has the class the chain came through, or one below it, so a sibling
   subclass's override is never on it (:mod:`.receiver_search`; a call on a name bound
   once to ``Cls()``, local or module-level, comes through ``Cls``: :mod:`.constructed_names`).
   A hand-built serializer's ``save()`` runs ``create`` where the chain knows its instance
   ``None`` (built without one, or with a parameter left at a ``None`` default), else
   ``update`` (:mod:`.hand_built_saves`). "New object only" arms
   (``if created:``, ``_state.adding``, ``pk is None``) do not run for a saved row that
   exists, nor with "existing object only" arms. A registry row (a get-or-create keyed by
   constants only, :mod:`.registry_rows`) is set aside: no effect of the path, named in the
   explanation. A helper memoized on an object (``if hasattr(user, "_perms"): return ...``,
   ``lru_cache``) writes on its first call only: later calls with the same object on the
   path count nothing (:mod:`.memo`); a false argument a method stores on ``self``
   (``self.save = save``) is known false in the methods it then calls on ``self``
   (:mod:`.stored_flags`). A
   function is reported where the sequence is formed: two or more events on its path; a
   helper with one write folds into the caller that sequences it.
4. **Severity** (:mod:`.grading`). ``critical``: two or more autocommit writes, or an autocommit write and a
   commit or repository call, or an irreversible side effect between writes, on one path.
   ``high``: several commits or repository transactions on one path (a call into a function
   that opens its own transaction is one), or a side effect between commits (partial state
   of lower impact: each piece is consistent on its own). ``medium``: a sequence whose
   partial state is harmless or re-runnable: one real write with only bookkeeping around it
   (event rows, search vectors, rate-limit counters, derived-data recalculations), only
   deletes (a cleanup a retry finishes), only idempotent writes (upserts, many-to-many
   links, queryset updates to constant values), upserts or links and then one other write
   (a re-run finds what they left), every write to one object's row and its own links
   (``x.save()`` then ``x.tags.add(...)``: the object is valid and editable), Django
   updates and deletes of rows that exist, to the values given (``x.save()`` of an object
   known to be a row read here, ``update(...)`` with no ``F()`` or arithmetic; no new row,
   no link, no ``x.n += 1``: a re-run with the same input writes the same), or a mail,
   HTTP call or task after the last write (the right order; a file stored after the row
   that names it still counts). The retry-based ones (deletes, idempotent writes, upserts
   then a write, one object) do not apply when a write after the first sits in a ``try``
   whose handler catches a database error and carries on, here or in a callee: the code
   goes on after that failure, nobody retries. The reason ends the finding's explanation.
   ``low``: a single autocommit write. Findings below ``min_severity`` are counted, not
   returned.

Suppression comments are not interpreted here; that is the findings stage's job. This
module runs the steps in order; each step lives in its own module (the package's
docstring says which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields, replace
from pathlib import Path

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.analysis.entrypoints import EntryPoint
from auditor.analysis.transactions import django
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.assessment import Assessment, assess
from auditor.analysis.transactions.boundaries import Boundaries
from auditor.analysis.transactions.dispatch import Dispatch
from auditor.analysis.transactions.django_settings import request_settings
from auditor.analysis.transactions.facts import FactsRecord, FileFacts, PatternSet, RulePatterns, enclosing_of
from auditor.analysis.transactions.facts_cache import FactsCache, Stamp, facts_context, text_digest
from auditor.analysis.transactions.framework_facts import Kind, load_facts
from auditor.analysis.transactions.findings import build_finding, folded
from auditor.analysis.transactions.grading import DB_EFFECTS, Step, grade_function, weight
from auditor.analysis.transactions.languages import family
from auditor.analysis.transactions.framework_calls import FrameworkCalls
from auditor.analysis.transactions.reach import Reach, Trail, production_entries, real_entries
from auditor.analysis.transactions.result_memo import ResultMemo, result_key
from auditor.analysis.transactions.chain_receivers import Receiver
from auditor.analysis.transactions.receiver_search import State, exposed_entries, first_reach, search_by_receiver
from auditor.analysis.transactions.sequences import Sequences
from auditor.analysis.transactions.staged_deletes import drop_staged
from auditor.analysis.transactions.sqlalchemy_series import nested_commit_releases
from auditor.errors import UsageError
from auditor.findings.model import Finding
from auditor.rules.severity import Severity
from auditor.index.indexer import collection_paused
from auditor.index.model import FileIndex
from auditor.rules.loader import Rule
from auditor.rules.patterns import LinearPattern


class InvalidSeverityError(UsageError):
    """A ``min_severity`` that is not a known severity."""


@dataclass(frozen=True)
class TxOptions:
    """Choices for one run of the analysis.

    ``min_severity``: the lowest severity returned (``"low"`` shows single autocommit
    writes); ``include_tests``: treat test code, fixtures, dev-data management commands
    (``populatedb``, ``seed_*``...) and dev-data scripts (``populate.py``...) as entry points too;
    ``models``: a project's transaction-model files, read after the built-in ones
    (:mod:`.framework_facts`, docs/tx-models.md).
    """

    min_severity: str = Severity.LOW
    include_tests: bool = False
    models: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if Severity.parse(self.min_severity) is None:
            raise InvalidSeverityError(f"unknown severity {self.min_severity!r} (known: {', '.join(Severity.names())})")


@dataclass(frozen=True)
class StaticResult:
    """Findings of the static pass and what it looked at.

    ``sinks`` counts every database effect found in the rule's languages; ``covered_sinks``
    those a boundary covers (inside a boundary in their own function, or in a function
    every entry-point path reaches only through a boundary). ``unresolved_calls`` counts
    calls in entry-reachable functions the graph could not resolve (``self.x()``/bare
    names with no repository target): a missed chain may run through one of them.
    ``hidden_findings`` counts findings below ``min_severity``.
    """

    findings: tuple[Finding, ...]
    entry_points: int
    sinks: int
    covered_sinks: int
    unresolved_calls: int = 0
    hidden_findings: int = 0
    assumptions: tuple[str, ...] = ()
    """What the grades assume of the project beyond its code, as sentences (a SQLAlchemy
    before 2.0 read from its declared dependencies: :mod:`.sqlalchemy_series`)."""


@dataclass(frozen=True)
class Outcome:
    """What one run decided, function by function: ``reached`` (the uncovered entry point
    and trail of each function the search reached), ``reachable`` (every function an entry
    point reaches over any edge), ``graded`` (the assessment of each reached function with
    a sequence: severity by likelihood × impact, and its evidence), ``folded`` (graded functions whose callers carry the finding) and
    ``hidden`` (graded below ``min_severity``), then the findings and counters."""

    reached: Mapping[FunctionRef, tuple[EntryPoint, Trail]]
    reachable: frozenset[FunctionRef]
    graded: Mapping[FunctionRef, Assessment]
    folded: frozenset[FunctionRef]
    hidden: frozenset[FunctionRef]
    findings: tuple[Finding, ...]
    sinks: int
    covered_sinks: int
    unresolved_calls: int


class Analysis:
    """One run of the analysis over a repository: the steps, wired together."""

    def __init__(
        self,
        indexes: Mapping[str, FileIndex],
        texts: Mapping[str, str],
        rule: Rule,
        graph: CallGraph,
        options: TxOptions,
        facts_cache: FactsCache | None = None,
        digests: Mapping[str, bytes] | None = None,
    ) -> None:
        self.indexes = indexes
        self.texts = texts
        self.rule = rule
        self.graph = graph
        self.options = options
        sql_write = rule.sql_write_pattern()
        languages = {family(language) for language in rule.languages}
        framework = load_facts(options.models)
        patterns = RulePatterns(
            sinks=PatternSet(rule.sinks + framework.calls(Kind.WRITE)),
            boundaries=PatternSet(rule.boundaries + framework.calls(Kind.OPENS)),
            non_atomic=PatternSet(framework.calls(Kind.OPTS_OUT)),
            after_commit=PatternSet(framework.calls(Kind.AFTER_COMMIT)),
            lookups=PatternSet(framework.calls(Kind.LOOKUP)),
            in_request=PatternSet(framework.calls(Kind.IN_REQUEST)),
        )
        related = django.related_managers(texts)
        analysed = [path for path in sorted(indexes) if not languages or family(indexes[path].language) in languages]
        if facts_cache is None:
            self.facts = {
                path: FileFacts.computed(path, indexes[path], texts.get(path, ""), patterns, sql_write, related)
                for path in analysed
            }
        else:
            context = facts_context(rule, framework, related)
            self.facts = self._cached_facts(analysed, patterns, sql_write, related, context, facts_cache, digests or {})
        drop_staged(self.facts)  # session-staged deletes, unless a project method of the name commits
        if not django.uses_django(indexes):
            for file_facts in self.facts.values():
                file_facts.set_aside(lambda site: site.reason == django.TREE_OPERATION)  # no treebeard/mptt without Django
        receiver_signals = django.receiver_signals(indexes, graph)
        self.framework_calls = FrameworkCalls(graph, self.facts, framework, receiver_signals)
        self.boundaries = Boundaries(
            indexes, graph, self.facts, patterns, request_settings(indexes, texts, framework.host_setting("ATOMIC_REQUESTS")),
            receiver_signals, framework.signals(Kind.INSIDE), self.framework_calls.run_inside, self.framework_calls.in_request,
        )  # fmt: skip
        self.reach = Reach(indexes, graph, Dispatch(indexes, graph, texts), self.framework_calls, self.facts)
        self.arguments = Arguments(graph, self.facts, self.framework_calls.serializer_edges.instance_parameters)
        self.sequences = Sequences(
            graph, self.facts, self.reach, self.boundaries, self.arguments, savepoint_commits=bool(nested_commit_releases(texts)),
        )

    def _cached_facts(
        self, analysed: list[str], patterns: RulePatterns, sql_write: LinearPattern | None, related: frozenset[str],
        context: str, cache: FactsCache, digests: Mapping[str, bytes],
    ) -> dict[str, FileFacts]:  # fmt: skip
        """The facts of each analysed file: restored from ``cache`` where its stamp (language,
        content hash, text digest) is the stored one under this ``context``, else computed
        (and the pack rewritten with them)."""
        stored = cache.load(context)
        kept: dict[str, tuple[Stamp, FactsRecord]] = {}
        facts: dict[str, FileFacts] = {}
        for path in analysed:
            index, text = self.indexes[path], self.texts.get(path, "")
            stamp = (index.language, index.content_hash, digests.get(path) or text_digest(text))
            entry = stored.get(path)
            found = None
            if entry is not None and entry[0] == stamp:
                try:
                    found = FileFacts.restored(path, index, text, related, entry[1])
                    kept[path] = entry
                except (IndexError, ValueError, TypeError):
                    found = None  # not a record of this index: computed anew
            if found is None:
                found = FileFacts.computed(path, index, text, patterns, sql_write, related)
                kept[path] = (stamp, found.record())
            facts[path] = found
        if kept.keys() != stored.keys() or any(kept[path] is not stored[path] for path in kept):
            cache.store(context, kept)
        return facts

    def entries(self) -> tuple[EntryPoint, ...]:
        """The production entry points (all of them with ``include_tests``), with the view
        actions DRF runs, less the framework-called functions a real entry point reaches
        (:func:`.reach.real_entries`)."""
        found = production_entries(
            self.indexes, self.graph, self.rule, self.texts, self.options.include_tests, self.framework_calls.entries
        )  # fmt: skip
        return real_entries(found, self.reach)

    def passable(self, edge: Edge) -> bool:
        """Whether the search goes on through ``edge``: no boundary on it, its constant
        arguments leave the callee some effect, and more than a registry row."""
        call = self.reach.call_for(edge)
        if self.boundaries.edge_blocked(edge, call) or self.sequences.registry.call(edge, call):
            return False
        return not self.sequences.switched_off(edge, call)

    def blocked(self, edge: Edge) -> bool:
        """Whether a boundary stands on ``edge``."""
        return self.boundaries.edge_blocked(edge, self.reach.call_for(edge))

    def run(self, entries: tuple[EntryPoint, ...]) -> Outcome:
        """Search from ``entries``, grade every function reached and build the findings."""
        starts = [entry for entry in entries if not self.boundaries.entry_covered(entry)]
        by_receiver = search_by_receiver(self.reach, self.sequences, starts, self.passable)
        reached = first_reach(by_receiver)
        reachable = self.reach.reachable_ignoring_boundaries(entries)
        sinks, covered_sinks = self._count_sinks(reached, reachable)
        exposed = exposed_entries(self.reach, self.sequences, starts, self.passable, self.reach.dispatch.kinds)
        chosen = {ref: self._heaviest_receiver(ref, by_receiver[ref], reached) for ref in sorted(reached)}
        reached = {ref: (entry, trail) for ref, (entry, trail, _) in chosen.items()}
        receivers = {ref: receiver for ref, (_, _, receiver) in chosen.items()}
        offs = {ref: self.sequences.off_along(trail) for ref, (_, trail) in reached.items()}
        known: dict[FunctionRef, tuple[Step, ...]] = {}

        def path_of(ref: FunctionRef) -> tuple[Step, ...]:
            found = known.get(ref)
            if found is None:
                found = known[ref] = self.sequences.path_of(ref, offs.get(ref, frozenset()), receiver=receivers.get(ref))
            return found

        graded: dict[FunctionRef, Assessment] = {}
        for ref in sorted(reached):
            found = grade_function(ref, path_of(ref))
            if found is not None:
                graded[ref] = assess(ref, path_of(ref), found, self._lines_of, entry_kind=reached[ref][0].kind)

        def carries_nothing(edge: Edge) -> bool:
            # A call whose receiver class runs none of ``ref``'s effects needs no finding.
            receiver = self.sequences.receivers.through(edge, receivers.get(edge.caller))
            off = self.sequences.off_along((edge,))
            if self.blocked(edge) or self.sequences.registry.call(edge, self.reach.call_for(edge)):
                return True  # a boundary, or a registry row only: nothing of ``ref`` to sequence
            return bool(receiver is not None or off) and not self.sequences.path_of(edge.callee, off, receiver=receiver)
        entry_refs = frozenset(entry.ref for entry in entries)
        threshold = Severity.rank_of(self.options.min_severity)
        folded_refs: set[FunctionRef] = set()
        hidden: set[FunctionRef] = set()
        findings: list[Finding] = []
        for ref, assessment in graded.items():
            callers = [edge for edge in self.reach.callers(ref) if edge.caller in reached]
            if folded(ref, callers, graded, ref in entry_refs, carries_nothing, path_of):
                folded_refs.add(ref)
                continue
            if Severity.rank_of(assessment.severity) > threshold:
                hidden.add(ref)
                continue
            entry, trail = reached[ref]
            steps = path_of(ref)
            findings.append(build_finding(
                self.rule, ref, entry, trail, steps, assessment, self._lines_of, self.reach.dispatch.kinds,
                self.boundaries.request_note(entry), self.sequences.registry.set_aside_along(ref, steps),
                self.sequences.lazy.along(ref, steps), exposed.get(ref),
            ))  # fmt: skip
        findings.sort(key=Finding.sort_key)
        return Outcome(
            reached=reached,
            reachable=frozenset(reachable),
            graded=graded,
            folded=frozenset(folded_refs),
            hidden=frozenset(hidden),
            findings=tuple(findings),
            sinks=sinks,
            covered_sinks=covered_sinks,
            unresolved_calls=self.reach.unresolved(reached),
        )

    def _lines_of(self, path: str) -> Sequence[str]:
        """The lines of an analysed file (none for another)."""
        facts = self.facts.get(path)
        return facts.lines if facts is not None else ()

    def _heaviest_receiver(
        self, ref: FunctionRef, states: Mapping[State, tuple[EntryPoint, Trail]], reached: Mapping[FunctionRef, tuple[EntryPoint, Trail]]
    ) -> tuple[EntryPoint, Trail, Receiver]:
        """The entry and trail to ``ref``, with the receiver class ``self`` has there, whose
        receiver (and what its last call says of the row it saves) gives it the heaviest
        path: the shortest trail unless another enters ``ref`` with ``self`` of a class
        whose overrides write more (a base method's ``self.save()`` runs the override of
        the class the chain came through). Several states on one trail (a mixin's hook
        shared by views whose serializer classes differ) are each weighed with their own
        class, not with every class at once."""
        shortest = reached[ref]
        along = self.sequences.receivers.along
        narrowed = bool(self.sequences.off_along(shortest[1]))
        if len(states) == 1 and not narrowed:
            return (*shortest, along(shortest[1]))
        sequences = self.sequences

        def weigh(trail: Trail, receiver: Receiver) -> int:
            return sum(map(weight, sequences.path_of(ref, sequences.off_along(trail), receiver=receiver)))

        trails = {reached[1] for reached in states.values()}
        shared = {trail for trail in trails if sum(1 for reached in states.values() if reached[1] == trail) > 1}
        candidates = [
            (entry, trail, state[0] if trail in shared else along(trail)) for state, (entry, trail) in states.items()
        ] + [(entry, trail, along(trail)) for entry, trail in (self._through_callers(ref, reached) if narrowed else ())]
        candidates.sort(key=lambda candidate: len(candidate[1]))
        first = next((candidate for candidate in candidates if candidate[1] == shortest[1]), (*shortest, along(shortest[1])))
        best, heaviest = first, weigh(first[1], first[2])
        for candidate in candidates:
            if (found := weigh(candidate[1], candidate[2])) > heaviest:
                best, heaviest = candidate, found
        return best

    def _through_callers(self, ref: FunctionRef, reached: Mapping[FunctionRef, tuple[EntryPoint, Trail]]) -> list[tuple[EntryPoint, Trail]]:
        """Trails to ``ref`` through each of its other reached callers (one call longer): the
        shortest may save a row that exists where another call creates one, or pass a false
        constant where another passes a value."""
        found = []
        for edge in self.reach.callers(ref):
            if edge.caller in reached and edge.caller != ref and self.passable(edge):
                entry, trail = reached[edge.caller]
                found.append((entry, (*trail, edge)))
        return found

    def _count_sinks(self, reached: Mapping[FunctionRef, object], reachable: set[FunctionRef]) -> tuple[int, int]:
        """Every database effect site, and those a boundary covers (in their own function,
        or in a function the entry points reach only through a boundary)."""
        total = covered = 0
        for path in sorted(self.facts):
            facts = self.facts[path]
            for ref in sorted(facts.sites):
                enclosing = enclosing_of(ref)
                sites = [site for site in facts.sites[ref] if site.effect in DB_EFFECTS]
                uncovered = [site for site in sites if not facts.covered(enclosing, site.call.line, site.call.callee, site.call.arguments)]
                total += len(sites)
                covered += len(sites) - len(uncovered)
                if ref not in reached and ref in reachable:
                    covered += len(uncovered)
        return total, covered


def analyze_tx_outside_transaction(
    indexes: Mapping[str, FileIndex],
    texts: Mapping[str, str],
    rule: Rule,
    graph: CallGraph | None = None,
    options: TxOptions | None = None,
    cache_dir: Path | None = None,
) -> StaticResult:
    """Find sequences of database effects that an entry point reaches outside any
    transaction (see the module docstring for what counts and how severe it is).

    One finding per function that sequences the effects, carrying the shortest uncovered
    chain from an entry point; findings are sorted by ``Finding.sort_key``. The result is
    deterministic for the same inputs.

    ``graph``: the call graph of ``indexes`` (built here when None). With ``cache_dir``, the
    result is kept there under a key of every input (:mod:`.result_memo`: an unchanged
    repository analysed again is a lookup), and so are each file's facts
    (:mod:`.facts_cache`: after an edit only the changed files' are computed again); the
    result is the one an uncached run returns.
    """
    options = options if options is not None else TxOptions()
    return replace(_memoized(indexes, texts, rule, graph, options, cache_dir), assumptions=assumptions(texts))


def assumptions(texts: Mapping[str, str]) -> tuple[str, ...]:
    """The sentences :attr:`StaticResult.assumptions` holds for a repository's ``texts``."""
    declared = nested_commit_releases(texts)
    if not declared:
        return ()
    return (f"SQLAlchemy before 2.0 ({declared}): a commit() after begin_nested() in its block is read as a savepoint release, not a commit",)


def _memoized(
    indexes: Mapping[str, FileIndex], texts: Mapping[str, str], rule: Rule, graph: CallGraph | None, options: TxOptions,
    cache_dir: Path | None,
) -> StaticResult:  # fmt: skip
    """The result, from the memo under ``cache_dir`` when it holds it (assumptions aside)."""
    if cache_dir is None:
        return _analyzed(indexes, texts, rule, graph, options, None, None)
    digests = {path: text_digest(text) for path, text in texts.items()}
    memo = ResultMemo(cache_dir)
    key = result_key(indexes, digests, rule, astuple(options), options.models)
    counted = [item.name for item in fields(StaticResult) if item.name not in ("findings", "assumptions")]
    found = memo.get(key, len(counted)) if key is not None else None
    if found is not None:
        return StaticResult(found[0], **dict(zip(counted, found[1], strict=True)))
    result = _analyzed(indexes, texts, rule, graph, options, FactsCache(cache_dir), digests)
    if key is not None:
        memo.put(key, result.findings, tuple(getattr(result, name) for name in counted))
    return result


def _analyzed(
    indexes: Mapping[str, FileIndex], texts: Mapping[str, str], rule: Rule, graph: CallGraph | None, options: TxOptions,
    facts_cache: FactsCache | None, digests: Mapping[str, bytes] | None,
) -> StaticResult:  # fmt: skip
    """One run of the analysis (facts from ``facts_cache`` where it has them)."""
    graph = graph if graph is not None else CallGraph.build(indexes)
    # The analysis keeps nearly everything it allocates until it returns: young collections
    # in between would only re-scan its live tables.
    with collection_paused():
        analysis = Analysis(indexes, texts, rule, graph, options, facts_cache, digests)
        entries = analysis.entries()
        outcome = analysis.run(entries)
    return StaticResult(
        findings=outcome.findings,
        entry_points=len(entries),
        sinks=outcome.sinks,
        covered_sinks=outcome.covered_sinks,
        unresolved_calls=outcome.unresolved_calls,
        hidden_findings=len(outcome.hidden),
    )
