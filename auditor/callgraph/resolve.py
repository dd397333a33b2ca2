"""Resolution: the index's call sites resolved to the definitions they reach.

Input: ``FileIndex`` objects keyed by repository path. Output: per file, the sorted, distinct
(caller, callee path, callee, line, approximate) rows of :func:`file_edges`, which
:class:`~auditor.callgraph.graph.CallGraph` keeps; and the :class:`Repository` lookups
the graph's queries (``resolve``, ``class_member``, ``base_classes``) ask. The tables it
resolves over, and the lookups by name alone (the unique-name fallback among them), are
:mod:`auditor.callgraph.symbols`.

Resolution is best-effort and static. In order, a call's callee text is resolved through:
``self.``/``cls.``/``this.`` methods of the enclosing class and its bases within the
repository (a class declared in a type stub, ``.pyi``, is no base); nested and module-level
definitions of the same file; imports (``from x import y``, ``import x as z``, relative
imports, re-exports through package ``__init__`` files, star imports; see
:mod:`auditor.callgraph.imports`); then, when none of these applies and the receiver is not
known to be an external module or a repository class lacking the method, a unique-name
fallback whose edges are flagged ``approximate`` (in Python, ``x.name()`` only to a method:
a module's function is reached through its import). Names shared with common library APIs
(``get``, ``save``, ``append``...) are never resolved by name alone. A function a Django
model gets with ``Model.add_to_class("name", function)`` (django/db/models/base.py
``ModelBase.add_to_class``: ``setattr`` for a value without ``contribute_to_class``) is a
method named ``name`` for that fallback (:func:`~auditor.callgraph.symbols.attachments`). Calls at module level
are attributed to the pseudo-function ``<module>``; calls inside an ``if __name__ ==
"__main__":`` block to ``<main>``.

A call resolves only to definitions of its own language family
(:func:`~auditor.callgraph.languages.call_family`): the name tables, a directory's files and
the fallback are kept per family, so a Python ``qs.exclude()`` never reaches a TypeScript
method named ``exclude``.

What each language adds is data (:mod:`auditor.callgraph.languages`). Java and Go: a call
on a Java field resolves through the field's name to the imported or same-package class
named after it (``deptService`` -> ``ISysDeptService``), and an interface's abstract method
to its one implementation (a ``@Transactional`` interface method stays the target; a
MyBatis mapper's, with none, gets no edge). A Go method on another call's external result
(``db.QueryRow(q).Scan``) gets no edge, and a name match from ``field.m()`` to the calling
method itself is never taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from auditor.callgraph.imports import Binding, Module, Symbol
from auditor.callgraph.languages import rules_for
from auditor.callgraph.names import MAIN_FUNCTION, MODULE_FUNCTION, strip_arguments
from auditor.callgraph.symbols import Symbols
from auditor.index.model import Definition, FileIndex

# Bound on re-export chains followed through package ``__init__`` files and base classes.
_MAX_HOPS = 8

RECEIVERS_SELF = frozenset({"self", "cls", "this"})
"""Receivers that name the enclosing class's instance (or the class itself)."""


class _Resolution(NamedTuple):
    """Outcome of resolving callee text: a target, or why no fallback should be tried.

    A named tuple rather than a frozen dataclass: one is made per resolved call, and a
    tuple is several times cheaper to create.
    """

    target: Definition | None = None
    path: str = ""
    stop: bool = False  # True when the receiver is known (external, or a class without it)


# Marks a memo entry not computed yet (None is a computed "unresolvable").
_PENDING: tuple[str, str, bool] = ("<pending>", "", False)

_UNRESOLVED = _Resolution()
_STOP = _Resolution(stop=True)


