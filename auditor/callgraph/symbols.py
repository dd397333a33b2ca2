"""Symbol tables: what the indexed files define and where, looked up by name alone.

Input: ``FileIndex`` objects keyed by repository path. Output: a :class:`Symbols` whose
tables (definitions per file; functions, classes and files per language family and name or
directory; import bindings) and lookups need no name resolution: a file's top-level names,
the class around a function, a package's classes, a language's subclasses by base name, and
the unique-name fallback. :class:`~auditor.callgraph.resolve.Repository` resolves callee
text over them.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import NamedTuple

from auditor.callgraph.imports import ImportTable
from auditor.callgraph.languages import call_family, rules_for
from auditor.callgraph.names import strip_arguments
from auditor.index.model import Definition, FileIndex
from auditor.walk.classify import is_test_only_path

_FUNCTION_KINDS = ("function", "method")

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


# ``Model.add_to_class(name, value)``: Django's ``ModelBase.add_to_class``
# (django/db/models/base.py) hands a value with ``contribute_to_class`` (a field, a manager)
# to it and sets anything else on the class with ``setattr(cls, name, value)``: a plain
# function becomes a method of the model, run by ``instance.name(...)``.
ATTACH_CALL = "add_to_class"
_STRING_ARGUMENT = re.compile(r"""^[rRuU]?(['"])([A-Za-z_]\w*)\1$""")
_REFERENCE_ARGUMENT = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class Attachment(NamedTuple):
    """A function set on a class as the method ``name`` by ``receiver.add_to_class(name,
    value)`` written in function ``scope`` (None: at module level); ``value`` is the
    function's dotted name as written there."""

    receiver: str
    name: str
    value: str
    scope: str | None


def attachments(index: FileIndex) -> tuple[Attachment, ...]:
    """The ``add_to_class`` calls of a Python file whose name is a string literal and whose
    value is a plain (dotted) reference, in call order. Keyword (``name=``, ``value=``) and
    positional arguments are read alike; a value that is itself a call (a factory's result)
    or a lambda is not followed."""
    if index.language != "python":
        return ()
    found: list[Attachment] = []
    for call in index.calls:
        if call.name != ATTACH_CALL or "." not in call.callee:
            continue
        arguments = _attach_arguments(call.arguments)
        if arguments is not None:
            found.append(Attachment(call.callee.rsplit(".", 1)[0], arguments[0], arguments[1], call.enclosing))
    return tuple(found)


def _attach_arguments(text: str) -> tuple[str, str] | None:
    """``(name, value)`` of ``add_to_class``'s argument text, or None when either is not
    written plainly (commas inside brackets or strings mean a value this does not follow)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if len(parts) != 2:
        return None
    positional: list[str] = []
    keywords: dict[str, str] = {}
    for part in parts:
        key, equals, value = part.partition("=")
        if equals and _REFERENCE_ARGUMENT.match(key.strip()):
            keywords[key.strip()] = value.strip()
        elif keywords:
            return None  # a positional argument after a keyword one: not valid Python
        else:
            positional.append(part)
    name = keywords.get("name", positional[0] if positional else "")
    value = keywords.get("value", positional[1] if len(positional) > 1 else "")
    named = _STRING_ARGUMENT.match(name)
    if named is None or not _REFERENCE_ARGUMENT.match(value):
        return None
    return named.group(2), value


def _accessor_of_property(definition: Definition) -> bool:
    """Whether ``definition`` is a property's ``@name.setter`` or ``@name.deleter``."""
    return any(decorator in (f"{definition.name}.setter", f"{definition.name}.deleter") for decorator in definition.decorators)


class Symbols:
    """Lookup tables over all indexed files, and the lookups that take a name as written."""

    def __init__(self, indexes: Mapping[str, FileIndex]) -> None:
        """Tables over ``indexes``: definitions by file; functions, classes and files by
        language family and name or directory; import bindings (in ``imports``) are made
        per file on first use."""
        self.indexes = indexes
        self.definitions: dict[str, dict[str, Definition]] = {}
        self.families: dict[str, str] = {path: call_family(index.language) for path, index in indexes.items()}
        self.by_name: dict[tuple[str, str], list[tuple[str, Definition]]] = defaultdict(list)
        """Functions and methods by (family, name), in path order."""
        self.classes_by_name: dict[tuple[str, str], list[tuple[str, Definition]]] = defaultdict(list)
        """Classes by (family, name), in path order."""
        self.directories: dict[tuple[str, str], list[str]] = defaultdict(list)
        """Files by (family, directory), in path order."""
        self.languages: dict[str, str] = {path: index.language for path, index in indexes.items()}
        self._enclosing_classes: dict[tuple[str, str], Definition | None] = {}
        self._directory_classes: dict[tuple[str, str], list[tuple[str, Definition]]] = {}
        self._subclasses_by_language: dict[str, dict[str, list[tuple[str, Definition]]]] = {}
        self._calls: dict[str, frozenset[str]] = {}
        self.attachments: list[tuple[str, Attachment]] = []
        """Every file's ``add_to_class`` attachments (:func:`attachments`), in path order."""
        self.attached_by_name: dict[tuple[str, str], list[tuple[str, Definition]]] = {}
        """The functions attached as methods, by (family, method name): filled by the
        :class:`~auditor.callgraph.resolve.Repository`, which resolves the values."""
        for path in sorted(indexes):
            index = indexes[path]
            family = self.families[path]
            table: dict[str, Definition] = {}
            rebinds = index.language == "python"
            for definition in index.definitions:
                # A Python name is bound to its last definition (a later ``def`` replaces an
                # earlier one), except a property's setter or deleter, which keeps the getter
                # that reading the attribute runs; in the other languages a repeated name is an
                # overload.
                if rebinds and not _accessor_of_property(definition):
                    table[definition.qualname] = definition
                else:
                    table.setdefault(definition.qualname, definition)
                if definition.kind in _FUNCTION_KINDS:
                    self.by_name[(family, definition.name)].append((path, definition))
                elif definition.kind == "class":
                    self.classes_by_name[(family, definition.name)].append((path, definition))
            self.definitions[path] = table
            self.attachments.extend((path, attachment) for attachment in attachments(index))
            self.directories[(family, posixpath.dirname(path))].append(path)
        self.imports = ImportTable(indexes, self.directories)

    # -- files ---------------------------------------------------------------------------

    def sibling_files(self, path: str) -> list[str]:
        """The files of ``path``'s directory and language family (``path`` among them)."""
        return self.directories.get((self.families.get(path, ""), posixpath.dirname(path)), [])

    def top_level(self, path: str, name: str) -> Definition | None:
        """A module-level definition of ``name`` in ``path``."""
        definition = self.definitions.get(path, {}).get(name)
        return definition if definition is not None and definition.parent is None else None

    def callee_texts(self, path: str) -> frozenset[str]:
        """The distinct callee texts of ``path``'s call sites."""
        calls = self._calls.get(path)
        if calls is None:
            calls = self._calls[path] = frozenset(call.callee for call in self.indexes[path].calls)
        return calls

    # -- classes -------------------------------------------------------------------------

    def classes_named(self, path: str, name: str) -> list[tuple[str, Definition]]:
        """The classes named ``name`` that a call written in ``path`` may reach (those of
        its language family), in path order."""
        return self.classes_by_name.get((self.families.get(path, ""), name), [])

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

    def package_classes(self, path: str, language: str) -> list[tuple[str, Definition]]:
        """The top-level classes of the ``language`` files in ``path``'s directory, in path order."""
        key = (posixpath.dirname(path), language)
        found = self._directory_classes.get(key)
        if found is None:
            found = self._directory_classes[key] = [
                (sibling, definition)
                for sibling in self.sibling_files(path)
                if self.languages.get(sibling) == language
                for definition in self.definitions.get(sibling, {}).values()
                if definition.kind == "class" and definition.parent is None
            ]
        return found

    def subclasses(self, language: str) -> dict[str, list[tuple[str, Definition]]]:
        """The ``language`` classes by the simple name of each class or interface they
        extend or implement (type arguments dropped), in path order."""
        found = self._subclasses_by_language.get(language)
        if found is None:
            found = self._subclasses_by_language[language] = defaultdict(list)
            for path in sorted(self.indexes):
                if self.languages[path] != language:
                    continue
                for definition in self.indexes[path].definitions:
                    if definition.kind == "class":
                        for base in definition.bases:
                            found[strip_arguments(base).rsplit(".", 1)[-1]].append((path, definition))
        return found

    # -- by name alone -------------------------------------------------------------------

    def fallback(self, path: str, parts: list[str]) -> tuple[str, Definition] | None:
        """A unique definition of ``path``'s language family with the call's last name,
        preferring files this file imports, and never one in test code for a call outside
        it. A function attached to a class under that name
        (``add_to_class``) is a method candidate for ``x.name()``."""
        name = parts[-1]
        if name in _COMMON_NAMES or (name.startswith("__") and name.endswith("__")):
            return None
        key = (self.families.get(path, ""), name)
        candidates = self.by_name.get(key, [])
        if len(parts) == 1:
            candidates = [item for item in candidates if item[1].parent is None]
        elif rules_for(self.languages.get(path)).attribute_calls_reach_methods:
            # ``x.name()`` on an object runs a method: a module's function would have been
            # reached through the import (``user.set_password()`` is not the view
            # ``set_password``).
            candidates = [item for item in candidates if item[1].parent is not None]
            candidates += [item for item in self.attached_by_name.get(key, ()) if item not in candidates]
        if not is_test_only_path(path):
            # Production code never imports a test module: a test helper's method of that
            # name is not what a production call runs (zeeguu's ``client.translate`` is not
            # the test rule's ``ExerciseSourceRule.translate``).
            candidates = [item for item in candidates if not is_test_only_path(item[0])]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            return None
        nearby = self.imports.imported_paths(path) | {path}
        close = [item for item in candidates if item[0] in nearby]
        return close[0] if len(close) == 1 else None
