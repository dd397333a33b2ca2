"""HTTP entry points an OpenAPI document names: connexion's ``operationId`` convention.

A spec-first Flask or ASGI application (connexion) writes no route decorator: it hands an
OpenAPI document to ``App.add_api`` and connexion imports each operation's handler from its
``operationId``, a dotted ``package.module.function`` (``connexion/resolver.py``
``Resolver.resolve_function_from_operation_id`` → ``connexion/utils.py``
``get_function_from_name``: the longest importable module prefix, then attributes, so
``package.module.Class.method`` too). ``x-openapi-router-controller`` on the operation or its
path item names the module a bare ``operationId`` is taken from
(``connexion/operations/abstract.py``, ``RelativeResolver``'s convention).

Input: every walked file's text (only ``.yml``/``.yaml``/``.json`` files that have an
``operationId`` and an ``openapi`` or ``swagger`` key are parsed) and the call graph (to find
the repository module and its definition). Output: ``(ref, detail)`` per operation whose
handler is a repository function; an ``operationId`` that names no repository function
(a library's, or an unknown module) gives nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping

import yaml

from auditor.callgraph.graph import CallGraph, FunctionRef

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SPEC_SUFFIXES = (".yml", ".yaml", ".json")
_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})
_CONTROLLER = "x-openapi-router-controller"


def operation_entries(texts: Mapping[str, str], paths: Iterable[str], graph: CallGraph) -> Iterator[tuple[FunctionRef, str]]:
    """``(handler, detail)`` for each operation of each OpenAPI document among ``paths``
    whose ``operationId`` names a repository function, in document order."""
    for path in paths:
        if not path.endswith(_SPEC_SUFFIXES):
            continue
        text = texts.get(path, "")
        if "operationId" not in text or ("openapi" not in text and "swagger" not in text):
            continue
        document = _load(path, text)
        if not isinstance(document, dict) or not ({"openapi", "swagger"} & set(document)):
            continue
        for route, method, target in _operations(document):
            ref = _handler(graph, path, target)
            if ref is not None:
                yield ref, f"openapi operation {method.upper()} '{route}' ({path})"


def _load(path: str, text: str) -> object:
    """The parsed document, or None when it does not parse (a template, a fragment)."""
    try:
        return json.loads(text) if path.endswith(".json") else yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 (a safe loader)
    except (ValueError, yaml.YAMLError):
        return None


def _operations(document: dict) -> Iterator[tuple[str, str, str]]:
    """``(route, method, dotted handler name)`` of every operation with an ``operationId``."""
    routes = document.get("paths")
    if not isinstance(routes, dict):
        return
    for route, item in routes.items():
        if not isinstance(item, dict):
            continue
        for method, operation in item.items():
            if method not in _METHODS or not isinstance(operation, dict):
                continue
            operation_id = operation.get("operationId")
            if not isinstance(operation_id, str) or not operation_id:
                continue
            controller = operation.get(_CONTROLLER, item.get(_CONTROLLER))
            if isinstance(controller, str) and controller:
                operation_id = f"{controller}.{operation_id}"
            yield str(route), method, operation_id


def _handler(graph: CallGraph, spec: str, target: str) -> FunctionRef | None:
    """The repository function ``package.module.function`` (or ``...module.Class.method``)
    names: the longest module prefix the repository has a file for (the one closest to
    the ``spec`` where several match), then a definition of the rest in that file."""
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module_file = graph.module_path(spec, ".".join(parts[:split]))
        if module_file is None:
            continue
        ref = FunctionRef(module_file, ".".join(parts[split:]))
        definition = graph.definition(ref)
        if definition is not None and definition.kind in ("function", "method"):
            return ref
        return None
    return None
