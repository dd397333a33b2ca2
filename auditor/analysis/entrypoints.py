"""Entry points: the functions outside code calls into (HTTP handlers, CLI commands,
background tasks, message consumers, ``__main__`` blocks).

Inputs: the index (``FileIndex`` per path), the :class:`~auditor.callgraph.graph.CallGraph`, an
optional rule (its ``entry_points`` decorator patterns add to the built-in ones) and,
optionally, every walked file's text (to read a function's first parameter name, the
project's ``Signal()`` names, task decorator aliases and the OpenAPI documents).
Output: a sorted tuple of :class:`EntryPoint`, one per function.

Recognised, for Python: Django function views (a views module's public functions whose
first parameter is ``request``), class-based views and DRF views/viewsets (HTTP-method,
``dispatch`` and viewset-action methods, ``@action`` and the older ``@list_route``/
``@detail_route`` methods), DRF serializers' ``create``/``update`` (run by
``serializer.save()``), Django signal receivers (``@receiver(...)``, ``signal.connect(handler)``
for Django's and the project's ``Signal()`` signals), graphene mutations (``mutate``/``perform_mutation`` of
``*Mutation`` subclasses), URLconf targets of ``path()``/``re_path()``/
``url()``, Flask/FastAPI route decorators, OpenAPI ``operationId`` handlers
(connexion, :mod:`.openapi_operations`), Tornado request and websocket handlers, Celery/RQ/Huey/Dramatiq tasks, Django management
commands (``Command.handle``), click/typer commands, and ``__main__`` blocks (as the
pseudo-function ``<main>``). Elsewhere: Express routes (``app.get('/x', handler)``), Go
``http.HandleFunc``-style registrations, ``func main``, goroutines, parameterless
callbacks (``cron.Add(spec, func() {...})``) and HTTP handler literals, Spring ``@...Mapping`` methods,
``@Scheduled`` jobs and ``@...Listener`` consumers.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import MAIN_FUNCTION, strip_arguments
from auditor.analysis.openapi_operations import operation_entries
from auditor.index.model import Definition, FileIndex
from auditor.rules.loader import Rule
from auditor.walk.classify import is_test_path

KINDS = ("http", "cli", "task", "consumer", "main")

_HTTP_VERBS = ("get", "post", "put", "patch", "delete", "head", "options")
_ROUTE_DECORATORS = tuple(f"*.{verb}" for verb in _HTTP_VERBS) + ("*.route", "*.api_route", "*.websocket")
_TASK_DECORATORS = (
    "shared_task", "task", "*.task", "job", "*.job", "periodic_task", "*.periodic_task", "db_task",
    "*.db_task", "db_periodic_task", "*.db_periodic_task", "actor", "dramatiq.actor", "*.scheduled_job",
)  # fmt: skip
_TASK_NAMES = frozenset(pattern.rsplit(".", 1)[-1] for pattern in _TASK_DECORATORS)
_CLI_DECORATORS = ("click.command", "click.group", "*.command", "*.group", "*.callback")
_CONSUMER_DECORATORS = ("*.agent", "*.subscriber", "*.consumer", "*.on_message")
_MOCK_DECORATORS = ("mock.*", "*.mock.*", "patch.*", "mocker.*")
# ``list_route``/``detail_route``: DRF's spelling of ``@action`` before 3.8.
_DRF_DECORATORS = ("api_view", "*.api_view", "action", "*.action", "list_route", "*.list_route", "detail_route", "*.detail_route")
_SIGNAL_DECORATORS = ("receiver", "*.receiver")
_SPRING_HTTP = ("GetMapping", "PostMapping", "PutMapping", "PatchMapping", "DeleteMapping", "RequestMapping")
_SPRING_TASK = ("Scheduled",)
_SPRING_CONSUMER = ("*Listener", "*.*Listener")

_VIEW_BASE = re.compile(r"(^|\.)(\w*View|\w*ViewSet|\w*APIView|ViewSetMixin)$")
_VIEW_METHODS = (
    *_HTTP_VERBS, "create", "list", "retrieve", "update", "partial_update", "destroy",
    "perform_create", "perform_update", "perform_destroy", "form_valid", "dispatch",
)  # fmt: skip
# Tornado's handlers (tornado/web.py ``RequestHandler._execute`` runs ``prepare``, then the
# method named by the request's verb, then ``on_finish``; tornado/websocket.py
# ``WebSocketHandler`` runs ``open`` per connection, ``on_message`` per message, ``on_close``
# at the end); cyclone's and webapp2's ``RequestHandler`` dispatch by verb alike. Only a base
# the naming file imports from one of them counts, never a repository class of that name.
_HANDLER_LIBRARIES = ("tornado", "cyclone", "webapp2")
_REQUEST_HANDLER = re.compile(r"(^|\.)RequestHandler$")
_WEBSOCKET_HANDLER = re.compile(r"(^|\.)WebSocketHandler$")
_HANDLER_METHODS = (*_HTTP_VERBS, "prepare", "on_finish")
_WEBSOCKET_METHODS = ("open", "on_message", "on_close")
_MUTATION_BASE = re.compile(r"(^|\.)\w*Mutation$")
_MUTATION_METHODS = ("mutate", "perform_mutation", "mutate_and_get_payload")
_WIZARD_BASE = re.compile(r"(^|\.)\w*WizardView$")
_ADMIN_BASE = re.compile(r"(^|\.)(\w*ModelAdmin|\w*InlineAdmin|StackedInline|TabularInline)$")
_ADMIN_METHODS = ("save_model", "delete_model", "save_formset", "save_related", "delete_queryset")
# DRF's ``serializer.save()`` (called by the generic views' ``perform_create/update``) runs these.
_SERIALIZER_BASE = re.compile(r"(^|\.)\w*Serializer$")
_SERIALIZER_METHODS = ("create", "update")
_SERIALIZER_SAVE = "drf serializer save()"
_SIGNAL_RECEIVER = "django signal receiver"
_FRAMEWORK_INVOKED = frozenset({_SERIALIZER_SAVE, _SIGNAL_RECEIVER})
# DRF's generic views run these hooks from their create/update/destroy actions
# (rest_framework/mixins.py; the rows of models/drf.yaml).
DRF_HOOK_ACTIONS = {"perform_create": "create", "perform_update": "update", "perform_destroy": "destroy"}
_DRF_HOOKS = frozenset(DRF_HOOK_ACTIONS)
# Django's built-in signals; a project's own are the module-level ``name = Signal(...)``.
DJANGO_SIGNALS = frozenset(
    """
    pre_init post_init pre_save post_save pre_delete post_delete m2m_changed pre_migrate post_migrate
    request_started request_finished got_request_exception setting_changed user_logged_in
    user_logged_out user_login_failed connection_created class_prepared
    """.split()
)
_SIGNAL_DEFINITION = re.compile(r"(?m)^([A-Za-z_]\w*)\s*=\s*(?:[\w.]*\.)?Signal\(")
_URLCONF_CALLS = frozenset({"path", "re_path", "url"})
_GO_REGISTRATIONS = ("*.HandleFunc", "HandleFunc", "*.Handle", "*.HandlerFunc")
_GO_ROUTER_VERBS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "Get", "Post", "Put", "Patch", "Delete", "Any"})
_EXPRESS_VERBS = frozenset({"get", "post", "put", "patch", "delete", "all"})
_REFERENCE = re.compile(r"^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$")
_STRING = re.compile(r"^[rRbBuUfF]*(\"|'|`)(.*?)\1", re.DOTALL)


@dataclass(frozen=True, order=True)
class EntryPoint:
    """A function reachable from outside the program, with what kind and how it was seen."""

    ref: FunctionRef
    kind: str
    detail: str


def framework_invoked(entry: EntryPoint) -> bool:
    """Whether the framework calls the entry point from a path that starts at another one
    (a view's ``serializer.save()``, a generic view's ``create`` -> ``perform_create``, a
    ``signal.send(...)``): where an analysis sees such a path, the function is reached
    through it and is no entry point of its own."""
    hook = entry.kind == "http" and entry.ref.qualname.rsplit(".", 1)[-1] in _DRF_HOOKS
    return hook or entry.detail in _FRAMEWORK_INVOKED


_SPLIT_STOPS = re.compile(r"""["'`()\[\]{},]""")
_QUOTE_STOPS = {quote: re.compile(rf"[\\{quote}]") for quote in "\"'`"}


