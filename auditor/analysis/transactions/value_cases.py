"""Value cases: arms guarded by tests of one value against different string literals never
both run on one path, since a value equals at most one literal.

onadata's ``process_label_request`` posts a label when ``request.method == "POST"`` and
deletes one when ``request.method == "DELETE"``, in two separate ``if`` statements; arches'
management commands dispatch on ``options["operation"] == "register"`` / ``"unregister"``.
The path walker takes the ``off`` sets this module returns, one per literal (the tests
against the other literals false) and one with every test false.

Only a value nothing can change between the tests is split:

- ``request.method`` (or ``self.request.method``): Django's ``HttpRequest.method`` is set
  once per request (django/core/handlers/wsgi.py ``WSGIRequest.__init__``; DRF's ``Request``
  hands it on), unless the function rebinds ``request`` or assigns the attribute;
- a parameter of the function, or a string-keyed item of one (``options["operation"]`` of
  ``**options``), that the body never rebinds in any form (``=``, augmented, annotated,
  tuple targets, ``:=``, ``for``/``with``/``except ... as`` targets, ``global``/``nonlocal``,
  ``del``) and, for an item, never changes (an item assignment, ``update``/``pop``/
  ``setdefault``/``clear``, ``del``) nor hands bare to a call (which may change it).

Any other name (a module global a callee may rebind, an attribute a method may set) is left
alone. Input: the body's source and the function's parameter names. Output:
:func:`value_cases`, and :func:`parameter_names` to read those names.
"""

from __future__ import annotations

import re
from collections import defaultdict

from auditor.analysis.entrypoints import split_arguments
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.scanning import def_parameters
from auditor.index.model import Definition

_EQUALS_LITERAL = re.compile(
    rb"""(?<![\w.])((?:self\.)?[A-Za-z_][\w.]*(?:\[(?:"[^"\\\n]*"|'[^'\\\n]*')\])?)\s*==\s*(?:"([^"\\\n]*)"|'([^'\\\n]*)')"""
)  # ``NAME == "x"``, ``options["operation"] == "x"``
_MAX_VALUES = 6
_REQUEST_METHOD = re.compile(rb"^(?:self\.)?request\.method$")
_ITEM = re.compile(rb"^([A-Za-z_]\w*)\[")


def parameter_names(facts: FileFacts | None, definition: Definition | None) -> frozenset[str]:
    """The names a function's ``def`` binds as parameters (``*args``/``**kwargs`` too)."""
    if facts is None or definition is None:
        return frozenset()
    header = "\n".join(facts.line_text(number) for number in range(definition.start_line, definition.body_start_line))
    names = set()
    for parameter in split_arguments(def_parameters(header)):
        name = parameter.split("=", 1)[0].split(":", 1)[0].strip().lstrip("*").strip()
        if name.isidentifier():
            names.add(name)
    return frozenset(names)


def value_cases(off: frozenset[str], source: bytes, parameters: frozenset[str]) -> tuple[frozenset[str], ...]:
    """``off`` as given, or, when the body tests one stable value (module docstring) against
    two or more string literals, once per literal with the tests against the others false,
    and once with all false. The value tested against the most literals is split (up to
    :data:`_MAX_VALUES` of them)."""
    if b"==" not in source:
        return (off,)
    tests: dict[bytes, dict[bytes, set[str]]] = defaultdict(lambda: defaultdict(set))
    for match in _EQUALS_LITERAL.finditer(source):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        tests[match.group(1)][value].add(match.group(0).decode("utf-8", "replace"))
    stable = {name: values for name, values in tests.items() if _stable(name, source, parameters)}
    if not stable:
        return (off,)
    name = max(sorted(stable), key=lambda found: len(stable[found]))
    values = stable[name]
    if len(values) < 2 or len(values) > _MAX_VALUES:
        return (off,)
    every = frozenset(text for texts in values.values() for text in texts)
    cases = [off | (every - values[value]) for value in sorted(values)]
    return (*cases, off | every)


def _stable(name: bytes, source: bytes, parameters: frozenset[str]) -> bool:
    """Whether the value ``name`` reads cannot change between two tests in ``source``."""
    if _REQUEST_METHOD.match(name):
        return not _rebinds(b"request", source) and re.search(rb"\brequest\.method\s*=(?!=)", source) is None
    item = _ITEM.match(name)
    root = item.group(1) if item is not None else name
    if root.decode() not in parameters or b"." in root or _rebinds(root, source):
        return False
    if item is None:
        return True
    escaped = re.escape(root)
    changes = rb"(?<![\w.])" + escaped + rb"\s*\[[^\]\n]*\]\s*(?:[-+*/%&|^@]|<<|>>|//|\*\*)?=(?!=)"
    changes += rb"|(?<![\w.])" + escaped + rb"\.(?:pop|popitem|update|setdefault|clear)\("
    changes += rb"|\bdel\s+" + escaped + rb"\[" + rb"|[(,]\s*" + escaped + rb"\s*[,)]"
    return re.search(changes, source) is None


def _rebinds(name: bytes, source: bytes) -> bool:
    """Whether ``source`` binds ``name`` anywhere, in any form of binding."""
    escaped = re.escape(name)
    bare = rb"(?<![\w.])" + escaped + rb"\b"
    forms = (
        bare + rb"\s*(?:[-+*/%&|^@]|<<|>>|//|\*\*)?=(?!=)",  # = and augmented assignment
        bare + rb"\s*:[^=\n]*=(?!=)",  # annotated
        bare + rb"\s*:=",  # walrus
        bare + rb"\s*,[^\n=]*=(?!=)",  # first of a tuple target
        rb",\s*" + escaped + rb"\s*(?:,[^\n=]*)?\)?\s*=(?!=)",  # later in a tuple target
        rb"\bas\s+\(?[^\n:]*" + bare,  # with/except ... as
        rb"\bfor\s+[^\n]*?" + bare + rb"[^\n]*?\bin\b",  # a loop target
        rb"\b(?:global|nonlocal|del)\s+[^\n]*" + bare,
    )
    return any(re.search(form, source) for form in forms)
