"""Call graph: resolve the index's call sites to the definitions they reach.

Inputs: ``FileIndex`` objects from :mod:`auditor.index`, keyed by repository path.
Outputs: a :class:`CallGraph` of :class:`Edge` objects between :class:`FunctionRef` nodes,
with queries for callers, callees, paths between two functions, connected components of
files (the packer groups windows by them) and edge plausibility (grounding model chains).

Resolution is best-effort and static. In order, a call's callee text is resolved through:
``self.``/``cls.``/``this.`` methods of the enclosing class and its bases within the
repository; nested and module-level definitions of the same file; imports (``from x import
y``, ``import x as z``, relative imports, re-exports through package ``__init__`` files,
star imports); then, when none of these applies and the receiver is not known to be an
external module or a repository class lacking the method, a unique-name fallback whose
edges are flagged ``approximate`` (in Python, ``x.name()`` only to a method: a module's
function is reached through its import). Names shared with common library APIs (``get``,
``save``, ``append``...) are never resolved by name alone.

Python module names come from paths ("app/services/orders.py" -> "app.services.orders");
an import that does not match exactly is matched by module-name suffix, because the scan
root is not always the import root. Calls at module level are attributed to the
pseudo-function ``<module>``; calls inside an ``if __name__ == "__main__":`` block to
``<main>``.

Java and Go: a call on a Java field resolves through the field's name to the imported or
same-package class named after it (``deptService`` -> ``ISysDeptService``), and an
interface's abstract method to its one implementation (a ``@Transactional`` interface
method stays the target; a MyBatis mapper's, with none, gets no edge). A Go method on
another call's external result (``db.QueryRow(q).Scan``) gets no edge, and a name match
from ``field.m()`` to the calling method itself is never taken.

Built graphs can be cached on disk (:class:`CallGraphCache`), keyed by a digest over every
indexed file's path, language and content hash: an unchanged repository loads its graph
(plain marshalled rows) instead of resolving every call again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import sys
from collections import defaultdict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

from auditor.index.indexer import collection_paused
from auditor.index.model import INDEX_VERSION, Definition, FileIndex
from auditor.storage.sealed import prune_least_recent, read_regular_file, seal, unseal, write_atomically

GRAPH_VERSION = 3
"""Version of the graph cache format and of the resolution rules; part of the cache key.
Bump it when either changes so that stale cached graphs are never read."""

MAX_GRAPHS = 8
"""Most graph files one cache directory keeps; the least recently used are deleted first."""

_GRAPH_MAGIC = b"auditor-call-graph\n"

logger = logging.getLogger(__name__)

MODULE_FUNCTION = "<module>"
MAIN_FUNCTION = "<main>"

# Enumerating simple paths is exponential in the worst case; a caller asking for paths
# between two functions wants evidence, not an exhaustive listing.
MAX_PATHS = 256

# Bound on re-export chains followed through package ``__init__`` files and base classes.
_MAX_HOPS = 8

_FUNCTION_KINDS = ("function", "method")
_RECEIVERS_SELF = frozenset({"self", "cls", "this"})

# Method and function names shared with builtins, containers, strings, ORMs, HTTP clients
# and test tools: a bare name match on these says nothing about which definition runs.
_COMMON_NAMES = frozenset(
    """
    add all any append apply bool call clear close commit copy count create decode delete
    dict discard dispatch encode execute exists extend filter find first flush format from_dict
    get get_or_create group handle head index info init insert int items join keys len list
    load loads log main map merge next open options patch pop post print process put read
    refresh remove render replace reset run save send set setdefault sort split start stop
    str strip super to_dict update update_or_create validate values warning write error
    debug exception filter_by query delete_many insert_one
    """.split()
)

_PYTHON_BUILTINS = frozenset(
    """
    abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod
    compile complex delattr dict dir divmod enumerate eval exec filter float format frozenset
    getattr globals hasattr hash help hex id input int isinstance issubclass iter len list
    locals map max memoryview min next object oct open ord pow print property range repr
    reversed round set setattr slice sorted staticmethod str sum super tuple type vars zip
    """.split()
)

_JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")


@dataclass(frozen=True, order=True, slots=True)
class FunctionRef:
    """A function or method by repository path and qualified name ("Class.method")."""

    path: str
    qualname: str


@dataclass(frozen=True, order=True, slots=True)
class Edge:
    """One resolved call: ``caller`` calls ``callee`` at ``line`` of the caller's file.

    ``approximate`` is True when the callee was found by a unique-name fallback rather than
    by following scopes, imports or classes.
    """

    caller: FunctionRef
    callee: FunctionRef
    line: int
    approximate: bool


@dataclass(frozen=True, slots=True)
class _Module:
    """An import binding to a module (``import x.y as z``), by dotted name or JS/Go target."""

    module: str


@dataclass(frozen=True, slots=True)
class _Symbol:
    """An import binding to a name inside a module (``from x import y``)."""

    module: str
    name: str


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


def python_module_name(path: str) -> str:
    """The dotted module name of a Python file path ("a/b/__init__.py" -> "a.b")."""
    stem = path[: -len(".pyi")] if path.endswith(".pyi") else path[: -len(".py")] if path.endswith(".py") else path
    parts = [part for part in stem.split("/") if part]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=1 << 16)
def strip_arguments(text: str) -> str:
    """Drop argument lists and generic parameters from a dotted expression
    ("app.route('/x')" -> "app.route", "Repo<T>.save" -> "Repo.save"); kept per text (the
    same callee and decorator texts recur across a repository's files)."""
    if "(" not in text and "[" not in text and "<" not in text:
        return text.strip()
    out: list[str] = []
    depth = 0
    for char in text:
        if char in "([<":
            depth += 1
        elif char in ")]>":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(char)
    return "".join(out).strip()


class _Repository:
    """Lookup tables over all indexed files, shared by resolution and queries."""

    def __init__(self, indexes: Mapping[str, FileIndex]) -> None:
        self.indexes = indexes
        self.definitions: dict[str, dict[str, Definition]] = {}
        self.by_name: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        self.classes_by_name: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        self.modules: dict[str, str] = {}
        self.module_suffixes: dict[str, list[str]] = defaultdict(list)
        self.directories: dict[str, list[str]] = defaultdict(list)
        # A file's import bindings are made the first time a lookup needs them: a run that
        # loads the call graph from the cache resolves names in a few files only.
        self._bindings: dict[str, dict[str, _Module | _Symbol]] = {}
        self._star_imports: dict[str, list[str]] = {}
        self._imported_paths: dict[str, set[str]] = {}
        self._closest: dict[tuple[str, str], str] = {}
        self._enclosing_classes: dict[tuple[str, str], Definition | None] = {}
        self._bases: dict[tuple[str, int, int], tuple[tuple[str, Definition], ...]] = {}
        self.languages: dict[str, str] = {path: index.language for path, index in indexes.items()}
        self._packages: dict[str, tuple[str, ...]] = {}
        self._absolute: dict[tuple[tuple[str, ...], str], str] = {}
        self._module_bindings: dict[str, _Module] = {}
        self._symbol_bindings: dict[tuple[str, str], _Symbol] = {}
        self.module_names: dict[str, str] = {}
        self.package_prefixes: set[str] = set()
        self._package_classes: dict[str, list[tuple[str, Definition]]] = {}
        self._subclasses: dict[str, list[tuple[str, Definition]]] | None = None
        self._go_calls: dict[str, frozenset[str]] = {}
        expanded: set[str] = set()  # leading parts of module names already in package_prefixes
        for path in sorted(indexes):
            index = indexes[path]
            table: dict[str, Definition] = {}
            for definition in index.definitions:
                table.setdefault(definition.qualname, definition)
                if definition.kind in _FUNCTION_KINDS:
                    self.by_name[definition.name].append((path, definition))
                elif definition.kind == "class":
                    self.classes_by_name[definition.name].append((path, definition))
            self.definitions[path] = table
            self.directories[posixpath.dirname(path)].append(path)
            if index.language == "python":
                module = python_module_name(path)
                self.module_names[path] = module
                self.modules.setdefault(module, path)
                parts = module.split(".")
                for start in range(len(parts)):
                    self.module_suffixes[".".join(parts[start:])].append(module)
                # Every dotted run of consecutive parts of a module name: the runs ending at
                # a part depend only on the name up to it, which modules of a package share.
                leading = ""
                for end, part in enumerate(parts, start=1):
                    leading = f"{leading}.{part}" if end > 1 else part
                    if leading not in expanded:
                        expanded.add(leading)
                        self.package_prefixes.update(".".join(parts[start:end]) for start in range(end))

    # -- modules and imports -------------------------------------------------------------

    def find_module(self, module: str, from_path: str) -> str | None:
        """The repository path of a Python module name, exact or by unique/closest suffix."""
        found = self.modules.get(module)
        if found is not None:
            return found
        candidates = self.module_suffixes.get(module)
        if not candidates:
            return None
        if "." not in module and module in sys.stdlib_module_names:
            return None  # "import json" means the standard library, not some utils/json.py
        if len(candidates) == 1:
            return self.modules[candidates[0]]
        key = (module, posixpath.dirname(from_path))
        if key not in self._closest:
            self._closest[key] = self._closest_module(candidates, from_path)
        return self._closest[key]

    def _closest_module(self, candidates: list[str], from_path: str) -> str:
        here = from_path.split("/")

        def closeness(name: str) -> tuple[int, str]:
            there = self.modules[name].split("/")
            shared = 0
            for left, right in zip(here, there):
                if left != right:
                    break
                shared += 1
            return (-shared, name)

        return self.modules[min(candidates, key=closeness)]

    def _absolute_module(self, path: str, module: str) -> str:
        """Turn a relative Python import ("..x") into an absolute dotted name."""
        if not module.startswith("."):
            return module
        package = self._packages.get(path)
        if package is None:
            parts = self.module_names[path].split(".") if path in self.module_names else python_module_name(path).split(".")
            if not path.endswith(("__init__.py", "__init__.pyi")):
                parts = parts[:-1]
            package = self._packages[path] = tuple(parts)
        # Files of one package share their relative imports' absolute names.
        key = (package, module)
        absolute = self._absolute.get(key)
        if absolute is None:
            dots = len(module) - len(module.lstrip("."))
            rest = module[dots:]
            parts = list(package)
            if dots > 1:
                parts = parts[: max(len(parts) - (dots - 1), 0)]
            absolute = self._absolute[key] = ".".join([*parts, *([rest] if rest else [])])
        return absolute

    # Files import the same modules and names over and over: one shared binding object
    # per distinct target saves most of the allocations.

    def _module_binding(self, module: str) -> _Module:
        binding = self._module_bindings.get(module)
        if binding is None:
            binding = self._module_bindings[module] = _Module(module)
        return binding

    def _symbol_binding(self, module: str, name: str) -> _Symbol:
        key = (module, name)
        binding = self._symbol_bindings.get(key)
        if binding is None:
            binding = self._symbol_bindings[key] = _Symbol(module, name)
        return binding

    def _js_target(self, path: str, module: str) -> str | None:
        """The repository file a relative JS/TS import specifier points at."""
        if not module.startswith("."):
            return None
        base = posixpath.normpath(posixpath.join(posixpath.dirname(path), module))
        stems = [base]
        if base.endswith((".js", ".mjs", ".cjs", ".jsx")):
            stems.append(base.rsplit(".", 1)[0])  # TypeScript ESM imports name the emitted file
        for stem in stems:
            candidates = [stem, *(stem + ext for ext in _JS_EXTENSIONS), *(f"{stem}/index{ext}" for ext in _JS_EXTENSIONS)]
            for candidate in candidates:
                if candidate in self.indexes:
                    return candidate
        return None

    def _go_directory(self, module: str) -> str | None:
        """The repository directory whose path is the longest tail of a Go import path."""
        best: str | None = None
        for directory in self.directories:
            if not directory:
                continue
            if (module == directory or module.endswith("/" + directory)) and (best is None or len(directory) > len(best)):
                best = directory
        return best

    def bindings(self, path: str) -> dict[str, _Module | _Symbol]:
        """The names ``path``'s imports bind (empty for a file not indexed)."""
        bound = self._bindings.get(path)
        return bound if bound is not None else self._bind_imports(path)[0]

    def star_imports(self, path: str) -> list[str]:
        """The repository modules ``path`` imports with ``*``."""
        stars = self._star_imports.get(path)
        return stars if stars is not None else self._bind_imports(path)[1]

    def imported_paths(self, path: str) -> set[str]:
        """The repository files ``path`` imports."""
        imported = self._imported_paths.get(path)
        return imported if imported is not None else self._bind_imports(path)[2]

    def _bind_imports(self, path: str) -> tuple[dict[str, _Module | _Symbol], list[str], set[str]]:
        bindings: dict[str, _Module | _Symbol] = {}
        stars: list[str] = []
        imported: set[str] = set()
        index = self.indexes.get(path)
        if index is None:
            return bindings, stars, imported
        language = index.language
        for record in index.imports:
            module = record.module
            if language == "python":
                absolute = self._absolute_module(path, module)
                target = self.find_module(absolute, path)
                if target:
                    imported.add(target)
                # Bindings to modules outside the repository are marked "ext:" once, here,
                # so that calls through them stop without another lookup.
                in_repository = target is not None or absolute in self.package_prefixes
                if record.name is None:
                    if record.alias:
                        bindings[record.alias] = self._module_binding(absolute if in_repository else f"ext:{absolute}")
                    else:
                        head = absolute.split(".")[0]
                        bindings.setdefault(head, self._module_binding(head if head in self.package_prefixes else f"ext:{head}"))
                elif record.name == "*":
                    if target:
                        stars.append(target)
                else:
                    module_text = absolute if in_repository else f"ext:{absolute}"
                    bindings[record.alias or record.name] = self._symbol_binding(module_text, record.name)
                    submodule = self.find_module(f"{absolute}.{record.name}", path) if absolute else None
                    if submodule:
                        imported.add(submodule)
            elif language == "go":
                directory = self._go_directory(module)
                local = record.alias or module.rstrip("/").split("/")[-1]
                if local in ("_", "."):
                    continue
                bindings[local] = self._module_binding(f"go:{directory}" if directory is not None else f"ext:{module}")
                if directory is not None:
                    imported.update(self.directories[directory])
            elif language == "java":
                name = record.name or module.split(".")[-1]
                bindings[record.alias or name] = self._symbol_binding(f"java:{module}", name)
            else:
                target_path = self._js_target(path, module)
                reference = f"file:{target_path}" if target_path else f"ext:{module}"
                if target_path:
                    imported.add(target_path)
                if record.name in (None, "*"):
                    if record.alias:
                        bindings[record.alias] = self._module_binding(reference)
                else:
                    bindings[record.alias or record.name] = self._symbol_binding(reference, record.name)
        self._bindings[path] = bindings
        self._star_imports[path] = stars
        self._imported_paths[path] = imported
        return bindings, stars, imported

    # -- definitions ---------------------------------------------------------------------

    def top_level(self, path: str, name: str) -> Definition | None:
        """A module-level definition of ``name`` in ``path``."""
        definition = self.definitions.get(path, {}).get(name)
        return definition if definition is not None and definition.parent is None else None

    def enclosing_class(self, path: str, scope: str | None) -> Definition | None:
        """The innermost class around the function ``scope``."""
        if not scope:
            return None
        key = (path, scope)
        if key not in self._enclosing_classes:
            self._enclosing_classes[key] = self._find_enclosing_class(path, scope)
        return self._enclosing_classes[key]

    def _find_enclosing_class(self, path: str, scope: str) -> Definition | None:
        table = self.definitions.get(path, {})
        parts = scope.split(".")
        for size in range(len(parts) - 1, 0, -1):
            candidate = table.get(".".join(parts[:size]))
            if candidate is not None and candidate.kind == "class":
                return candidate
        return None

    def class_member(self, path: str, cls: Definition, member: str, hops: int = 0) -> tuple[str, Definition] | None:
        """The definition ``member`` of class ``cls`` or of its repository bases."""
        found = self.definitions.get(path, {}).get(f"{cls.qualname}.{member}")
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
        """The repository classes a class derives from (external bases are skipped)."""
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
            if resolution.target is not None and resolution.target.kind == "class":
                found.append((resolution.path, resolution.target))
        return found

    # -- resolution ----------------------------------------------------------------------

    def resolve_name(self, path: str, parts: list[str], scope: str | None, hops: int = 0) -> _Resolution:
        """Resolve dotted ``parts`` as written in ``path`` inside function ``scope``."""
        if not parts or hops > _MAX_HOPS:
            return _UNRESOLVED
        head = parts[0]
        table = self.definitions.get(path, {})
        if head in _RECEIVERS_SELF or head == "super":
            cls = self.enclosing_class(path, scope)
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
        language = self.languages[path]
        if scope and len(parts) == 1:
            nested = table.get(f"{scope}.{head}")
            if nested is not None:
                return _Resolution(nested, path)
            if language in ("java", "go"):
                cls = self.enclosing_class(path, scope)
                member = self.class_member(path, cls, head) if cls is not None else None
                if member is not None:
                    return _Resolution(member[1], member[0])
        local = table.get(head)
        if local is not None and local.parent is None:
            return self._descend(path, local, parts[1:])
        binding = self.bindings(path).get(head)
        if binding is not None:
            return self._follow(path, binding, parts[1:], hops)
        if language == "java" and len(parts) == 2 and head[:1].islower():
            typed = self._java_field_member(path, head, parts[1])
            if typed is not None:
                return typed
        if language == "go":
            for sibling in self.directories[posixpath.dirname(path)]:
                found = self.top_level(sibling, head)
                if found is not None:
                    return self._descend(sibling, found, parts[1:])
            if len(parts) > 2 and self._go_chain_on_external_call(path, parts, scope, hops):
                return _STOP
        if language == "java" and head[:1].isupper():
            for sibling in self.directories[posixpath.dirname(path)]:
                found = self.top_level(sibling, head)
                if found is not None:
                    return self._descend(sibling, found, parts[1:])
        for star in self.star_imports(path):
            found = self.top_level(star, head)
            if found is not None:
                return self._descend(star, found, parts[1:])
        if language == "python" and head in _PYTHON_BUILTINS and len(parts) == 1:
            return _STOP
        return _UNRESOLVED

    def _go_chain_on_external_call(self, path: str, parts: list[str], scope: str | None, hops: int) -> bool:
        """Whether ``parts`` calls a method on the result of another call in the file that
        runs no repository function (``s.db.QueryRow(q).Scan(&id)``: ``Scan`` belongs to
        ``*sql.Row``, not to a repository type that happens to have a ``Scan``)."""
        calls = self._go_calls.get(path)
        if calls is None:
            calls = self._go_calls[path] = frozenset(call.callee for call in self.indexes[path].calls)
        prefix = parts[:-1]
        if ".".join(prefix) not in calls:
            return False
        inner = self.resolve_name(path, prefix, scope, hops + 1)
        return inner.target is None and (inner.stop or self.fallback(path, prefix) is None)

    def _java_field_member(self, path: str, field: str, member: str) -> _Resolution | None:
        """``field.member()`` on a Java field named after its type, as injected fields are
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
        for name, binding in sorted(self.bindings(path).items()):
            if name.endswith(suffix) and isinstance(binding, _Symbol) and binding.module.startswith("java:"):
                resolved = self._follow(path, binding, [], 0)
                if resolved.target is not None and resolved.target.kind == "class":
                    found.append((resolved.path, resolved.target))
        for sibling_path, cls in self._java_package_classes(posixpath.dirname(path)):
            if cls.name.endswith(suffix) and (sibling_path, cls) not in found:
                found.append((sibling_path, cls))
        members = [hit for hit in (self.class_member(cls_path, cls, member) for cls_path, cls in found) if hit is not None]
        if len(members) != 1:
            return None
        member_path, definition = members[0]
        owner = self.definitions.get(member_path, {}).get(definition.parent or "")
        if definition.body_start_line <= definition.end_line or _transactional(definition, owner):
            return _Resolution(definition, member_path)
        implementations = []
        for sub_path, sub in self._java_subclasses().get(owner.name if owner is not None else "", ()):
            hit = self.definitions.get(sub_path, {}).get(f"{sub.qualname}.{member}")
            if hit is not None:
                implementations.append((sub_path, hit))
        if len(implementations) == 1:
            return _Resolution(implementations[0][1], implementations[0][0])
        return _STOP  # abstract, or one line (the index cannot tell): no edge either way

    def _java_package_classes(self, directory: str) -> list[tuple[str, Definition]]:
        """The top-level Java classes of the files in ``directory``, in path order."""
        found = self._package_classes.get(directory)
        if found is None:
            found = self._package_classes[directory] = [
                (path, definition)
                for path in self.directories.get(directory, ())
                if self.languages.get(path) == "java"
                for definition in self.definitions.get(path, {}).values()
                if definition.kind == "class" and definition.parent is None
            ]
        return found

    def _java_subclasses(self) -> dict[str, list[tuple[str, Definition]]]:
        """Java classes by the simple name of each class or interface they extend or
        implement (type arguments dropped), in path order."""
        if self._subclasses is None:
            self._subclasses = defaultdict(list)
            for path in sorted(self.indexes):
                if self.languages[path] != "java":
                    continue
                for definition in self.indexes[path].definitions:
                    if definition.kind == "class":
                        for base in definition.bases:
                            self._subclasses[strip_arguments(base).rsplit(".", 1)[-1]].append((path, definition))
        return self._subclasses

    def _descend(self, path: str, definition: Definition, rest: list[str]) -> _Resolution:
        """Apply the remaining attribute names to a definition (class members only)."""
        if not rest:
            return _Resolution(definition, path)
        if definition.kind == "class" and len(rest) == 1:
            member = self.class_member(path, definition, rest[0])
            if member is not None:
                return _Resolution(member[1], member[0])
        return _STOP

    def _follow(self, path: str, binding: _Module | _Symbol, rest: list[str], hops: int) -> _Resolution:
        """Resolve the rest of a dotted name through an import binding."""
        if isinstance(binding, _Module):
            module = binding.module
            if module.startswith("ext:"):
                return _STOP
            if module.startswith("go:"):
                directory = module[3:]
                if not rest:
                    return _UNRESOLVED
                for file_path in self.directories.get(directory, ()):
                    found = self.top_level(file_path, rest[0])
                    if found is not None:
                        return self._descend(file_path, found, rest[1:])
                return _STOP
            if module.startswith("file:"):
                target = module[5:]
                if not rest:
                    return _UNRESOLVED
                found = self.top_level(target, rest[0])
                return self._descend(target, found, rest[1:]) if found is not None else _STOP
            return self._in_python_module(path, module, rest, hops)
        module, name = binding.module, binding.name
        if module.startswith("ext:"):
            return _STOP
        if module.startswith("file:"):
            target = module[5:]
            found = self.top_level(target, name)
            if found is None and name == "default":
                return _UNRESOLVED
            return self._descend(target, found, rest) if found is not None else _STOP
        if module.startswith("java:"):
            candidates = self.classes_by_name.get(name, [])
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
            module_path = self.find_module(module, path) if module else None
            if module_path is not None:
                found = self.top_level(module_path, name)
                if found is not None:
                    return self._descend(module_path, found, rest)
                inner = self.bindings(module_path).get(name)
                if inner is not None and hops < _MAX_HOPS:
                    return self._follow(module_path, inner, rest, hops + 1)
                for star in self.star_imports(module_path):
                    found = self.top_level(star, name)
                    if found is not None:
                        return self._descend(star, found, rest)
            submodule = self.find_module(dotted, path)
            if submodule is None:
                return _STOP if module_path is None else _UNRESOLVED
            return self._in_python_module(path, dotted, rest, hops)
        # ``dotted`` names a module; extend it with leading attributes that are submodules.
        module_path = self.find_module(dotted, path)
        remaining = list(rest)
        current = dotted
        while remaining:
            deeper = self.find_module(f"{current}.{remaining[0]}", path)
            if deeper is None:
                break
            current, module_path = f"{current}.{remaining[0]}", deeper
            remaining.pop(0)
        if module_path is None:
            return _STOP
        if not remaining:
            return _UNRESOLVED
        found = self.top_level(module_path, remaining[0])
        if found is not None:
            return self._descend(module_path, found, remaining[1:])
        inner = self.bindings(module_path).get(remaining[0])
        if inner is not None and hops < _MAX_HOPS:
            return self._follow(module_path, inner, remaining[1:], hops + 1)
        return _UNRESOLVED

    def fallback(self, path: str, parts: list[str]) -> tuple[str, Definition] | None:
        """A unique definition with the call's last name, preferring files this file imports."""
        name = parts[-1]
        if name in _COMMON_NAMES or (name.startswith("__") and name.endswith("__")):
            return None
        candidates = self.by_name.get(name, [])
        if len(parts) == 1:
            candidates = [item for item in candidates if item[1].parent is None]
        elif self.languages.get(path) == "python":
            # ``x.name()`` on an object runs a method: a module's function would have been
            # reached through the import (``user.set_password()`` is not the view
            # ``set_password``).
            candidates = [item for item in candidates if item[1].parent is not None]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            return None
        nearby = self.imported_paths(path) | {path}
        close = [item for item in candidates if item[0] in nearby]
        return close[0] if len(close) == 1 else None


def _transactional(method: Definition, owner: Definition | None) -> bool:
    """Whether a Java method or its class/interface carries a ``@Transactional``."""
    annotations = (*method.decorators, *(owner.decorators if owner is not None else ()))
    return any(strip_arguments(annotation).rsplit(".", 1)[-1] == "Transactional" for annotation in annotations)


def _callable_target(repository: _Repository, path: str, definition: Definition) -> tuple[str, Definition] | None:
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


def _file_edges(repository: _Repository, path: str, index: FileIndex) -> list[tuple[str, str, str, int, bool]]:
    """The resolved calls of one file as sorted, distinct (caller qualname, callee path,
    callee qualname, line, approximate) tuples.

    A callee text is resolved once per file and scope key: the enclosing function when the
    resolution can depend on it (``self.``/``super`` receivers, names nested in it, Java and
    Go), otherwise None, as the same text then resolves the same anywhere in the file.
    """
    table = repository.definitions.get(path, {})
    scope_bound = index.language in ("java", "go")
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
                bound = head in _RECEIVERS_SELF or head == "super" or f"{scope}.{head}" in table
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


_ROW_WIDTH = 5
_FlatRows = tuple[Any, ...]
"""A file's edges as one flat tuple, ``_ROW_WIDTH`` values per edge: caller qualname, callee
path, callee qualname, line, approximate; edges sorted and distinct. One tuple per file
rather than one per edge: the graph holds tens of thousands of edges, and every container
object costs the garbage collector a visit."""

_FileRows = tuple[tuple[str, _FlatRows], ...]
"""Every file with edges, in path order, with its flat rows: the graph's content, in the
plain form the graph cache stores."""


def _rows_of(flat: _FlatRows) -> Iterator[tuple[str, str, str, int, bool]]:
    """The (caller, callee path, callee, line, approximate) rows of a flat rows tuple."""
    values = iter(flat)
    return zip(values, values, values, values, values)


class CallGraph:
    """Directed call graph over every function of the indexed files.

    The graph keeps its edges as plain rows per file; :class:`Edge` objects (and the
    repository lookup tables behind :meth:`definition`, :meth:`resolve` and friends) are
    made on first use, so a caller that only asks for file neighbours or components never
    pays for them.
    """

    def __init__(
        self, indexes: Mapping[str, FileIndex], rows: _FileRows, repository: _Repository | None = None
    ) -> None:
        """A graph over ``indexes`` with the given rows (files in path order, rows sorted
        and distinct, as ``build`` makes them); use :meth:`build` to resolve a repository."""
        self._indexes = indexes
        self._rows = rows
        self._lookup = repository
        self._edges: tuple[Edge, ...] | None = None
        self._outgoing: dict[FunctionRef, tuple[Edge, ...]] = {}
        self._incoming: dict[FunctionRef, tuple[Edge, ...]] = {}
        neighbours: dict[str, set[str]] = defaultdict(set)
        for path, flat in rows:
            others = set(flat[1::_ROW_WIDTH])
            others.discard(path)
            if others:
                neighbours[path].update(others)
                for other in others:
                    neighbours[other].add(path)
        self._neighbours = {path: tuple(sorted(items)) for path, items in neighbours.items()}

    @classmethod
    def build(cls, indexes: Mapping[str, FileIndex], *, cache: CallGraphCache | None = None) -> CallGraph:
        """Resolve every call site of ``indexes`` into edges (unresolvable calls are dropped).

        With a ``cache``, a graph stored for the same files (paths, languages and content
        hashes) is loaded instead, and a newly built one is stored; either way the graph
        answers every query exactly as a fresh build would.
        """
        if cache is not None:
            cached = cache.get(indexes)
            if cached is not None:
                return cached
        with collection_paused():
            repository = _Repository(indexes)
            rows: list[tuple[str, _FlatRows]] = []
            for path in sorted(indexes):
                file_rows = _file_edges(repository, path, indexes[path])
                if file_rows:
                    rows.append((path, tuple(chain.from_iterable(file_rows))))
            graph = cls(indexes, tuple(rows), repository)
        if cache is not None:
            cache.put(indexes, graph)
        return graph

    @property
    def _repository(self) -> _Repository:
        """The lookup tables over the indexes, made on first use."""
        if self._lookup is None:
            with collection_paused():
                self._lookup = _Repository(self._indexes)
        return self._lookup

    def _materialize(self) -> tuple[Edge, ...]:
        """Make the Edge objects and the caller/callee tables from the rows (once)."""
        if self._edges is not None:
            return self._edges
        with collection_paused():
            refs: dict[tuple[str, str], FunctionRef] = {}
            edges: list[Edge] = []
            outgoing: dict[FunctionRef, tuple[Edge, ...]] = {}
            incoming: dict[FunctionRef, list[Edge]] = defaultdict(list)
            # Files in path order, each file's rows sorted: the edges come out sorted, and
            # a caller's edges are consecutive.
            for path, flat in self._rows:
                caller_ref: FunctionRef | None = None
                first = len(edges)
                for caller, callee_path, callee, line, approximate in _rows_of(flat):
                    if caller_ref is None or caller_ref.qualname != caller:
                        if caller_ref is not None:
                            outgoing[caller_ref] = tuple(edges[first:])
                            first = len(edges)
                        caller_ref = refs.get((path, caller))
                        if caller_ref is None:
                            caller_ref = refs[(path, caller)] = FunctionRef(path, caller)
                    callee_ref = refs.get((callee_path, callee))
                    if callee_ref is None:
                        callee_ref = refs[(callee_path, callee)] = FunctionRef(callee_path, callee)
                    edge = Edge(caller_ref, callee_ref, line, approximate)
                    edges.append(edge)
                    incoming[callee_ref].append(edge)
                if caller_ref is not None:
                    outgoing[caller_ref] = tuple(edges[first:])
            self._outgoing = outgoing
            self._incoming = {ref: tuple(items) for ref, items in incoming.items()}
            self._edges = tuple(edges)
        return self._edges

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Every edge, sorted."""
        return self._materialize()

    def callers(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """Edges into ``ref``, sorted by caller and line."""
        self._materialize()
        return self._incoming.get(ref, ())

    def callees(self, ref: FunctionRef) -> tuple[Edge, ...]:
        """Edges out of ``ref``, sorted by callee and line."""
        self._materialize()
        return self._outgoing.get(ref, ())

    def definition(self, ref: FunctionRef) -> Definition | None:
        """The index definition behind a reference (None for ``<module>``/``<main>``)."""
        return self._repository.definitions.get(ref.path, {}).get(ref.qualname)

    def paths(self, source: FunctionRef, target: FunctionRef, max_depth: int = 8) -> tuple[tuple[Edge, ...], ...]:
        """Simple call paths from ``source`` to ``target`` of at most ``max_depth`` edges.

        Between the same two functions only the first call site is used (exact edges before
        approximate ones). Shortest paths come first; at most ``MAX_PATHS`` are returned.
        """
        found: list[tuple[Edge, ...]] = []
        if max_depth < 1:
            return ()
        reaches_target = self._reverse_reach(target, max_depth)
        if source not in reaches_target:
            return ()
        stack: list[tuple[FunctionRef, tuple[Edge, ...], frozenset[FunctionRef]]] = [(source, (), frozenset({source}))]
        while stack and len(found) < MAX_PATHS * 4:
            node, trail, seen = stack.pop()
            for edge in reversed(self._first_edges(node)):
                nxt = edge.callee
                if nxt == target:
                    found.append((*trail, edge))
                    continue
                remaining = max_depth - len(trail) - 1
                if nxt in seen or remaining < 1 or reaches_target.get(nxt, max_depth + 1) > remaining:
                    continue
                stack.append((nxt, (*trail, edge), seen | {nxt}))
        found.sort(key=lambda path: (len(path), path))
        return tuple(found[:MAX_PATHS])

    def _first_edges(self, ref: FunctionRef) -> tuple[Edge, ...]:
        best: dict[FunctionRef, Edge] = {}
        for edge in self.callees(ref):
            current = best.get(edge.callee)
            if current is None or (edge.approximate, edge.line) < (current.approximate, current.line):
                best[edge.callee] = edge
        return tuple(best[key] for key in sorted(best))

    def _reverse_reach(self, target: FunctionRef, max_depth: int) -> dict[FunctionRef, int]:
        """Distance (in edges) from each function that can reach ``target``."""
        distance = {target: 0}
        queue = deque([target])
        while queue:
            node = queue.popleft()
            if distance[node] >= max_depth:
                continue
            for edge in self.callers(node):
                if edge.caller not in distance:
                    distance[edge.caller] = distance[node] + 1
                    queue.append(edge.caller)
        return distance

    def components(self) -> tuple[tuple[str, ...], ...]:
        """Connected components of the undirected file graph (every indexed file appears once).

        Each component is sorted; components are ordered by their first path.
        """
        parent = {path: path for path in self._indexes}

        def root(path: str) -> str:
            while parent[path] != path:
                parent[path] = parent[parent[path]]
                path = parent[path]
            return path

        for path, others in self._neighbours.items():
            for other in others:
                left, right = root(path), root(other)
                if left != right:
                    parent[max(left, right)] = min(left, right)
        groups: dict[str, list[str]] = defaultdict(list)
        for path in parent:
            groups[root(path)].append(path)
        return tuple(sorted(tuple(sorted(group)) for group in groups.values()))

    def file_neighbors(self, path: str) -> tuple[str, ...]:
        """Other files linked to ``path`` by any edge, in either direction, sorted."""
        return self._neighbours.get(path, ())

    def _refs_named(self, path: str, function: str) -> list[FunctionRef]:
        """References in ``path`` for a qualname, or for a bare name (all definitions with it)."""
        if function in (MODULE_FUNCTION, MAIN_FUNCTION):
            return [FunctionRef(path, function)]
        table = self._repository.definitions.get(path, {})
        if function in table:
            return [FunctionRef(path, function)]
        short = function.split(".")[-1]
        return [FunctionRef(path, qualname) for qualname, item in sorted(table.items()) if item.name == short]

    def plausible_edge(self, caller_path: str, caller_function: str, callee_path: str, callee_function: str) -> bool:
        """True when the graph has an edge (exact or approximate) from the caller to the callee.

        Functions may be given as qualified names ("Class.method") or bare names.
        """
        targets = set(self._refs_named(callee_path, callee_function))
        if not targets:
            return False
        for caller in self._refs_named(caller_path, caller_function):
            if any(edge.callee in targets for edge in self.callees(caller)):
                return True
        return False

    def resolve(self, path: str, name: str) -> FunctionRef | None:
        """Resolve a dotted name as written at module level of ``path`` (functions and classes).

        Falls back to a unique repository-wide definition with the same last name.
        """
        text = strip_arguments(name)
        if not text:
            return None
        parts = text.split(".")
        resolution = self._repository.resolve_name(path, parts, None)
        if resolution.target is not None:
            return FunctionRef(resolution.path, resolution.target.qualname)
        if resolution.stop:
            return None
        fallback = self._repository.fallback(path, parts)
        if fallback is None:
            classes = self._repository.classes_by_name.get(parts[-1], [])
            return FunctionRef(classes[0][0], classes[0][1].qualname) if len(classes) == 1 else None
        return FunctionRef(fallback[0], fallback[1].qualname)

    def class_member(self, ref: FunctionRef, member: str) -> FunctionRef | None:
        """The method ``member`` of the class ``ref``, looked up through repository bases."""
        cls = self.definition(ref)
        if cls is None or cls.kind != "class":
            return None
        found = self._repository.class_member(ref.path, cls, member)
        return FunctionRef(found[0], found[1].qualname) if found is not None else None

    def base_classes(self, ref: FunctionRef) -> tuple[FunctionRef, ...]:
        """The repository classes ``ref`` derives from, directly."""
        cls = self.definition(ref)
        if cls is None or cls.kind != "class":
            return ()
        return tuple(FunctionRef(path, item.qualname) for path, item in self._repository.base_classes(ref.path, cls))


def graph_cache_key(indexes: Mapping[str, FileIndex]) -> str:
    """A digest naming the graph of ``indexes``: over every file's path, language and
    content hash (an index is a function of its content and language, under one
    ``INDEX_VERSION``), the graph and index format versions, and the Python version (module
    resolution consults its standard-library module names)."""
    # Length-prefixed texts, not marshal: marshal's bytes depend on which equal strings are
    # one object (it writes a repeated object as a back-reference), so equal indexes could
    # get different keys.
    digest = hashlib.sha256(repr((GRAPH_VERSION, INDEX_VERSION, tuple(sys.version_info[:2]))).encode())
    for path in sorted(indexes):
        index = indexes[path]
        for text in (path, index.language, index.content_hash):
            data = text.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
    return digest.hexdigest()


class CallGraphCache:
    """On-disk cache of built call graphs, keyed by :func:`graph_cache_key`.

    Graphs live under ``directory / f"graph-v{GRAPH_VERSION}"``, one file per key holding
    the key and the graph's rows as marshalled plain tuples behind a magic header and a
    checksum, written atomically. An unreadable, corrupt, mismatched or malformed file
    counts as a miss (and is replaced by the next write); the ``MAX_GRAPHS`` most recently
    used files are kept. Failing to write is logged and otherwise ignored.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory) / f"graph-v{GRAPH_VERSION}"

    def graph_path(self, key: str) -> Path:
        """Where the graph with this key is stored."""
        return self.directory / f"{key}.graph"

    def get(self, indexes: Mapping[str, FileIndex]) -> CallGraph | None:
        """The stored graph of exactly these files, or None on a miss."""
        key = graph_cache_key(indexes)
        target = self.graph_path(key)
        try:
            with collection_paused():
                stored = unseal(_GRAPH_MAGIC, read_regular_file(target))
                rows = _checked_rows(stored, key, indexes)
                graph = CallGraph(indexes, rows) if rows is not None else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable call graph cache file %s: %s", target, error)
            return None
        if graph is None:
            logger.debug("ignoring malformed call graph cache file %s", target)
            return None
        try:
            os.utime(target)  # pruning keeps the most recently used graphs
        except OSError:
            pass
        return graph

    def put(self, indexes: Mapping[str, FileIndex], graph: CallGraph) -> None:
        """Store ``graph`` as the graph of ``indexes``, then delete graphs beyond ``MAX_GRAPHS``."""
        key = graph_cache_key(indexes)
        target = self.graph_path(key)
        if not write_atomically(target, seal(_GRAPH_MAGIC, (key, graph._rows))):
            return
        prune_least_recent(self.directory, "*.graph", MAX_GRAPHS, spare=target)