def split_arguments(text: str) -> list[str]:
    """Split an argument-list text at top-level commas (brackets and strings respected),
    jumping between the characters that can change the state instead of visiting each."""
    parts: list[str] = []
    depth = 0
    start = index = 0
    while True:
        stop = _SPLIT_STOPS.search(text, index)
        if stop is None:
            break
        index = stop.start()
        char = text[index]
        if char in "\"'`":
            index = _string_end(text, index + 1, char)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
        index += 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def _string_end(text: str, index: int, quote: str) -> int:
    """The index just past the ``quote`` closing a string that starts at ``index`` (an
    escaped character skipped), or the end of ``text`` when it never closes."""
    while True:
        stop = _QUOTE_STOPS[quote].search(text, index)
        if stop is None:
            return len(text)
        if text[stop.start()] == "\\":
            index = stop.start() + 2
            continue
        return stop.start() + 1


def _string_value(argument: str) -> str | None:
    match = _STRING.match(argument.strip())
    return match.group(2) if match else None


def _first_string(arguments: str) -> str:
    for argument in split_arguments(arguments):
        value = _string_value(argument)
        if value is not None:
            return value
    return ""


def _decorator_arguments(decorator: str) -> str:
    start = decorator.find("(")
    return decorator[start + 1 : decorator.rfind(")")] if start >= 0 else ""


