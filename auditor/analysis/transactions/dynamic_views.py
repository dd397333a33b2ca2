"""View classes a project builds at run time with Python's three-argument ``type(name,
bases, namespace)`` (a factory that makes one DRF viewset per model and registers it on a
router): each call site of the factory is a view class deriving from ``bases`` whose
``serializer_class`` the namespace sets. DRF then dispatches the built class's actions
exactly as a written one's (rows ``kind: invokes`` of models/drf.yaml), so its serializer's
``create``/``update`` run under the bases' ``create``/``update``.

Read from the text, only where every piece is written out: the namespace is a dict literal
(in the call, or a local variable assigned one); its ``serializer_class`` is a class name,
a local variable assigned one, or ``getattr(module, param + "Suffix")`` where ``param`` is a
factory parameter every call site passes a string literal (the module a name imported or a
module-level ``importlib.import_module("dotted.name")``); the bases are tuple literals of
class names, or a factory parameter passed a tuple literal (or nothing) at every call site.
A factory with a call site that passes anything else builds no view here.

Inputs: the call graph and the per-file facts. Output: :func:`dynamic_views`, one
:class:`DynamicView` per call site of a factory, and :func:`dispatching_bases`, the base
each dispatches through with its serializers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.scanning import closing_bracket
from auditor.index.model import CallSite

_SERIALIZER_KEY = re.compile(r"""^\s*(['"])serializer_class\1\s*:\s*(.+?)\s*$""", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z_][\w.]*$")
_STRING = re.compile(r"""^(['"])([A-Za-z_]\w*)\1$""")
_GETATTR = re.compile(r"""^getattr\(\s*([A-Za-z_][\w.]*)\s*,\s*(?:([A-Za-z_]\w*)\s*\+\s*(['"])(\w*)\3|(['"])(\w*)\5\s*\+\s*([A-Za-z_]\w*))\s*\)$""")
_IMPORT_MODULE = re.compile(r"""^([A-Za-z_]\w*)\s*=\s*(?:importlib\.)?import_module\(\s*(['"])([\w.]+)\2\s*\)""")
_SIGNATURE = re.compile(r"\bdef\s+\w+\s*\(([^)]*)\)")

Binding = dict[str, str]
"""A factory's parameter names and the argument texts one call site passes them."""


@dataclass(frozen=True)
class DynamicView:
    """A class one call site of a factory builds: its repository ``bases`` (in order) and
    the ``serializers`` its namespace's ``serializer_class`` names; ``site`` is the
    factory's ``type(...)`` call, ``call`` the call site (path, line) that builds it."""

    bases: tuple[FunctionRef, ...]
    serializers: tuple[FunctionRef, ...]
    site: FunctionRef
    call: tuple[str, int]


def dynamic_views(graph: CallGraph, facts: Mapping[str, FileFacts]) -> tuple[DynamicView, ...]:
    """Every view class a ``type(name, bases, {"serializer_class": ...})`` call builds, one
    per call site of the function that makes the call (sorted)."""
    found: set[DynamicView] = set()
    for path in sorted(facts):
        file_facts = facts[path]
        if file_facts.index.language != "python":
            continue
        for call in file_facts.index.calls:
            if call.callee == "type" and call.enclosing is not None:
                found.update(_built(graph, facts, FunctionRef(path, call.enclosing), call))
    return tuple(sorted(found, key=lambda view: (view.call, view.site, view.bases)))


def dispatching_bases(
    graph: CallGraph, facts: Mapping[str, FileFacts], methods: frozenset[str], view_bases: frozenset[str],
    lineage_names: Callable[[FunctionRef], frozenset[str]],
) -> list[tuple[FunctionRef, tuple[FunctionRef, ...]]]:
    """The built classes as the base DRF dispatches through (the last whose lineage,
    ``lineage_names``, holds one of the framework's ``view_bases``) with their serializers.
    A class another of whose bases defines one of the dispatch ``methods`` (or
    ``get_serializer_class``) is left out, and with it every class built with its
    serializer: that dispatch is the other base's, not read here, so the serializer stays an
    entry point of its own."""
    overridden = methods | {"get_serializer_class"}
    found, unread = [], set()
    for view in dynamic_views(graph, facts):
        views = [base for base in view.bases if lineage_names(base) & view_bases]
        others = [base for base in view.bases if base not in views[-1:]]
        if views and not any(graph.class_member(other, method) for other in others for method in overridden):
            found.append((views[-1], view.serializers))
        else:
            unread.update(view.serializers)
    return [(base, serializers) for base, serializers in found if not unread & set(serializers)]


def _built(graph: CallGraph, facts: Mapping[str, FileFacts], factory: FunctionRef, call: CallSite) -> list[DynamicView]:
    arguments = split_arguments(call.arguments)
    if len(arguments) != 3:
        return []
    body = _body(graph, facts[factory.path], factory)
    namespace = _dict_text(arguments[2], body)
    value = _serializer_value(namespace) if namespace is not None else None
    if value is None:
        return []
    value = _assigned(value, body) or value
    bindings = _bindings(graph, facts, factory)
    if bindings is None:
        return []
    views = []
    for (call_path, line), binding in bindings:
        bases = _bases(graph, factory.path, arguments[1], binding)
        serializer = _serializer(graph, facts, factory.path, value, binding)
        if bases is None or serializer is None:
            return []  # one call site that cannot be read: the factory builds nothing known
        views.append(DynamicView(bases, (serializer,), factory, (call_path, line)))
    return views


def _body(graph: CallGraph, facts: FileFacts, ref: FunctionRef) -> list[str]:
    definition = graph.definition(ref)
    if definition is None:
        return []
    return [facts.line_text(line) for line in range(definition.start_line, definition.end_line + 1)]


def _dict_text(expression: str, body: list[str]) -> str | None:
    """The inside of the dict literal ``expression`` is, or a local variable is assigned."""
    text = expression.strip()
    if _NAME.match(text):
        joined = "\n".join(body)
        assignment = re.search(rf"(?m)^\s*{re.escape(text)}\s*=\s*\{{", joined)
        if assignment is None:
            return None
        start = assignment.end() - 1
        end = closing_bracket(joined, start)
        return joined[start + 1 : end] if end is not None else None
    if text.startswith("{") and text.endswith("}"):
        return text[1:-1]
    return None


def _serializer_value(namespace: str) -> str | None:
    for item in split_arguments(namespace):
        match = _SERIALIZER_KEY.match(item)
        if match is not None:
            return match.group(2)
    return None


def _assigned(name: str, body: list[str]) -> str | None:
    """The expression a local variable ``name`` is last assigned on one line, if any."""
    if not _NAME.match(name) or "." in name:
        return None
    pattern = re.compile(rf"^\s*{re.escape(name)}\s*=\s*(.+?)\s*(?:#.*)?$")
    found = [match.group(1) for line in body if (match := pattern.match(line)) is not None]
    return found[-1] if found else None


def _bindings(graph: CallGraph, facts: Mapping[str, FileFacts], factory: FunctionRef) -> list[tuple[tuple[str, int], Binding]] | None:
    """What each call site of ``factory`` passes its parameters (None when one passes
    ``*args``/``**kwargs``, which cannot be read)."""
    parameters = _parameters(graph, facts[factory.path], factory)
    if parameters is None:
        return None
    name = factory.qualname.rsplit(".", 1)[-1]
    found = []
    for edge in graph.callers(factory):
        caller_facts = facts.get(edge.caller.path)
        calls = [call for call in caller_facts.index.calls if call.line == edge.line and call.name == name] if caller_facts is not None else []
        for call in calls:
            binding = _bind(parameters, split_arguments(call.arguments))
            if binding is None:
                return None
            found.append(((edge.caller.path, edge.line), binding))
    return sorted(found)


def _parameters(graph: CallGraph, facts: FileFacts, ref: FunctionRef) -> list[tuple[str, str | None]] | None:
    definition = graph.definition(ref)
    if definition is None:
        return None
    signature = " ".join(facts.line_text(line) for line in range(definition.start_line, definition.body_start_line + 1))
    match = _SIGNATURE.search(signature)
    if match is None:
        return None
    parameters = []
    for part in split_arguments(match.group(1)):
        name, _, default = part.partition("=")
        name = name.split(":")[0].strip()
        if name.startswith("*"):
            return None
        if name and name not in ("self", "cls"):
            parameters.append((name, default.strip() or None))
    return parameters


def _bind(parameters: list[tuple[str, str | None]], arguments: list[str]) -> Binding | None:
    binding: Binding = {name: default for name, default in parameters if default is not None}
    names = [name for name, _ in parameters]
    for position, argument in enumerate(arguments):
        keyword = re.match(r"^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", argument, re.DOTALL)
        if argument.startswith("*"):
            return None
        if keyword is not None:
            binding[keyword.group(1)] = keyword.group(2).strip()
        elif position < len(names):
            binding[names[position]] = argument
        else:
            return None
    return binding


def _bases(graph: CallGraph, path: str, expression: str, binding: Binding) -> tuple[FunctionRef, ...] | None:
    """The classes a bases expression names: tuple literals and parameters passed one (or
    ``None``), joined by ``+``; None when a term is anything else or a name unresolved."""
    found: list[FunctionRef] = []
    for term in _terms(expression):
        if _NAME.match(term) and term in binding:
            term = binding[term]
            if term == "None":
                continue
        if not (term.startswith("(") and term.endswith(")")):
            return None
        for name in split_arguments(term[1:-1]):
            ref = graph.resolve(path, strip_arguments(name)) if _NAME.match(name) else None
            if ref is None:
                return None
            found.append(ref)
    return tuple(found) or None


def _terms(expression: str) -> list[str]:
    """The top-level ``+`` terms of an expression (brackets and strings respected)."""
    terms, depth, start = [], 0, 0
    for index, char in enumerate(expression):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "+" and depth == 0:
            terms.append(expression[start:index].strip())
            start = index + 1
    terms.append(expression[start:].strip())
    return terms


def _serializer(graph: CallGraph, facts: Mapping[str, FileFacts], path: str, value: str, binding: Binding) -> FunctionRef | None:
    """The class ``value`` (a class name or ``getattr(module, param + "Suffix")``) names."""
    if _NAME.match(value):
        return _class(graph, path, value)
    match = _GETATTR.match(value)
    if match is None:
        return None
    module = match.group(1)
    parameter, prefix, suffix = (match.group(2), "", match.group(4)) if match.group(2) else (match.group(7), match.group(6), "")
    literal = _STRING.match(binding.get(parameter) or "")
    if literal is None:
        return None
    name = f"{prefix}{literal.group(2)}{suffix}"
    return _class(graph, path, f"{module}.{name}") or _imported_module_class(graph, facts, path, module, name)


def _class(graph: CallGraph, path: str, name: str) -> FunctionRef | None:
    ref = graph.resolve(path, name)
    definition = graph.definition(ref) if ref is not None else None
    return ref if definition is not None and definition.kind == "class" else None


def _imported_module_class(graph: CallGraph, facts: Mapping[str, FileFacts], path: str, module: str, name: str) -> FunctionRef | None:
    """``name`` in the module a module-level ``module = importlib.import_module("a.b")``
    of ``path`` loads (the repository file ``a/b.py`` or ``a/b/__init__.py``, under any
    source root)."""
    file_facts = facts[path]
    dotted = None
    for line in range(1, len(file_facts.lines) + 1):
        match = _IMPORT_MODULE.match(file_facts.line_text(line))
        if match is not None and match.group(1) == module:
            dotted = match.group(3)
    if dotted is None:
        return None
    stem = dotted.replace(".", "/")
    for candidate in sorted(facts):
        if candidate == f"{stem}.py" or candidate.endswith(f"/{stem}.py") or candidate.endswith(f"/{stem}/__init__.py") or candidate == f"{stem}/__init__.py":
            ref = FunctionRef(candidate, name)
            definition = graph.definition(ref)
            if definition is not None and definition.kind == "class":
                return ref
    return None
