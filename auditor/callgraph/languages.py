"""What a call may mean in each language, as data: the resolver reads these rules, never a
language's name.

Every language shares scopes, imports and the unique-name fallback; a row here adds what
one language does beyond them (Java's injected fields, Go's packages, Python's builtins).
A language without a row gets :data:`DEFAULT_RULES`. How each language's import
statements bind names is in :mod:`auditor.callgraph.imports`.

A call only ever reaches a definition of its own language family (:func:`call_family`): a
Python ``qs.exclude()`` never runs a TypeScript class's ``exclude``, however unique the name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PYTHON_BUILTINS = frozenset(
    """
    abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod
    compile complex delattr dict dir divmod enumerate eval exec filter float format frozenset
    getattr globals hasattr hash help hex id input int isinstance issubclass iter len list
    locals map max memoryview min next object oct open ord pow print property range repr
    reversed round set setattr slice sorted staticmethod str sum super tuple type vars zip
    """.split()
)


@dataclass(frozen=True, slots=True)
class CallRules:
    """How one language's calls resolve beyond scopes, imports and the name fallback."""

    dotted_modules: bool = False
    """Files are modules named by their path (``a/b.py`` is ``a.b``), imported by that name."""

    implicit_members: bool = False
    """A bare name inside a method may be a member of its class (no ``this.`` needed), so a
    callee's meaning depends on the function it is called from."""

    typed_fields: bool = False
    """``field.m()`` resolves through the field's name to the class named after it, as
    injected fields are named (``deptService`` -> ``ISysDeptService``)."""

    package_names: Literal["", "all", "capitalised"] = ""
    """Which top-level names the files of one directory share without an import: ``all``
    (a Go package), ``capitalised`` (Java's same-package classes), or none."""

    stops_on_external_results: bool = False
    """A method called on another call's result that runs no repository function
    (``db.QueryRow(q).Scan``) belongs to that external result: no edge."""

    builtins: frozenset[str] = frozenset()
    """Bare names that are the language's own functions: a call to one stops."""

    attribute_calls_reach_methods: bool = False
    """The name fallback takes ``x.name()`` to methods only (a module's function would be
    reached through its import)."""

    receiver_calls_never_recurse: bool = False
    """A name match from ``field.m()`` to the calling method itself is another object's
    ``m`` (an injected service's method of the same name), never recursion."""

    @property
    def scope_bound(self) -> bool:
        """Whether one callee text may resolve differently in two functions of one file
        (beyond ``self.``/``super`` receivers and nested names, which every language has)."""
        return self.implicit_members or self.receiver_calls_never_recurse

    def shares_package_name(self, name: str) -> bool:
        """Whether ``name`` may be a top-level definition of another file of the directory."""
        return self.package_names == "all" or (self.package_names == "capitalised" and name[:1].isupper())


DEFAULT_RULES = CallRules()

RULES: dict[str, CallRules] = {
    "python": CallRules(dotted_modules=True, builtins=PYTHON_BUILTINS, attribute_calls_reach_methods=True),
    "java": CallRules(
        implicit_members=True, typed_fields=True, package_names="capitalised", receiver_calls_never_recurse=True
    ),
    "go": CallRules(
        implicit_members=True, package_names="all", stops_on_external_results=True, receiver_calls_never_recurse=True
    ),
}
"""Rules by language name (the index's names); JavaScript, TypeScript and TSX need none."""


def rules_for(language: str | None) -> CallRules:
    """The call rules of ``language`` (:data:`DEFAULT_RULES` for one without a row, or None)."""
    return RULES.get(language or "", DEFAULT_RULES)


CALL_FAMILIES: dict[str, str] = {"typescript": "javascript", "tsx": "javascript"}
"""Languages whose files call each other's definitions, by the family they belong to:
TypeScript and TSX import JavaScript modules (and each other) within one program. A
language without a row is a family of its own."""


def call_family(language: str | None) -> str:
    """The family of ``language``: the languages whose definitions its calls may reach."""
    return CALL_FAMILIES.get(language or "", language or "")