def compile_patterns(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching any of the fnmatch ``patterns`` (case-sensitive), or None if empty."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(pattern)})" for pattern in patterns))


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    return compile_patterns(patterns)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    compiled = _compiled(patterns)
    return compiled is not None and compiled.match(name) is not None


def _spring_annotation(decorator: str, rule_patterns: tuple[str, ...]) -> tuple[str, str] | None:
    """The (kind, detail) a Java annotation makes of the method it annotates."""
    short = strip_arguments(decorator).split(".")[-1]
    if short in _SPRING_HTTP:
        route = _first_string(_decorator_arguments(decorator))
        return "http", f"spring @{short}" + (f" '{route}'" if route else "")
    if short in _SPRING_TASK:
        return "task", f"spring @{short}"
    if _matches(short, _SPRING_CONSUMER):
        return "consumer", f"spring @{short}"
    return None


def _python_decorator(decorator: str, rule_patterns: tuple[str, ...]) -> tuple[str, str] | None:
    """The (kind, detail) a Python decorator makes of the function it decorates."""
    name = strip_arguments(decorator)
    arguments = _decorator_arguments(decorator)
    if _matches(name, _MOCK_DECORATORS):
        return None
    if _matches(name, _DRF_DECORATORS):
        return "http", f"drf @{name}"
    if _matches(name, _SIGNAL_DECORATORS):
        return "consumer", _SIGNAL_RECEIVER
    if _matches(name, _ROUTE_DECORATORS) and "." in name:
        verb = name.rsplit(".", 1)[1]
        route = _first_string(arguments)
        if verb == "route":
            return "http", f"flask route '{route}'"
        return "http", f"route {verb.upper()} '{route}'"
    if _matches(name, _TASK_DECORATORS):
        return "task", "celery task" if "task" in name else f"background job @{name}"
    if _matches(name, _CLI_DECORATORS):
        return "cli", f"cli command @{name}"
    if _matches(name, _CONSUMER_DECORATORS):
        return "consumer", f"message consumer @{name}"
    if _matches(name, rule_patterns):
        if "task" in name or "job" in name:
            return "task", f"task @{name}"
        if "command" in name:
            return "cli", f"cli command @{name}"
        return "http", f"entry point @{name}"
    return None


def _is_views_module(path: str) -> bool:
    base = posixpath.basename(path)
    return base in ("views.py", "api.py") or base.endswith("_views.py") or "/views/" in f"/{path}"


def _first_parameter(definition: Definition, text: str | None) -> str | None:
    """The first parameter name of a function, read from its signature lines."""
    if text is None:
        return None
    lines = text.split("\n")[definition.start_line - 1 : max(definition.body_start_line, definition.start_line + 1)]
    signature = "\n".join(lines)
    match = re.search(rf"def\s+{re.escape(definition.name)}\s*\(\s*\*?\s*(\w*)", signature)
    return match.group(1) if match else None