class Repository:
    """Name resolution over all indexed files' symbol tables, shared by the edges and the
    graph's queries: dotted names through scopes, classes and their bases, and imports."""

    def __init__(self, indexes: Mapping[str, FileIndex]) -> None:
        """Resolution over the symbol tables of ``indexes`` (in ``symbols``)."""
        self.symbols = Symbols(indexes)
        self._bases: dict[tuple[str, int, int], tuple[tuple[str, Definition], ...]] = {}
        self._attach_methods()

    def _attach_methods(self) -> None:
        """Resolve every ``add_to_class`` value to the repository function it names (in the
        scope of its call) and list it as a method under the attached name."""
        for path, attachment in self.symbols.attachments:
            resolution = self.resolve_name(path, attachment.value.split("."), attachment.scope)
            target = resolution.target
            if target is None or target.kind not in ("function", "method"):
                continue
            key = (self.symbols.families[path], attachment.name)
            attached = self.symbols.attached_by_name.setdefault(key, [])
            if (resolution.path, target) not in attached:
                attached.append((resolution.path, target))

    # -- classes -------------------------------------------------------------------------

    def class_member(self, path: str, cls: Definition, member: str, hops: int = 0) -> tuple[str, Definition] | None:
        """The definition ``member`` of class ``cls`` or of its repository bases."""
        found = self.symbols.definitions.get(path, {}).get(f"{cls.qualname}.{member}")
        if found is not None:
            return path, found
        if hops >= _MAX_HOPS:
            return None
        for base in self.base_classes(path, cls, hops):
            result = self.class_member(base[0], base[1], member, hops + 1)
            if result is not None:
                return result
        return None

    def base_classes(self, path: str, cls: Definition, hops: int = 0) -> tuple[tuple[str, Definition], ...]:
        """The repository classes a class derives from (external bases are skipped).

        A class declared in a type stub (``.pyi``, such as a checked-in
        ``stubs/django/db/models/base.pyi``) is external too: it stands for a library's
        class, and its methods (``def save(self, ...): ...``) have no body that runs, so a
        ``self.save()`` or a manager's ``create()`` on a subclass must not reach them."""
        # Keyed by identity: two classes may share a qualname in one file, and the
        # definitions live as long as the indexes this repository holds.
        key = (path, id(cls), hops)
        found = self._bases.get(key)
        if found is None:
            found = self._bases[key] = tuple(self._find_base_classes(path, cls, hops))
        return found

    def _find_base_classes(self, path: str, cls: Definition, hops: int) -> list[tuple[str, Definition]]:
        found: list[tuple[str, Definition]] = []
        for base in cls.bases:
            if "=" in base:
                continue
            text = strip_arguments(base)
            if not text:
                continue
            resolution = self.resolve_name(path, text.split("."), None, hops + 1)
            target = resolution.target
            if target is not None and target.kind == "class" and not resolution.path.endswith(".pyi"):
                found.append((resolution.path, target))
        return found

    def external_bases(self, path: str, cls: Definition) -> tuple[str, ...]:
        """The bases a class writes (arguments stripped) that name no repository class: a
        library's (``viewsets.ModelViewSet``), or a class only a type stub declares."""
        found: list[str] = []
        for base in cls.bases:
            text = strip_arguments(base) if "=" not in base else ""
            if not text:
                continue
            resolution = self.resolve_name(path, text.split("."), None, 1)
            target = resolution.target
            if target is None or target.kind != "class" or resolution.path.endswith(".pyi"):
                found.append(text)
        return tuple(found)

    # -- resolution ----------------------------------------------------------------------

    def resolve_name(self, path: str, parts: list[str], scope: str | None, hops: int = 0) -> _Resolution:
        """Resolve dotted ``parts`` as written in ``path`` inside function ``scope``."""
        if not parts or hops > _MAX_HOPS:
            return _UNRESOLVED
        head = parts[0]
        table = self.symbols.definitions.get(path, {})
        if head in RECEIVERS_SELF or head == "super":
            cls = self.symbols.enclosing_class(path, scope)
            if cls is None or len(parts) != 2:
                return _UNRESOLVED  # self.repository.save(): the attribute's type is unknown
            if head == "super":
                for base_path, base in self.base_classes(path, cls):
                    member = self.class_member(base_path, base, parts[1])
                    if member is not None:
                        return _Resolution(member[1], member[0])
                return _STOP
            member = self.class_member(path, cls, parts[1])
            if member is not None:
                return _Resolution(member[1], member[0])
            return _STOP
        rules = rules_for(self.symbols.languages[path])
        if scope and len(parts) == 1:
            nested = table.get(f"{scope}.{head}")
            if nested is not None:
                return _Resolution(nested, path)
            if rules.implicit_members:
                cls = self.symbols.enclosing_class(path, scope)
                member = self.class_member(path, cls, head) if cls is not None else None
                if member is not None:
                    return _Resolution(member[1], member[0])
        local = table.get(head)
        if local is not None and local.parent is None:
            return self._descend(path, local, parts[1:])
        binding = self.symbols.imports.bindings(path).get(head)
        if binding is not None:
            return self._follow(path, binding, parts[1:], hops)
        if rules.typed_fields and len(parts) == 2 and head[:1].islower():
            typed = self._typed_field_member(path, head, parts[1])
            if typed is not None:
                return typed
        if rules.shares_package_name(head):
            for sibling in self.symbols.sibling_files(path):
                found = self.symbols.top_level(sibling, head)
                if found is not None:
                    return self._descend(sibling, found, parts[1:])
        if rules.stops_on_external_results and len(parts) > 2 and self._chain_on_external_call(path, parts, scope, hops):
            return _STOP
        for star in self.symbols.imports.star_imports(path):
            found = self.symbols.top_level(star, head)
            if found is not None:
                return self._descend(star, found, parts[1:])
        if head in rules.builtins and len(parts) == 1:
            return _STOP
        return _UNRESOLVED

    def _chain_on_external_call(self, path: str, parts: list[str], scope: str | None, hops: int) -> bool:
        """Whether ``parts`` calls a method on the result of another call in the file that
        runs no repository function (Go) (``s.db.QueryRow(q).Scan(&id)``: ``Scan`` belongs to
        ``*sql.Row``, not to a repository type that happens to have a ``Scan``)."""
        prefix = parts[:-1]
        if ".".join(prefix) not in self.symbols.callee_texts(path):
            return False
        inner = self.resolve_name(path, prefix, scope, hops + 1)
        return inner.target is None and (inner.stop or self.symbols.fallback(path, prefix) is None)

    def _typed_field_member(self, path: str, field: str, member: str) -> _Resolution | None:
        """``field.member()`` on a field named after its type (Java), as injected fields are
        (``deptService`` of type ``ISysDeptService``, ``namespaceBranchService`` of type
        ``NamespaceBranchService``): the one imported or same-package class whose name ends
        with the field's name and that has ``member``. An interface's abstract method runs
        its one repository implementation; one with none (a MyBatis mapper) or several
        stops, so the call site keeps its own meaning. A ``@Transactional`` interface method
        (or interface) stays the target: Spring's proxy runs the implementation inside that
        transaction, and the analysis reads the boundary from the annotation. None: no such
        class."""
        suffix = field[0].upper() + field[1:]
        found: list[tuple[str, Definition]] = []
        for name, binding in sorted(self.symbols.imports.bindings(path).items()):
            if name.endswith(suffix) and isinstance(binding, Symbol) and binding.module.startswith("java:"):
                resolved = self._follow(path, binding, [], 0)
                if resolved.target is not None and resolved.target.kind == "class":
                    found.append((resolved.path, resolved.target))
        language = self.symbols.languages[path]
        for sibling_path, cls in self.symbols.package_classes(path, language):
            if cls.name.endswith(suffix) and (sibling_path, cls) not in found:
                found.append((sibling_path, cls))
        members = [hit for hit in (self.class_member(cls_path, cls, member) for cls_path, cls in found) if hit is not None]
        if len(members) != 1:
            return None
        member_path, definition = members[0]
        owner = self.symbols.definitions.get(member_path, {}).get(definition.parent or "")
        if definition.body_start_line <= definition.end_line or _transactional(definition, owner):
            return _Resolution(definition, member_path)
        implementations = []
        for sub_path, sub in self.symbols.subclasses(language).get(owner.name if owner is not None else "", ()):
            hit = self.symbols.definitions.get(sub_path, {}).get(f"{sub.qualname}.{member}")
            if hit is not None:
                implementations.append((sub_path, hit))
        if len(implementations) == 1:
            return _Resolution(implementations[0][1], implementations[0][0])
        return _STOP  # abstract, or one line (the index cannot tell): no edge either way

    def _descend(self, path: str, definition: Definition, rest: list[str]) -> _Resolution:
        """Apply the remaining attribute names to a definition (class members only)."""
        if not rest:
            return _Resolution(definition, path)
        if definition.kind == "class" and len(rest) == 1:
            member = self.class_member(path, definition, rest[0])
            if member is not None:
                return _Resolution(member[1], member[0])
        return _STOP

    def _follow(self, path: str, binding: Binding, rest: list[str], hops: int) -> _Resolution:
        """Resolve the rest of a dotted name through an import binding."""
        if isinstance(binding, Module):
            module = binding.module
            if module.startswith("ext:"):
                return _STOP
            if module.startswith("go:"):
                directory = module[3:]
                if not rest:
                    return _UNRESOLVED
                for file_path in self.symbols.directories.get((self.symbols.families[path], directory), ()):
                    found = self.symbols.top_level(file_path, rest[0])
                    if found is not None:
                        return self._descend(file_path, found, rest[1:])
                return _STOP
            if module.startswith("file:"):
                target = module[5:]
                if not rest:
                    return _UNRESOLVED
                found = self.symbols.top_level(target, rest[0])
                return self._descend(target, found, rest[1:]) if found is not None else _STOP
            return self._in_python_module(path, module, rest, hops)
        module, name = binding.module, binding.name
        if module.startswith("ext:"):
            return _STOP
        if module.startswith("file:"):
            target = module[5:]
            found = self.symbols.top_level(target, name)
            if found is None and name == "default":
                return _UNRESOLVED
            return self._descend(target, found, rest) if found is not None else _STOP
        if module.startswith("java:"):
            candidates = self.symbols.classes_named(path, name)
            dotted = module[5:].replace(".", "/")
            exact = [item for item in candidates if item[0].endswith(dotted + ".java")]
            chosen = exact or (candidates if len(candidates) == 1 else [])
            if not chosen:
                return _STOP
            return self._descend(chosen[0][0], chosen[0][1], rest)
        return self._in_python_module(path, f"{module}.{name}" if module else name, rest, hops, symbol=(module, name))

    def _in_python_module(
        self, path: str, dotted: str, rest: list[str], hops: int, symbol: tuple[str, str] | None = None
    ) -> _Resolution:
        """Resolve ``dotted`` (a module, or module.symbol) followed by ``rest`` attributes."""
        if symbol is not None:
            module, name = symbol
            module_path = self.symbols.imports.find_module(module, path) if module else None
            if module_path is not None:
                found = self.symbols.top_level(module_path, name)
                if found is not None:
                    return self._descend(module_path, found, rest)
                inner = self.symbols.imports.bindings(module_path).get(name)
                if inner is not None and hops < _MAX_HOPS:
                    return self._follow(module_path, inner, rest, hops + 1)
                for star in self.symbols.imports.star_imports(module_path):
                    found = self.symbols.top_level(star, name)
                    if found is not None:
                        return self._descend(star, found, rest)
            submodule = self.symbols.imports.find_module(dotted, path)
            if submodule is None:
                return _STOP if module_path is None else _UNRESOLVED
            return self._in_python_module(path, dotted, rest, hops)
        # ``dotted`` names a module; extend it with leading attributes that are submodules.
        module_path = self.symbols.imports.find_module(dotted, path)
        remaining = list(rest)
        current = dotted
        while remaining:
            deeper = self.symbols.imports.find_module(f"{current}.{remaining[0]}", path)
            if deeper is None:
                break
            current, module_path = f"{current}.{remaining[0]}", deeper
            remaining.pop(0)
        if module_path is None:
            return _STOP
        if not remaining:
            return _UNRESOLVED
        found = self.symbols.top_level(module_path, remaining[0])
        if found is not None:
            return self._descend(module_path, found, remaining[1:])
        inner = self.symbols.imports.bindings(module_path).get(remaining[0])
        if inner is not None and hops < _MAX_HOPS:
            return self._follow(module_path, inner, remaining[1:], hops + 1)
        for star in self.symbols.imports.star_imports(module_path):
            found = self.symbols.top_level(star, remaining[0])
            if found is not None:
                return self._descend(star, found, remaining[1:])
        return _UNRESOLVED



