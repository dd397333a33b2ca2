"""HTTP entry points an OpenAPI document names: connexion's ``operationId`` convention.

A spec-first Flask or ASGI application (connexion) writes no route decorator: it hands an
OpenAPI document to ``App.add_api`` and connexion imports each operation's handler from its
``operationId``, a dotted ``package.module.function`` (``connexion/resolver.py``
``Resolver.resolve_function_from_operation_id`` → ``connexion/utils.py``
``get_function_from_name``: the longest importable module prefix, then attributes, so
``package.module.Class.method`` too, and a name the module imports, such as a package
``__init__``'s re-export). The operation's router controller, when it has one, is prefixed
to its ``operationId`` (``Resolver.resolve_operation_id``): ``x-openapi-router-controller``
in an OpenAPI 3 document (``connexion/operations/openapi.py`` ``OpenAPIOperation``),
``x-swagger-router-controller`` in a Swagger 2 one (``connexion/operations/swagger2.py``
``Swagger2Operation``); connexion reads it from the operation only, never the path item.

Input: every walked file's text (only ``.yml``/``.yaml``/``.json`` files that have an
``operationId`` and an ``openapi`` or ``swagger`` key are parsed) and the call graph (to find
the repository module and its definition). Output: ``(ref, detail)`` per operation whose
handler is a repository function; an ``operationId`` that names no repository function
(a library's, or an unknown module) gives nothing, and so does a document that does not
parse (a template, a fragment, a tag the safe loader rejects).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache

import yaml

from auditor.callgraph.graph import CallGraph, FunctionRef

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SPEC_SUFFIXES = (".yml", ".yaml", ".json")
_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})
_CONTROLLERS = {"openapi": "x-openapi-router-controller", "swagger": "x-swagger-router-controller"}


def candidate_documents(texts: Mapping[str, str]) -> list[str]:
    """The paths whose text may be an OpenAPI document: a ``.yml``/``.yaml``/``.json`` file
    that says ``operationId`` and ``openapi`` or ``swagger``, sorted."""
    return sorted(
        path for path, text in texts.items()
        if path.endswith(_SPEC_SUFFIXES) and "operationId" in text and ("openapi" in text or "swagger" in text)
    )  # fmt: skip


def documents_key(texts: Mapping[str, str]) -> str:
    """A digest of every candidate document's path and text: what the entry points read
    beyond the indexed files, for a cache whose key covers only those."""
    digest = hashlib.sha256()
    for path in candidate_documents(texts):
        digest.update(f"{path}\0{hashlib.sha256(texts[path].encode('utf-8', 'surrogatepass')).hexdigest()}\0".encode())
    return digest.hexdigest()


def operation_entries(texts: Mapping[str, str], paths: Iterable[str], graph: CallGraph) -> Iterator[tuple[FunctionRef, str]]:
    """``(handler, detail)`` for each operation of each OpenAPI document among ``paths``
    whose ``operationId`` names a repository function, in document order."""
    wanted = set(paths)
    for path in candidate_documents(texts):
        if path not in wanted:
            continue
        for route, method, target in _document_operations(path, texts[path]):
            ref = _handler(graph, path, target)
            if ref is not None:
                yield ref, f"openapi operation {method.upper()} '{route}' ({path})"


@lru_cache(maxsize=64)
def _document_operations(path: str, text: str) -> tuple[tuple[str, str, str], ...]:
    """``(route, method, dotted handler name)`` of every operation with an ``operationId`` of
    the OpenAPI or Swagger document ``text``; none when it is no such document. Kept per
    text: the static pass and each rule's chains read the same documents."""
    document = _load(path, text)
    if not isinstance(document, dict):
        return ()
    versions = [key for key in _CONTROLLERS if key in document]
    routes = document.get("paths")
    if len(versions) != 1 or not isinstance(routes, dict):
        return ()
    controller_key = _CONTROLLERS[versions[0]]
    found = []
    for route, item in routes.items():
        if not isinstance(route, str) or not isinstance(item, dict):
            continue
        for method, operation in item.items():
            if method not in _METHODS or not isinstance(operation, dict):
                continue
            operation_id = operation.get("operationId")
            if not isinstance(operation_id, str) or not operation_id:
                continue
            controller = operation.get(controller_key)
            if isinstance(controller, str) and controller:
                operation_id = f"{controller}.{operation_id}"
            found.append((route, method, operation_id))
    return tuple(found)


def _load(path: str, text: str) -> object:
    """The parsed document, or None when it does not parse. Any failure counts: PyYAML's
    constructors raise ``KeyError``/``IndexError``/``AttributeError`` on some bad scalars
    (``!!bool maybe``, ``!!int ''``), a deeply nested JSON array ``RecursionError``."""
    try:
        return json.loads(text) if path.endswith(".json") else yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 (a safe loader)
    except Exception:  # noqa: BLE001 (a walked file that is no document is no spec)
        return None


def _handler(graph: CallGraph, spec: str, target: str) -> FunctionRef | None:
    """The repository function ``package.module.function`` (or ``...module.Class.method``)
    names: the longest module prefix the repository has a file for (the one closest to
    the ``spec`` where several match), then a definition of the rest in that file, or the
    function that file imports under that name (``from .users import create_user``)."""
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module_file = graph.module_path(spec, ".".join(parts[:split]))
        if module_file is None:
            continue
        rest = parts[split:]
        ref = FunctionRef(module_file, ".".join(rest))
        if graph.definition(ref) is None and len(rest) == 1 and (imported := graph.imported_from(module_file, rest[0])):
            ref = FunctionRef(*imported)
        definition = graph.definition(ref)
        return ref if definition is not None and definition.kind in ("function", "method") else None
    return None