def _flask_view(
    graph: CallGraph, ref: FunctionRef, definition: Definition, index: FileIndex, memo: dict[FunctionRef, frozenset[str]]
) -> bool:
    """Whether a class-based view is Flask's, not Django's: it derives from ``MethodView``
    (flask/views.py; Django has none), or names a base its module imports from ``flask``.
    Django's request settings (``ATOMIC_REQUESTS``) say nothing about such a view."""
    if any(name.rsplit(".", 1)[-1] == "MethodView" for name in _base_names(graph, ref, definition, memo)):
        return True
    from_flask = {item.alias or item.name for item in index.imports if item.module.split(".")[0] == "flask" and item.name}
    return any(strip_arguments(base) in from_flask or base.startswith("flask.") for base in definition.bases)


def _derives_from(
    graph: CallGraph,
    ref: FunctionRef,
    definition: Definition,
    pattern: re.Pattern[str],
    memo: dict[FunctionRef, frozenset[str]] | None = None,
) -> bool:
    """True when a class names a base matching ``pattern``, directly or through repository
    bases (``memo``, when given, keeps each class's base names for one caller)."""
    return any(pattern.search(name) for name in _base_names(graph, ref, definition, memo if memo is not None else {}))


def _base_names(
    graph: CallGraph,
    ref: FunctionRef,
    definition: Definition,
    memo: dict[FunctionRef, frozenset[str]],
    seen: frozenset[FunctionRef] = frozenset(),
) -> frozenset[str]:
    """The base-class names a class writes, and those of its repository bases, transitively."""
    found = memo.get(ref)
    if found is not None:
        return found
    names = {strip_arguments(base) for base in definition.bases if "=" not in base}
    for base_ref in graph.base_classes(ref):
        base = graph.definition(base_ref)
        if base is not None and base_ref not in seen and base_ref != ref:
            names |= _base_names(graph, base_ref, base, memo, seen | {ref})
    result = frozenset(names)
    if not seen:
        memo[ref] = result
    return result


def _library_base(
    search: _Search, ref: FunctionRef, definition: Definition, pattern: re.Pattern[str], seen: frozenset[FunctionRef] = frozenset()
) -> str | None:
    """The handler library (:data:`_HANDLER_LIBRARIES`) whose class matching ``pattern`` a
    class, or one of its repository bases, names as a base, imported from that library in
    the file that names it (a ``RequestHandler`` of aiohttp or of the project's own is
    none); None when there is none. Kept per class for one search."""
    key = (ref, pattern.pattern)
    if key in search.libraries:
        return search.libraries[key]
    graph, found = search.graph, None
    index = search.indexes.get(ref.path)
    for base in definition.bases:
        name = strip_arguments(base)
        if "=" not in base and pattern.search(name) and index is not None:
            found = _imported_library(index, name)
            if found is not None:
                break
    for base_ref in graph.base_classes(ref) if found is None else ():
        base = graph.definition(base_ref)
        if base is not None and base_ref != ref and base_ref not in seen:
            found = _library_base(search, base_ref, base, pattern, seen | {ref})
            if found is not None:
                break
    search.libraries[key] = found  # a cycle (no valid Python) is cut by ``seen``
    return found


def _imported_library(index: FileIndex, name: str) -> str | None:
    """The handler library a base name written in ``index``'s file comes from (``web.
    RequestHandler`` after ``from tornado import web``; ``RequestHandler`` after ``from
    tornado.web import RequestHandler``; ``webapp2.RequestHandler`` after ``import webapp2``)."""
    head = name.split(".", 1)[0]
    for item in index.imports:
        bound = item.alias or item.name or item.module.split(".", 1)[0]
        if bound == head:
            root = item.module.split(".", 1)[0]
            return root if root in _HANDLER_LIBRARIES else None
    return None


def _view_methods(graph: CallGraph, class_ref: FunctionRef, names: tuple[str, ...] = _VIEW_METHODS) -> list[FunctionRef]:
    """The methods ``names`` of a class, looked up through its repository bases."""
    methods: list[FunctionRef] = []
    for name in names:
        member = graph.class_member(class_ref, name)
        if member is not None and member not in methods:
            methods.append(member)
    return methods