def _transactional(method: Definition, owner: Definition | None) -> bool:
    """Whether a Java method or its class/interface carries a ``@Transactional``."""
    annotations = (*method.decorators, *(owner.decorators if owner is not None else ()))
    return any(strip_arguments(annotation).rsplit(".", 1)[-1] == "Transactional" for annotation in annotations)


def _callable_target(repository: Repository, path: str, definition: Definition) -> tuple[str, Definition] | None:
    """The function a call to ``definition`` runs: itself, or a class's constructor.

    A class without a constructor in the repository is its own target, so that files
    instantiating a class stay linked to the file defining it.
    """
    if definition.kind == "class":
        for constructor in ("__init__", "constructor"):
            member = repository.class_member(path, definition, constructor)
            if member is not None:
                return member
    return path, definition


def _resolve_call(repository: Repository, path: str, callee: str, scope: str | None) -> tuple[str, str, bool] | None:
    """Resolve one call's callee text to the (path, qualname) of the function it runs, with
    its approximate flag."""
    text = strip_arguments(callee)
    if not text:
        return None
    parts = text.split(".")
    if "" in parts:
        parts = [part for part in parts if part]
        if not parts:
            return None
    resolution = repository.resolve_name(path, parts, scope)
    if resolution.target is not None:
        target = _callable_target(repository, resolution.path, resolution.target)
        return (target[0], target[1].qualname, False) if target is not None else None
    if resolution.stop:
        return None
    fallback = repository.symbols.fallback(path, parts)
    if fallback is None or _call_on_another_object(repository, path, parts, scope, fallback):
        return None
    return fallback[0], fallback[1].qualname, True