def _checked_rows(stored: object, key: str, indexes: Mapping[str, FileIndex]) -> _FileRows | None:
    """The rows of a stored ``(key, rows)`` value when it is one for ``key`` and every row
    is well formed for ``indexes`` (files in path order, five typed values per edge); else None."""
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key and isinstance(stored[1], tuple)):
        return None
    rows = stored[1]
    previous = ""
    for entry in rows:
        if not (isinstance(entry, tuple) and len(entry) == 2):
            return None
        path, flat = entry
        if not (isinstance(path, str) and path > previous and path in indexes and isinstance(flat, tuple)):
            return None
        if not flat or len(flat) % _ROW_WIDTH:
            return None
        for column, expected in enumerate((str, str, str, int, bool)):
            if set(map(type, flat[column::_ROW_WIDTH])) != {expected}:
                return None
        if not all(map(indexes.__contains__, flat[1::_ROW_WIDTH])):
            return None
        previous = path
    return rows


def _resolve_call(repository: _Repository, path: str, callee: str, scope: str | None) -> tuple[str, str, bool] | None:
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
    fallback = repository.fallback(path, parts)
    if fallback is None or _jvm_go_call_on_another_object(repository, path, parts, scope, fallback):
        return None
    return fallback[0], fallback[1].qualname, True


def _jvm_go_call_on_another_object(
    repository: _Repository, path: str, parts: list[str], scope: str | None, target: tuple[str, Definition]
) -> bool:
    """Java/Go: a name match from ``field.m()`` to the calling method itself is another
    object's ``m`` (an injected service's method of the same name), not recursion."""
    return (
        repository.languages.get(path) in ("java", "go")
        and len(parts) > 1
        and parts[0] not in _RECEIVERS_SELF
        and target[0] == path
        and target[1].qualname == scope
    )
