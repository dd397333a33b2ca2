"""Sibling ``if`` statements whose tests are each other's negation.

``if obj.is_draft: A`` followed, in the same block, by ``if not obj.is_draft: B`` runs A or
B, never both, as long as nothing between the two tests (the first arm included) may change
what they read. :mod:`.paths` then counts the heavier of the two arms on a path, not their
sum.

What may change a test's value: a binding of its subject or of an object it is read from;
for a dotted subject, a method call on such an object or handing one to a call (the callee
may set the attribute, so most tests of ``self.x`` stay summed); for a truth test, also a
call on the subject itself or handing it on (a collection's size). A test is read only in
these shapes, with a dotted name as its subject: ``x`` / ``not x`` / ``!x``; ``x is None`` /
``x is not None`` (``== null`` / ``!= null``, ``=== null``, ``== nil``); ``x == literal`` /
``x != literal``. Anything else (a call, an ``and``, a comparison of two names) is not
matched, so the walk sums the arms as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tree_sitter import Node

_SUBJECT = r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*"
_LITERAL = r"(?:-?\d+(?:\.\d+)?|'[^'\\]*'|\"[^\"\\]*\"|True|False|true|false)"
_NOT = re.compile(rf"(?:not\s+|!\s*)({_SUBJECT})")
_NONE = re.compile(rf"({_SUBJECT})\s+(is\s+not|is|===?|!==?)\s+(?:None|null|nil|undefined)")
_EQUALS = re.compile(rf"({_SUBJECT})\s*(==|!=)\s*({_LITERAL})")
_BARE = re.compile(_SUBJECT)
_TARGETS = {
    "assignment": "left", "augmented_assignment": "left", "for_statement": "left", "for_in_clause": "left",
    "named_expression": "name", "as_pattern_target": None, "assignment_expression": "left",
    "assignment_statement": "left", "short_var_declaration": "left", "for_in_statement": "left",
    "update_expression": "argument",
}  # fmt: skip
_CALLS = frozenset({"call", "call_expression", "method_invocation"})


@dataclass(frozen=True)
class Test:
    """What a test asks of its subject (``truth``, ``none`` or ``== literal``) and whether
    it asks it positively."""

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
        if (negated := _NOT.fullmatch(text)) is not None:
            return cls(negated.group(1), "truth", positive=False)
        if (none := _NONE.fullmatch(text)) is not None:
            operator = none.group(2)
            return cls(none.group(1), "none", positive=operator in ("is", "==", "==="))
        if (equals := _EQUALS.fullmatch(text)) is not None:
            return cls(equals.group(1), f"== {equals.group(3)}", positive=equals.group(2) == "==")
        if _BARE.fullmatch(text) and text not in ("True", "False", "true", "false", "None", "null"):
            return cls(text, "truth", positive=True)
        return None

    def negates(self, other: Test) -> bool:
        return (self.subject, self.question) == (other.subject, other.question) and self.positive != other.positive


def changes(nodes: Iterable[Node], test: Test, nested: frozenset[str]) -> bool:
    """Whether any of ``nodes`` (nested functions aside) may change what the test reads:
    it binds the subject or an object it is read from (``obj = ...`` under a test of
    ``obj.flag``), or, for a dotted subject, calls a method on such an object or hands one
    to a call (``self.finish()``, ``charge(order)`` under a test of ``order.paid``: the
    callee may set the attribute). A truth test also reads a collection's size, so a call
    on the subject itself or handing it on (``items.append(x)``, ``fill(items)``) counts."""
    parts = test.subject.split(".")
    owners = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
    handed = owners if test.question == "truth" else owners - {test.subject}
    pending = list(nodes)
    while pending:
        node = pending.pop()
        if node.type in _TARGETS:
            field = _TARGETS[node.type]
            target = node.child_by_field_name(field) if field is not None else node
            if target is not None and _binds(target, owners):
                return True
        if node.type in _CALLS and handed and (_receiver(node) in handed or handed & _bare_arguments(node)):
            return True
        if node.type not in nested:
            pending.extend(node.named_children)
    return False


def _bare_arguments(call: Node) -> set[str]:
    arguments = call.child_by_field_name("arguments")
    found: set[str] = set()
    for argument in arguments.named_children if arguments is not None else ():
        value = argument.child_by_field_name("value") if argument.type in ("keyword_argument", "pair") else argument
        if value is not None and value.text is not None:
            found.add(" ".join(value.text.decode("utf-8", "replace").split()))
    return found


def _binds(target: Node, owners: set[str]) -> bool:
    pending = [target]
    while pending:
        part = pending.pop()
        text = " ".join(part.text.decode("utf-8", "replace").split()) if part.text is not None else ""
        if text in owners:
            return True
        if part.type not in ("attribute", "subscript", "member_expression", "field_expression", "field_access"):
            pending.extend(part.named_children)
    return False


def _receiver(call: Node) -> str | None:
    """``a.b`` of a call ``a.b.method(...)``; None for a plain function call."""
    if call.type == "method_invocation":  # Java: the object is the call's own field
        receiver = call.child_by_field_name("object")
    else:
        function = call.child_by_field_name("function")
        receiver = None
        if function is not None:
            receiver = function.child_by_field_name("object") or function.child_by_field_name("operand")
    if receiver is None or receiver.text is None:
        return None
    return " ".join(receiver.text.decode("utf-8", "replace").split())