def _call_on_another_object(
    repository: Repository, path: str, parts: list[str], scope: str | None, target: tuple[str, Definition]
) -> bool:
    """Whether a name match from ``field.m()`` to the calling method itself is another
    object's ``m`` (an injected service's method of the same name), not recursion: so in
    languages whose rules say ``receiver_calls_never_recurse`` (Java, Go)."""
    return (
        rules_for(repository.symbols.languages.get(path)).receiver_calls_never_recurse
        and len(parts) > 1
        and parts[0] not in RECEIVERS_SELF
        and target[0] == path
        and target[1].qualname == scope
    )


def file_edges(repository: Repository, path: str, index: FileIndex) -> list[tuple[str, str, str, int, bool]]:
    """The resolved calls of one file as sorted, distinct (caller qualname, callee path,
    callee qualname, line, approximate) tuples.

    A callee text is resolved once per file and scope key: the enclosing function when the
    resolution can depend on it (``self.``/``super`` receivers, names nested in it, languages
    whose rules are ``scope_bound``), otherwise None, as the same text then resolves the same anywhere in the file.
    """
    table = repository.symbols.definitions.get(path, {})
    scope_bound = rules_for(index.language).scope_bound
    main_start, main_end = index.main_block or (0, -1)
    resolved_by_key: dict[tuple[str, str | None], tuple[str, str, bool] | None] = {}
    resolved_by_site: dict[tuple[str, str | None], tuple[str, str, bool] | None] = {}
    found: set[tuple[str, str, str, int, bool]] = set()
    for call in index.calls:
        callee, scope = call.callee, call.enclosing
        site = (callee, scope)
        resolved = resolved_by_site.get(site, _PENDING)
        if resolved is _PENDING:
            if scope is None or scope_bound:
                key = site
            else:
                head = callee.partition(".")[0]
                bound = head in RECEIVERS_SELF or head == "super" or f"{scope}.{head}" in table
                key = site if bound else (callee, None)
            resolved = resolved_by_key.get(key, _PENDING)
            if resolved is _PENDING:
                resolved = resolved_by_key[key] = _resolve_call(repository, path, callee, scope)
            resolved_by_site[site] = resolved
        if resolved is None:
            continue
        line = call.line
        if scope:
            caller = scope
        elif main_start <= line <= main_end:
            caller = MAIN_FUNCTION
        else:
            caller = MODULE_FUNCTION
        found.add((caller, resolved[0], resolved[1], line, resolved[2]))
    return sorted(found)
