"""Django: the database runs in **autocommit** mode, so every ORM write (``save``,
``delete``, ``Model.objects.create/update/delete/bulk_*``, related-manager and
many-to-many ``add/set/remove/clear/create``, ``update()``/``delete()`` on a variable
holding a queryset, django-treebeard/django-mptt ``add_root/add_child/move…``) commits
on its own. ``transaction.atomic`` (decorator or ``with``, directly or through a
repository function that wraps it) is the boundary; ``ATOMIC_REQUESTS`` of
``DATABASES['default']`` in the settings the project runs with (:mod:`.django_settings`)
wraps every view, except those decorated ``non_atomic_requests``; ``transaction.on_commit``
callbacks run after the commit.
``Model.delete()``/``QuerySet.delete()`` are one write: the collector runs the cascades and
sends ``pre_delete``/``post_delete`` inside its own ``atomic``, so those receivers (and
``m2m_changed``'s, sent inside the related manager's ``atomic``) are covered by the call that
sent the signal (:func:`receiver_signals` says which signals each receiver listens to);
``post_save`` receivers run outside any transaction. Those facts, and the manager method
names below, are rows of ``models/django.yaml``, each citing Django's source.

Inside a ``Manager`` or ``QuerySet`` subclass, ``self.create/get_or_create/update_or_create/
bulk_create/bulk_update/update/delete(...)`` write too (the manager is the model's table).

Not writes: ``save``/``delete`` with positional arguments (PIL ``Image.save(buffer, …)``,
a storage's ``save(name, content)``), ``update``/``create`` on a related-manager name with
positional arguments (a dict's ``extensions.update({...})``: managers take keywords),
``save(commit=False)``/``save(save=False)``, the request's session store
(``request.session.save/flush/delete/clear``), and an API client's request object run by
``.execute()`` (``yt.playlistItems().delete(id=...).execute()``: no ORM call returns one).

A write that only sets rows that already exist to the values it is given is a *rewrite*
(``Classification.rewrite``; the analysis marks it ``Effect.UPDATE``): a queryset or
related-manager ``update(...)`` with no ``F()`` or arithmetic, and ``x.save()`` of a named
object known to be a row read from the database (``self`` in a method, ``x`` last assigned
a lookup such as ``M.objects.get(...)`` or ``get_object_or_404(...)``, or a loop over a
queryset), unless it is ``super()``, a form or a serializer (each may insert), was copied
(``x.pk = None``) or had a field set above the save to a value computed from what was read
(``x.n += 1``, ``x.n = x.n - 1``, any arithmetic). A parameter, a built object
(``Model(...)``, ``cls(...)``, ``form.save(commit=False)``) or anything else whose origin the
function does not show may be new: its save is a plain write. Creates (``objects.create``,
``bulk_create``, a related manager's ``create``), ``bulk_update`` and tree operations are
not rewrites.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.base import DOTTED, FOR_LOOP, CallContext, Classification, Effect
from auditor.analysis.transactions.framework_facts import Kind, builtin_facts
from auditor.analysis.transactions.grading import relative_value
from auditor.analysis.transactions.scanning import closing_bracket
from auditor.index.model import CallSite, FileIndex

# Writes through a related or many-to-many manager, and through a manager's or queryset's
# own ``self``: rows of models/django.yaml.
_MANAGER_METHODS = builtin_facts().methods(Kind.WRITE, "related-manager")
_TREE_METHODS = frozenset({"add_root", "add_child", "add_sibling", "move_to", "insert_node", "delete_node"})
TREE_OPERATION = "tree operation (autocommit)"
"""The reason of a django-treebeard/django-mptt tree operation's write: by name alone, so it
counts only in a project that uses Django (:func:`uses_django`)."""
_SESSION_METHODS = frozenset({"save", "flush", "delete", "clear", "cycle_key", "set_expiry", "create"})
_NOT_SAVED = re.compile(r"^\s*(commit|save)\s*=\s*False\s*$")
_QUERYSET_SOURCE = re.compile(r"\.objects\b|\.(filter|exclude|all|select_for_update|select_related|prefetch_related|annotate|order_by)\(")
_RELATED_FIELD = re.compile(r"(?m)^\s*(\w+)\s*=\s*(?:models\.)?(?:ManyToManyField|TreeManyToManyField|SortedManyToManyField)\(")
_RELATED_NAME = re.compile(r"""related_name\s*=\s*['"](\w+)['"]""")
# Another client's query: a search index's (elasticsearch-dsl ``Search``, ``.search()``), or a
# filter given a string positionally (``filter("term", project=...)``).
_OTHER_CLIENT = re.compile(r"""\.search\(|\bSearch\(|\.(?:filter|exclude|query)\(\s*[rbuf]?['"]""")
_EXECUTE_NAMES = frozenset({"execute", "executemany", "executescript", "exec_driver_sql", "query", "raw", "run", "exec"})
# ``.execute()`` run on a call's result (whitespace and line breaks between them).
_EXECUTED = re.compile(r"\s*\.execute\(")
_API_LINES = 12
MANAGER_SELF_WRITES = builtin_facts().methods(Kind.WRITE, "manager")
_KEYWORD_ONLY = frozenset({"update", "create", "get_or_create", "update_or_create"})
_KEYWORD = re.compile(r"^\s*(\*\*|\w+\s*=(?!=))")
_MANAGER_CLASS = re.compile(r"(?:^|\.)\w*(?:Manager|QuerySet)$")
# A value that is a new, unsaved instance: a class called, a model class's call, a copy, an
# unsaved form result.
_CONSTRUCTED = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*|cls|model|model_class)\s*\(|^(?:copy\.)?(?:deep)?copy\s*\(|\.save\(\s*commit\s*=\s*False")
# Receivers whose save may insert: a ModelForm with no instance, a DRF serializer's create.
_MAY_CREATE = re.compile(r"(?i)(?:form|formset|serializer)$")
# ``target = value``, ``target: T = value`` or ``target += value`` on one line.
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]+)?([-+*/]?)=(?!=)\s*(.*)")
# A value that is a row read from the database: a manager or queryset lookup, a get-or-404
# helper, a view's ``get_object()``.
_FETCHED = re.compile(r"\.(?:get|first|last|latest|earliest|first_or_404|get_or_404|get_object)\s*\(|\bget_object_or_404\s*\(")
# The rows of a manager or queryset a ``for`` loop may iterate.
_ROWS = re.compile(r"\.objects\b|\.(?:all|filter|exclude|order_by|select_related|prefetch_related|select_for_update|iterator)\s*\(")


def related_managers(texts: Mapping[str, str]) -> frozenset[str]:
    """Many-to-many field names and ``related_name``\\ s declared anywhere in the Python
    files: attributes whose ``add/set/remove/clear/create`` write rows."""
    names: set[str] = set()
    for path in sorted(texts):
        if not path.endswith(".py"):
            continue
        text = texts[path]
        if "related_name" not in text and "ManyToManyField" not in text:
            continue
        names.update(_RELATED_FIELD.findall(text))
        names.update(_RELATED_NAME.findall(text))
    names.discard("+")
    return frozenset(names)


def receiver_signals(indexes: Mapping[str, FileIndex], graph: CallGraph) -> dict[FunctionRef, frozenset[str]]:
    """The signals each Python function is connected to as a receiver, by last name:
    ``@receiver(post_delete, ...)`` / ``@receiver([pre_delete, post_delete], ...)`` (its
    first argument, or ``signal=``) and ``post_delete.connect(handler, ...)`` (its first
    argument, or ``receiver=``). A function connected to several signals lists them all."""
    found: dict[FunctionRef, set[str]] = {}
    for path in sorted(indexes):
        index = indexes[path]
        if index.language != "python":
            continue
        for definition in index.definitions:
            if definition.kind not in ("function", "method"):
                continue
            for decorator in definition.decorators:
                name = strip_arguments(decorator)
                if name == "receiver" or name.endswith(".receiver"):
                    signals = _signal_argument(decorator[decorator.find("(") + 1 : decorator.rfind(")")] if "(" in decorator else "", "signal")
                    found.setdefault(FunctionRef(path, definition.qualname), set()).update(signals)
        for call in index.calls:
            if call.name != "connect" or "." not in call.callee:
                continue
            handler = _handler_argument(call.arguments)
            ref = graph.resolve(path, handler) if handler is not None else None
            if ref is not None:
                found.setdefault(ref, set()).add(strip_arguments(call.callee).split(".")[-2])
    return {ref: frozenset(signals) for ref, signals in found.items()}


def _signal_argument(arguments: str, keyword: str) -> tuple[str, ...]:
    """The last names of the signal(s) a ``receiver(...)`` decorator's arguments name."""
    parts = split_arguments(arguments)
    value = next((part.split("=", 1)[1].strip() for part in parts if part.startswith(f"{keyword}=")), None)
    if value is None and parts and not _KEYWORD.match(parts[0]):
        value = parts[0]
    if value is None:
        return ()
    if value[:1] in "[(" and value[-1:] in "])":
        items = split_arguments(value[1:-1])
    else:
        items = [value]
    return tuple(item.rsplit(".", 1)[-1] for item in items if DOTTED.match(item))


def _handler_argument(arguments: str) -> str | None:
    """The handler a ``signal.connect(...)`` call connects (first argument or ``receiver=``)."""
    parts = split_arguments(arguments)
    handler = next((part.split("=", 1)[1].strip() for part in parts if part.startswith("receiver=")), None)
    if handler is None and parts and not _KEYWORD.match(parts[0]):
        handler = parts[0]
    return handler if handler is not None and DOTTED.match(handler) else None


class DjangoModel:
    """ORM writes in autocommit mode, with the calls that only look like writes removed."""

    name = "django"
    names = _MANAGER_METHODS | _TREE_METHODS | {"save", "move"}

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        if context.index.language != "python":
            return None
        stripped = strip_arguments(call.callee)
        receiver = stripped.rsplit(".", 1)[0].split(".") if "." in stripped else []
        name = call.name
        if receiver and receiver[-1] == "session" and name in _SESSION_METHODS:
            return Classification(None, "the request's session store")
        if name in ("update", "delete") and len(receiver) == 1 and _other_client_query(receiver[0], call, context):
            return Classification(None, "another client's query (a search index): no ORM write")
        if name == "delete" and len(receiver) == 1 and _queue_message(receiver[0], call, context):
            return Classification(Effect.SIDE_EFFECT, "a queue message's acknowledgement (boto3 SQS Message.delete): outside the database")
        if _api_request(call, context):
            return Classification(None, "an API client's request object (run by its .execute()): no ORM write")
        if name in ("save", "delete") and context.is_rule_sink:
            arguments = split_arguments(call.arguments)
            if any(_NOT_SAVED.match(argument) for argument in arguments):
                return Classification(None, "save told not to save")
            if arguments and "=" not in arguments[0].split("(")[0] and not arguments[0].startswith("*"):
                return Classification(None, "positional arguments: not a model save/delete")
            return Classification(Effect.WRITE, "ORM write (autocommit)", orm="rows", rewrite=saves_existing(call, context))
        if receiver == ["self"] and name in MANAGER_SELF_WRITES and _in_manager_class(call, context):
            if name in _KEYWORD_ONLY and _has_positional(call.arguments):
                return None
            return Classification(Effect.WRITE, "manager write (autocommit)", orm="rows", rewrite=_sets_values(call))
        if name in _TREE_METHODS or (name == "move" and "pos" in call.arguments):
            return Classification(Effect.WRITE, TREE_OPERATION)
        if name in _MANAGER_METHODS and len(receiver) >= 2 and "objects" not in receiver:
            attribute = receiver[-1]
            if name in _KEYWORD_ONLY and _has_positional(call.arguments):
                return None  # a dict's update({...}): a manager's update/create take keywords
            if attribute in context.related_managers or attribute.endswith("_set"):
                return Classification(Effect.WRITE, "related-manager write (autocommit)", orm="link", rewrite=_sets_values(call))
        if name in ("update", "delete") and len(receiver) == 1 and _assigned_queryset(receiver[0], call, context):
            return Classification(Effect.WRITE, "queryset write (autocommit)", orm="rows", rewrite=_sets_values(call))
        if context.is_rule_sink and name not in _EXECUTE_NAMES:
            return Classification(Effect.WRITE, "ORM write (autocommit)", orm="rows", rewrite=_sets_values(call))
        return None


def _sets_values(call: CallSite) -> bool:
    """Whether a manager or queryset write is an ``update(...)`` to values given to it: no
    ``F()``, no arithmetic on a value read before."""
    return call.name == "update" and not relative_value(call.arguments)


def saves_existing(call: CallSite, context: CallContext) -> bool:
    """Whether ``x.save()`` rewrites a row that exists to the values set on ``x``: ``x`` is
    one named object (not a call result, ``super()``, a class, a form or a serializer) known
    to be a row read from the database (``self`` in a method, last assigned a lookup such as
    ``M.objects.get(...)`` or ``get_object_or_404(...)``, or a loop over a queryset; never a
    parameter or anything else whose origin is not seen), not told to insert, and no field of
    it was set above the save to a value computed relative to what was read (itself, ``F()``,
    arithmetic)."""
    owner = call.callee.rsplit(".", 1)[0] if "." in call.callee else ""
    if not DOTTED.match(owner) or owner[:1].isupper() or _MAY_CREATE.search(owner) or "force_insert" in call.arguments:
        return False
    # The index drops a receiver's own call (``get_order(1).save`` reads ``get_order.save``):
    # the line must name the object itself. ``super().save()`` in an override inserts when
    # its caller's object is new.
    if owner == "super" or f"{owner}.save(" not in context.line_text(call.line):
        return False
    scope = context.index.enclosing_definition(call.line)
    first = scope.start_line if scope is not None else 1
    fetched = owner == "self"  # whether ``x`` is known to hold a row read from the database
    bound = fetched  # whether the assignment or loop that binds ``x`` was met (backwards)
    for text in reversed(context.lines[max(first, 1) - 1 : call.line - 1]):
        if owner not in text:
            continue  # most lines: one substring test, no regex
        assignment = _ASSIGNMENT.match(text)
        if assignment is None:
            loop = FOR_LOOP.match(text) if not bound else None
            if loop is not None and loop.group(1) == owner:
                bound, fetched = True, _ROWS.search(loop.group(2)) is not None
            continue
        target, operator, value = assignment.groups()
        if target == owner and not bound and not operator:
            bound, fetched = True, _FETCHED.search(value) is not None and not _CONSTRUCTED.search(value)
        elif target.startswith(owner + ".") and "." not in target[len(owner) + 1 :]:
            attribute = target[len(owner) + 1 :]
            if operator or relative_value(value) or target in value:
                return False  # x.n += 1, x.n = x.n - 1, x.total = subtotal + fee: relative
            if attribute in ("pk", "id") and value.strip() == "None":
                return False  # a copy: the save inserts
    return fetched


def _assigned_queryset(variable: str, call: CallSite, context: CallContext) -> bool:
    """Whether ``variable`` was last assigned a queryset earlier in the call's function,
    and no assignment it was built through (``x = x.filter(...)`` back to its origin) shows
    another client's query: a search index's ``Search`` (elasticsearch-dsl's
    ``document().search().filter("term", ...)``), or a ``filter``/``exclude`` given a string
    positionally, which Django's never is (django/db/models/query.py
    ``QuerySet._filter_or_exclude_inplace`` builds ``Q(*args, **kwargs)``: positional
    arguments are ``Q`` objects or expressions)."""
    value = context.assigned_before(variable, call)
    return value is not None and _QUERYSET_SOURCE.search(value) is not None and not _other_client_query(variable, call, context)


def _api_request(call: CallSite, context: CallContext) -> bool:
    """Whether the call is an API client's request builder: given keyword arguments only
    (``yt.playlistItems().delete(id=...)``), and its result run at once by ``.execute()``
    (Google's API client). Django's ``Model.delete()``/``QuerySet.delete()`` return a tuple
    and ``save()`` returns None: nothing of theirs has ``execute``; peewee's ``delete()``
    takes no arguments, SQLAlchemy's a where clause."""
    arguments = [argument for argument in split_arguments(call.arguments) if argument.strip()]
    if not arguments or not all(_KEYWORD.match(argument) and not argument.lstrip().startswith("**") for argument in arguments):
        return False
    text = "\n".join(context.line_text(line) for line in range(call.line, call.line + _API_LINES))
    opening = text.find("." + call.name + "(")
    if opening < 0:
        return False
    closing = closing_bracket(text, opening + len(call.name) + 1)
    return closing is not None and _EXECUTED.match(text, closing + 1) is not None


def _other_client_query(variable: str, call: CallSite, context: CallContext) -> bool:
    """Whether an assignment ``variable`` was built through shows another client's query."""
    return any(_OTHER_CLIENT.search(value) for value in _built_through(variable, call, context))


def _queue_message(variable: str, call: CallSite, context: CallContext) -> bool:
    """Whether ``variable`` is the target of a ``for`` loop above the call, in its function,
    over ``X.receive_messages(...)``: boto3's SQS ``Queue.receive_messages`` returns
    ``sqs.Message`` resources, and ``Message.delete()`` sends ``DeleteMessage`` to the queue
    (boto3 resources/sqs: the ``Message`` resource's ``Delete`` action): no SQL, but an
    irreversible call outside the database (the message is gone), so it counts as a side
    effect. EvalAI's submission worker acknowledges each message it processed this way."""
    scope = context.index.enclosing_definition(call.line)
    first = scope.start_line if scope is not None else 1
    for number in range(call.line - 1, first - 1, -1):
        text = context.line_text(number)
        if variable not in text:
            continue
        loop = FOR_LOOP.match(text)
        if loop is not None and loop.group(1) == variable:
            return ".receive_messages(" in loop.group(2)
        if re.match(rf"\s*{re.escape(variable)}\s*=(?!=)", text):
            return False  # bound by something else nearer the call
    return False


def _built_through(variable: str, call: CallSite, context: CallContext) -> list[str]:
    """The values ``variable`` is assigned above the call in its function, latest first,
    back to (and with) the first that does not build on ``variable`` itself."""
    scope = context.index.enclosing_definition(call.line)
    first = scope.start_line if scope is not None else 1
    found: list[str] = []
    for number in range(call.line - 1, first - 1, -1):
        text = context.line_text(number)
        if variable not in text:
            continue
        match = _ASSIGNMENT.match(text)
        if match is None or match.group(1) != variable or match.group(2):
            continue
        value = match.group(3)
        found.append(value)
        if not re.match(rf"{re.escape(variable)}\b", value.lstrip()):
            break
    return found


def _in_manager_class(call: CallSite, context: CallContext) -> bool:
    """Whether the call's function is a method of a class named, or directly deriving from,
    ``...Manager``/``...QuerySet``."""
    if call.enclosing is None or "." not in call.enclosing:
        return False
    owner = call.enclosing.rsplit(".", 1)[0]
    for definition in context.index.definitions:
        if definition.qualname == owner and definition.kind == "class":
            names = (definition.name, *(strip_arguments(base) for base in definition.bases))
            return any(_MANAGER_CLASS.search(name) for name in names)
    return False


def _has_positional(arguments: str) -> bool:
    """Whether an argument list passes anything but ``name=value`` and ``**mapping``."""
    return any(not _KEYWORD.match(argument) for argument in split_arguments(arguments) if argument.strip())


def uses_django(indexes: Mapping[str, FileIndex]) -> bool:
    """Whether any Python file of the project imports Django. django-treebeard and django-mptt
    (``MP_Node.add_child``, ``MPTTModel.move_to``) are Django apps: in a project that never
    imports Django, a method of that name is the project's own (a graph's ``add_child``)."""
    return any(
        record.module == "django" or record.module.startswith("django.")
        for index in indexes.values() if index.language == "python"
        for record in index.imports
    )