class _Collector:
    """Accumulates entry points, keeping the first (most specific) one per function; a
    label ``borrowed`` from another class (a subclass's URL row reaching an inherited
    method) gives way to any label of the function's own seen later."""

    def __init__(self) -> None:
        self.found: dict[FunctionRef, EntryPoint] = {}
        self._borrowed: set[FunctionRef] = set()

    def add(self, ref: FunctionRef, kind: str, detail: str, *, borrowed: bool = False) -> None:
        """Record ``ref`` as an entry point unless it has a label already (one of its own,
        or a borrowed one when this label is borrowed too)."""
        if ref in self.found and (borrowed or ref not in self._borrowed):
            return
        self.found[ref] = EntryPoint(ref, kind, detail)
        if borrowed:
            self._borrowed.add(ref)
        else:
            self._borrowed.discard(ref)


@dataclass(frozen=True)
class _Search:
    """What every file's detection shares in one ``find_entry_points`` call: the graph, the
    collector, the signal names, and the base-class names of each class (filled as read)."""

    graph: CallGraph
    collector: _Collector
    signals: frozenset[str]
    derived: dict[FunctionRef, frozenset[str]]
    indexes: Mapping[str, FileIndex]
    libraries: dict[tuple[FunctionRef, str], str | None]
    """Per (class, base pattern), the handler library it derives from (filled as read)."""


_Classify = Callable[[str, tuple[str, ...]], tuple[str, str] | None]
_Registrations = Callable[[str, FileIndex, _Search], None]
_Conventions = Callable[[str, FileIndex, str | None, _Search], None]


@dataclass(frozen=True)
class _LanguageEntryPoints:
    """How one language's entry points are seen: what its decorators (annotations) say,
    which calls register a handler, which module conventions mark one, and whether
    module-level aliases and wrappers of task decorators count (Python)."""

    decorator: _Classify | None = None
    registrations: _Registrations | None = None
    conventions: _Conventions | None = None
    task_aliases: bool = False


def find_entry_points(
    indexes: Mapping[str, FileIndex],
    graph: CallGraph,
    rule: Rule | None = None,
    texts: Mapping[str, str] | None = None,
    *,
    include_tests: bool = False,
) -> tuple[EntryPoint, ...]:
    """Every entry point of the indexed files, one per function, sorted by reference.

    Decorator-based detection comes first (task decorators include module-level aliases
    such as ``my_task = shared_task`` and repository functions that apply a task
    decorator); then URLconf/router registrations; then module-convention detection
    (Django views modules, management commands, form-wizard ``done``, admin hooks,
    ``main``). Test files (see :func:`is_test_path`) define no entry points unless
    ``include_tests``. A function keeps the first label it gets, except that a URL row's
    label reaching an inherited view method through a subclass gives way to a label of
    the method's own (its class's row, or its class being a view).
    """
    rule_patterns = rule.entry_points if rule is not None else ()
    collector = _Collector()
    production = [path for path in sorted(indexes) if include_tests or not is_test_path(path)]
    task_aliases = _task_decorator_aliases(indexes, graph, texts, production)
    for path in production:
        index = indexes[path]
        detection = _detection_for(index.language)
        for definition in index.definitions:
            ref = FunctionRef(path, definition.qualname)
            if definition.kind in ("function", "method"):
                for decorator in definition.decorators:
                    classified = detection.decorator(decorator, rule_patterns) if detection.decorator else None
                    if classified is None and detection.task_aliases and _alias_task(path, decorator, task_aliases, graph):
                        classified = ("task", f"task @{strip_arguments(decorator)}")
                    if classified is not None:
                        collector.add(ref, *classified)
                        break
    # Base-class names are shared by every file.
    search = _Search(graph, collector, _signal_names(texts, production), {}, indexes, {})
    for path in production:
        registrations = _detection_for(indexes[path].language).registrations
        if registrations is not None:
            registrations(path, indexes[path], search)
    for path in production:
        index = indexes[path]
        conventions = _detection_for(index.language).conventions
        if conventions is not None:
            conventions(path, index, texts.get(path) if texts is not None else None, search)
        if index.main_block is not None:
            collector.add(FunctionRef(path, MAIN_FUNCTION), "main", "__main__ block")
    # Last, so that a function a framework's own convention labels (a Django view, whose
    # label ATOMIC_REQUESTS reads) keeps that label; an OpenAPI document fills the rest.
    if texts is not None:
        specs = [path for path in sorted(texts) if include_tests or not is_test_path(path)]
        for ref, detail in operation_entries(texts, specs, graph):
            if include_tests or not is_test_path(ref.path):
                collector.add(ref, "http", detail)
    return tuple(sorted(collector.found.values()))


