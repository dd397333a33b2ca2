"""Imports: what each file's import statements bind, per language, and where Python module
names lead.

Input: the indexes (``FileIndex`` per path) and their files by directory. Output: an
:class:`ImportTable` answering, per file, the names its imports bind (:class:`Module` or
:class:`Symbol`), the repository modules it star-imports and the repository files it
imports; and, for Python, the repository file of a dotted module name.

Bindings name where they lead in their module text: a dotted Python name; ``ext:`` for a
module outside the repository (calls through it stop there); ``go:<directory>`` for a Go
package in the repository; ``java:<package.Class>``; ``file:<path>`` for a JS/TS file.
Python module names come from paths ("app/services/orders.py" -> "app.services.orders");
an import that does not match exactly is matched by module-name suffix, because the scan
root is not always the import root.
"""

from __future__ import annotations

import posixpath
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from auditor.callgraph.languages import call_family, rules_for
from auditor.callgraph.names import python_module_name
from auditor.index.model import FileIndex, Import

JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")


@dataclass(frozen=True, slots=True)
class Module:
    """An import binding to a module (``import x.y as z``), by dotted name or JS/Go target."""

    module: str


@dataclass(frozen=True, slots=True)
class Symbol:
    """An import binding to a name inside a module (``from x import y``)."""

    module: str
    name: str


Binding = Module | Symbol


class ImportTable:
    """Module names and import bindings over all indexed files, each file's bindings made
    the first time a lookup needs them (a run that loads the call graph from the cache
    resolves names in a few files only)."""

    def __init__(self, indexes: Mapping[str, FileIndex], directories: Mapping[tuple[str, str], list[str]]) -> None:
        """Tables over ``indexes``; ``directories`` lists the indexed files by language
        family and directory (an import binds files of the importer's family only)."""
        self.indexes = indexes
        self.directories = directories
        self.modules: dict[str, str] = {}
        self.module_suffixes: dict[str, list[str]] = defaultdict(list)
        self.module_names: dict[str, str] = {}
        self.package_prefixes: set[str] = set()
        self._bindings: dict[str, dict[str, Binding]] = {}
        self._star_imports: dict[str, list[str]] = {}
        self._imported_paths: dict[str, set[str]] = {}
        self._closest: dict[tuple[str, str], str] = {}
        self._packages: dict[str, tuple[str, ...]] = {}
        self._absolute: dict[tuple[tuple[str, ...], str], str] = {}
        self._module_bindings: dict[str, Module] = {}
        self._symbol_bindings: dict[tuple[str, str], Symbol] = {}
        expanded: set[str] = set()  # leading parts of module names already in package_prefixes
        for path in sorted(indexes):
            if not rules_for(indexes[path].language).dotted_modules:
                continue
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

    def _module_binding(self, module: str) -> Module:
        binding = self._module_bindings.get(module)
        if binding is None:
            binding = self._module_bindings[module] = Module(module)
        return binding

    def _symbol_binding(self, module: str, name: str) -> Symbol:
        key = (module, name)
        binding = self._symbol_bindings.get(key)
        if binding is None:
            binding = self._symbol_bindings[key] = Symbol(module, name)
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
            candidates = [stem, *(stem + ext for ext in JS_EXTENSIONS), *(f"{stem}/index{ext}" for ext in JS_EXTENSIONS)]
            for candidate in candidates:
                if candidate in self.indexes:
                    return candidate
        return None

    def _go_directory(self, module: str, family: str) -> str | None:
        """The repository directory with files of ``family`` whose path is the longest tail
        of a Go import path."""
        best: str | None = None
        for directory_family, directory in self.directories:
            if not directory or directory_family != family:
                continue
            if (module == directory or module.endswith("/" + directory)) and (best is None or len(directory) > len(best)):
                best = directory
        return best

    def bindings(self, path: str) -> dict[str, Module | Symbol]:
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

    def _bind_imports(self, path: str) -> tuple[dict[str, Binding], list[str], set[str]]:
        bindings: dict[str, Binding] = {}
        stars: list[str] = []
        imported: set[str] = set()
        index = self.indexes.get(path)
        if index is None:
            return bindings, stars, imported
        bind = _BINDERS.get(index.language, ImportTable._bind_javascript)
        for record in index.imports:
            bind(self, path, record, bindings, stars, imported)
        self._bindings[path] = bindings
        self._star_imports[path] = stars
        self._imported_paths[path] = imported
        return bindings, stars, imported

    def _bind_python(
        self, path: str, record: Import, bindings: dict[str, Binding], stars: list[str], imported: set[str]
    ) -> None:
        """``import a.b``, ``import a.b as c``, ``from a import b [as c]``, ``from a import *``,
        relative or absolute."""
        absolute = self._absolute_module(path, record.module)
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

    def _bind_go(
        self, path: str, record: Import, bindings: dict[str, Binding], stars: list[str], imported: set[str]
    ) -> None:
        """``import "a/b"`` or ``import c "a/b"``: the package's name (or alias) binds the
        repository directory the path ends with, else the external package."""
        module = record.module
        family = call_family(self.indexes[path].language)
        directory = self._go_directory(module, family)
        local = record.alias or module.rstrip("/").split("/")[-1]
        if local in ("_", "."):
            return
        bindings[local] = self._module_binding(f"go:{directory}" if directory is not None else f"ext:{module}")
        if directory is not None:
            imported.update(self.directories[(family, directory)])

    def _bind_java(
        self, path: str, record: Import, bindings: dict[str, Binding], stars: list[str], imported: set[str]
    ) -> None:
        """``import a.b.C``: the class's simple name binds the class of that package."""
        name = record.name or record.module.split(".")[-1]
        bindings[record.alias or name] = self._symbol_binding(f"java:{record.module}", name)

    def _bind_javascript(
        self, path: str, record: Import, bindings: dict[str, Binding], stars: list[str], imported: set[str]
    ) -> None:
        """ES imports and ``require``: a relative specifier binds the repository file it
        names, anything else the external package."""
        module = record.module
        target_path = self._js_target(path, module)
        reference = f"file:{target_path}" if target_path else f"ext:{module}"
        if target_path:
            imported.add(target_path)
        if record.name in (None, "*"):
            if record.alias:
                bindings[record.alias] = self._module_binding(reference)
        else:
            bindings[record.alias or record.name] = self._symbol_binding(reference, record.name)


_Binder = Callable[[ImportTable, str, Import, dict[str, Binding], list[str], set[str]], None]

_BINDERS: dict[str, _Binder] = {
    "python": ImportTable._bind_python,
    "go": ImportTable._bind_go,
    "java": ImportTable._bind_java,
}
"""How one import record binds names, by language; JavaScript, TypeScript and TSX (and any
language not listed) bind the ES way."""
