"""Sibling Python ``if`` statements whose tests are each other's negation, of a local name
nothing touches between them.

``if empty: A`` followed, in the same block, by ``if not empty: B`` runs A or B, never both,
when ``empty`` is a local of the function (a parameter, or bound in its body; never declared
``global`` or ``nonlocal``, nor ``nonlocal`` in a nested function) and the name does not occur
at all in the first arm or in the statements between the two ``if``: no rebinding, ``del``,
method call, subscript write or hand-off to a call can then have changed what the second test
reads. :mod:`.paths` counts the heavier of the two arms on a path, not their sum.

Kept narrow so it cannot join arms that may both run: a test is read only as ``x``, ``not x``,
``x is None`` or ``x is not None`` with ``x`` a bare name (an attribute may be set by any call,
a property may read the database); a truth test only of a name every binding of which is a
literal, a ``not`` or a comparison (a list's truth may change through another name for it:
:func:`.paths._bool_valued`); and only in Python (Go's ``if v := f(); v`` binds in the
statement itself; JavaScript's ``== null`` and ``=== undefined`` are not negations of each other).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tree_sitter import Node

_NAME = r"[A-Za-z_]\w*"
_NOT = re.compile(rf"not\s+({_NAME})")
_NONE = re.compile(rf"({_NAME})\s+(is\s+not|is)\s+None")
_NAME_ONLY = re.compile(_NAME)
_CONSTANTS = frozenset({"True", "False", "None"})
_DECLARATIONS = frozenset({"global_statement", "nonlocal_statement"})


@dataclass(frozen=True)
class Test:
    """What a test asks of its name (``truth`` or ``none``) and whether it asks it positively."""

    subject: str
    question: str
    positive: bool

    @classmethod
    def of(cls, condition: Node | None) -> Test | None:
        if condition is None or condition.text is None:
            return None
        text = " ".join(condition.text.decode("utf-8", "replace").split())
        while text.startswith("(") and text.endswith(")"):
            text = text[1:-1].strip()
        if (negated := _NOT.fullmatch(text)) is not None and negated.group(1) not in _CONSTANTS:
            return cls(negated.group(1), "truth", positive=False)
        if (none := _NONE.fullmatch(text)) is not None and none.group(1) not in _CONSTANTS:
            return cls(none.group(1), "none", positive=none.group(2) == "is")
        if _NAME_ONLY.fullmatch(text) and text not in _CONSTANTS:
            return cls(text, "truth", positive=True)
        return None

    def negates(self, other: Test) -> bool:
        return (self.subject, self.question) == (other.subject, other.question) and self.positive != other.positive


def python_if(statement: Node) -> bool:
    """Whether an ``if_statement`` node is Python's (its header ends in a ``:`` token)."""
    return any(child.type == ":" for child in statement.children)


def untouched(nodes: Iterable[Node], name: str) -> bool:
    """Whether ``name`` occurs nowhere in ``nodes`` (nested functions included: a closure
    called later may change it)."""
    pending = list(nodes)
    while pending:
        node = pending.pop()
        if node.type == "identifier" and node.text is not None and node.text.decode("utf-8", "replace") == name:
            return False
        pending.extend(node.children)
    return True


def local_of(function: Node | None, name: str, bound: Iterable[str]) -> bool:
    """Whether ``name`` is a local of the function whose body is ``function``: among
    ``bound`` (the names its body binds or its parameters) and declared ``global`` or
    ``nonlocal`` nowhere in it (a nested function's ``nonlocal`` included)."""
    if function is None or name not in set(bound):
        return False
    pending = [function]
    while pending:
        node = pending.pop()
        if node.type in _DECLARATIONS and not untouched(node.named_children, name):
            return False
        pending.extend(node.named_children)
    return True