# ``name = decorator`` or ``name = decorator(...)``, the call's arguments on the line or on the
# lines below it (``retrying = shared_task(\n    autoretry_for=(Exception,),\n)``).
_ALIAS_ASSIGNMENT = re.compile(r"(?m)^([A-Za-z_]\w*)\s*=\s*([A-Za-z_][\w.]*)\s*(?:\(.*)?$")


def _task_decorator_aliases(
    indexes: Mapping[str, FileIndex], graph: CallGraph, texts: Mapping[str, str] | None, paths: list[str]
) -> tuple[frozenset[tuple[str, str]], frozenset[FunctionRef]]:
    """Module-level names bound to a task decorator (``my_task = shared_task``, by
    (path, name)), and repository functions whose body applies one (a project's own
    ``@task`` wrapper around ``shared_task``)."""
    aliases: set[tuple[str, str]] = set()
    wrappers: set[FunctionRef] = set()
    for path in paths:
        index = indexes[path]
        if not _detection_for(index.language).task_aliases:
            continue
        text = texts.get(path) if texts is not None else None
        if text is not None and ("task" in text or "actor" in text):
            for name, value in _ALIAS_ASSIGNMENT.findall(text):
                if _matches(value, _TASK_DECORATORS):
                    aliases.add((path, name))
        for call in index.calls:
            if call.name not in _TASK_NAMES or call.enclosing is None:
                continue
            if _matches(strip_arguments(call.callee), _TASK_DECORATORS):
                definition = graph.definition(FunctionRef(path, call.enclosing))
                if definition is not None and definition.parent is None:
                    wrappers.add(FunctionRef(path, call.enclosing))
    return frozenset(aliases), frozenset(wrappers)


def _alias_task(
    path: str, decorator: str, aliases: tuple[frozenset[tuple[str, str]], frozenset[FunctionRef]], graph: CallGraph
) -> bool:
    names, wrappers = aliases
    name = strip_arguments(decorator)
    if (path, name) in names:
        return True
    if not names and not wrappers:
        return False
    target = graph.resolve(path, name)
    if target is None:
        return False
    return target in wrappers or (target.path, target.qualname) in names


def _signal_names(texts: Mapping[str, str] | None, paths: list[str]) -> frozenset[str]:
    """Django's built-in signal names and the project's module-level ``name = Signal(...)``."""
    names = set(DJANGO_SIGNALS)
    for path in paths if texts is not None else ():
        text = texts.get(path, "") if texts is not None else ""
        if path.endswith(".py") and "Signal(" in text:
            names.update(_SIGNAL_DEFINITION.findall(text))
    return frozenset(names)


def _python_registrations(path: str, index: FileIndex, search: _Search) -> None:
    """URLconf targets (``path("route", views.handler)``, ``Class.as_view()``) and signal
    receivers connected with ``post_save.connect(handler, ...)``."""
    graph, collector, signals = search.graph, search.collector, search.signals
    for call in index.calls:
        if call.name == "connect" and call.callee.count(".") >= 1 and call.callee.split(".")[-2] in signals:
            _signal_connection(path, call.arguments, graph, collector)
            continue
        if call.enclosing is not None or call.callee.split(".")[-1] not in _URLCONF_CALLS:
            continue
        arguments = split_arguments(call.arguments)
        route = _string_value(arguments[0]) if arguments else None
        target = next((arg.split("=", 1)[1].strip() for arg in arguments if arg.startswith("view=")), None)
        if target is None and len(arguments) >= 2 and "=" not in arguments[1].split("(")[0]:
            target = arguments[1]
        if target is None or target.startswith("include("):
            continue
        detail = f"django urlconf '{route}'" if route is not None else "django urlconf"
        if ".as_view(" in target or target.endswith(".as_view"):
            class_ref = graph.resolve(path, target.split(".as_view", 1)[0])
            if class_ref is not None:
                _add_view_class(graph, collector, class_ref, detail)
            continue
        if not _REFERENCE.match(target):
            continue
        ref = graph.resolve(path, target)
        definition = graph.definition(ref) if ref is not None else None
        if ref is not None and definition is not None:
            if definition.kind == "class":
                _add_view_class(graph, collector, ref, detail)
            elif definition.parent is None or _names_owner(target, definition.parent):
                collector.add(ref, "http", detail)


def _names_owner(target: str, owner: str) -> bool:
    """Whether a URL row's ``target`` text names the class ``owner`` of the method it
    resolved to (``Views.landing``). A row names a module's function or class; a method
    reached without its class (``views.landing`` matched by name to ``Thing.landing``)
    is some other function."""
    parts = target.split(".")
    return len(parts) >= 2 and parts[-2] == owner.rsplit(".", 1)[-1]


def _add_view_class(graph: CallGraph, collector: _Collector, class_ref: FunctionRef, detail: str) -> None:
    """The view methods of the class a URL row names, labelled with the row's ``detail``.
    A method the class inherits serves its defining class's own rows and every other
    subclass's too: its label names the class this row reached it through, and gives way
    to one of its own (``SystemNotificationsView.get`` is not ``PersonalNotificationsView``'s
    route because that subclass inherits it)."""
    for method in _view_methods(graph, class_ref):
        if method.path == class_ref.path and method.qualname.rsplit(".", 1)[0] == class_ref.qualname:
            collector.add(method, "http", detail)
        else:
            collector.add(method, "http", f"{detail} via {class_ref.qualname}", borrowed=True)


def _signal_connection(path: str, arguments: str, graph: CallGraph, collector: _Collector) -> None:
    """The handler of ``signal.connect(handler, ...)`` (first argument or ``receiver=``)."""
    parts = split_arguments(arguments)
    handler = next((part.split("=", 1)[1].strip() for part in parts if part.startswith("receiver=")), None)
    if handler is None and parts and "=" not in parts[0]:
        handler = parts[0]
    if handler is None or not _REFERENCE.match(handler):
        return
    ref = graph.resolve(path, handler)
    definition = graph.definition(ref) if ref is not None else None
    if ref is not None and definition is not None and definition.kind in ("function", "method"):
        collector.add(ref, "consumer", _SIGNAL_RECEIVER)


def _python_conventions(path: str, index: FileIndex, text: str | None, search: _Search) -> None:
    """Django views modules, class-based views and management commands."""
    graph, collector, memo = search.graph, search.collector, search.derived
    in_commands = "management/commands/" in f"/{path}"
    derives = partial(_derives_from, memo=memo)
    views_module = _is_views_module(path)
    for definition in index.definitions:
        ref = FunctionRef(path, definition.qualname)
        if definition.kind == "class":
            if in_commands and definition.qualname == "Command":
                handle = graph.class_member(ref, "handle")
                if handle is not None:
                    collector.add(handle, "cli", "django management command")
            elif derives(graph, ref, definition, _WIZARD_BASE):
                for method in _view_methods(graph, ref, (*_VIEW_METHODS, "done")):
                    collector.add(method, "http", "django form wizard")
            elif derives(graph, ref, definition, _VIEW_BASE):
                label = "flask class-based view" if _flask_view(graph, ref, definition, index, memo) else "django class-based view"
                for method in _view_methods(graph, ref):
                    collector.add(method, "http", label)
            elif library := _library_base(search, ref, definition, _WEBSOCKET_HANDLER):
                for method in _view_methods(graph, ref, _WEBSOCKET_METHODS):
                    collector.add(method, "consumer", f"{library} websocket handler")
            elif library := _library_base(search, ref, definition, _REQUEST_HANDLER):
                for method in _view_methods(graph, ref, _HANDLER_METHODS):
                    collector.add(method, "http", f"{library} request handler")
            elif derives(graph, ref, definition, _MUTATION_BASE):
                for method in _view_methods(graph, ref, _MUTATION_METHODS):
                    collector.add(method, "http", "graphql mutation")
            elif derives(graph, ref, definition, _ADMIN_BASE):
                for method in _view_methods(graph, ref, _ADMIN_METHODS):
                    collector.add(method, "http", "django admin hook")
            elif derives(graph, ref, definition, _SERIALIZER_BASE):
                for method in _view_methods(graph, ref, _SERIALIZER_METHODS):
                    collector.add(method, "http", _SERIALIZER_SAVE)
            continue
        if not views_module or definition.parent is not None or definition.name.startswith("_"):
            continue
        first = _first_parameter(definition, text)
        if first == "request" or (first is None and text is None and not graph.callers(ref)):
            collector.add(ref, "http", "django view")


def _go_conventions(path: str, index: FileIndex, text: str | None, search: _Search) -> None:
    """``func main``, and the goroutines, parameterless callbacks and HTTP handler literals."""
    main = next((d for d in index.definitions if d.qualname == "main" and d.kind == "function"), None)
    if main is not None and posixpath.basename(path) != "main_test.go":
        search.collector.add(FunctionRef(path, "main"), "main", "go func main")
    # A goroutine, parameterless callback or HTTP handler literal (``outer.func1``,
    # see the index) runs on its own, later or concurrently: what it writes is its
    # own sequence.
    lines = text.split("\n") if text is not None else []
    for definition in index.definitions:
        if definition.kind == "function" and definition.parent is not None:
            signature = lines[definition.start_line - 1] if definition.start_line <= len(lines) else ""
            handler = any(name in signature for name in ("http.ResponseWriter", "echo.Context", "gin.Context", "fiber.Ctx"))
            kind, detail = ("http", "go handler literal") if handler else ("task", "go goroutine or callback")
            search.collector.add(FunctionRef(path, definition.qualname), kind, detail)


def _go_registrations(path: str, index: FileIndex, search: _Search) -> None:
    """``http.HandleFunc("/x", handler)``, ``mux.Handle``, and gin/echo/chi verb routes."""
    graph, collector = search.graph, search.collector
    for call in index.calls:
        is_verb = call.name in _GO_ROUTER_VERBS and "." in call.callee
        if not (_matches(call.callee, _GO_REGISTRATIONS) or is_verb):
            continue
        arguments = split_arguments(call.arguments)
        if len(arguments) < 2:
            continue
        route = _string_value(arguments[0])
        if route is None:
            continue
        handler = arguments[-1]
        if handler.startswith("http.HandlerFunc(") and handler.endswith(")"):
            handler = handler[len("http.HandlerFunc(") : -1]
        if not _REFERENCE.match(handler):
            continue
        ref = graph.resolve(path, handler)
        definition = graph.definition(ref) if ref is not None else None
        if ref is not None and definition is not None and definition.kind != "class":
            verb = f"{call.name} " if is_verb else ""
            collector.add(ref, "http", f"go {verb}handler '{route}'")


def _express_registrations(path: str, index: FileIndex, search: _Search) -> None:
    """``app.get('/x', auth, handler)`` and ``router.post(...)`` with named handlers."""
    graph, collector = search.graph, search.collector
    for call in index.calls:
        if call.name not in _EXPRESS_VERBS or "." not in call.callee:
            continue
        arguments = split_arguments(call.arguments)
        if len(arguments) < 2:
            continue
        route = _string_value(arguments[0])
        if route is None or not route.startswith("/"):
            continue
        handler = arguments[-1]
        if not _REFERENCE.match(handler):
            continue
        ref = graph.resolve(path, handler)
        definition = graph.definition(ref) if ref is not None else None
        if ref is not None and definition is not None and definition.kind != "class":
            collector.add(ref, "http", f"express {call.name.upper()} '{route}'")


_EXPRESS = _LanguageEntryPoints(registrations=_express_registrations)

_LANGUAGES: dict[str, _LanguageEntryPoints] = {
    "python": _LanguageEntryPoints(_python_decorator, _python_registrations, _python_conventions, task_aliases=True),
    "java": _LanguageEntryPoints(decorator=_spring_annotation),
    "go": _LanguageEntryPoints(registrations=_go_registrations, conventions=_go_conventions),
    "javascript": _EXPRESS,
    "typescript": _EXPRESS,
    "tsx": _EXPRESS,
}
"""Entry-point detection by language (the index's names); a language not listed has none
beyond ``__main__`` blocks."""

_NONE = _LanguageEntryPoints()


def _detection_for(language: str) -> _LanguageEntryPoints:
    """How ``language``'s entry points are seen (nothing, for one not listed)."""
    return _LANGUAGES.get(language, _NONE)
