"""Calls into Python's standard ``logging``: ``logger.error(...)`` on a module-level
``logger = logging.getLogger(...)``, or ``logging.warning(...)`` on the module itself.

Such a call builds a ``LogRecord`` from its arguments and hands it to the logger's
handlers (CPython Lib/logging/__init__.py ``Logger._log`` -> ``Logger.handle`` ->
``Logger.callHandlers``; the module-level ``logging.error`` & co. do the same on the root
logger): it reads the objects it is handed (``%``-formatting them), changes none of them,
and uses no ORM session of the caller. A session-scope analysis may take it as inert code
that stages nothing for a later commit, as long as it is handed no object that session
holds (whose ``__str__``/``__repr__`` could be the project's code). The same holds of a
method called on a string literal (``"failed: {}".format(e)``, the message such a call
is usually handed): it is ``str``'s own (CPython Objects/unicodeobject.c), and builds a
new string.

Inputs: one Python file's text and imports. Output: :func:`logging_names`,
:func:`is_logging_call` and :func:`is_string_literal_call`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from auditor.callgraph.names import strip_arguments
from auditor.index.model import Import

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"})
"""The ``Logger`` methods (and ``logging`` module functions) that emit one record."""

# ``name = factory(`` (``factory`` None for any other right-hand side) at module level.
_STRING_LITERAL = re.compile(r"""^[rRbBuUfF]{0,2}(["'])""")
_BINDING = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=]+)?=(?!=)\s*(?:([A-Za-z_][\w.]*)\s*\()?")


def logging_names(lines: Iterable[str], imports: Iterable[Import]) -> frozenset[str]:
    """The names of ``lines`` (a module) that are the ``logging`` module or a logger: the
    module imported whole (``import logging``, under its alias too) and each module-level
    name bound to ``logging.getLogger(...)`` (or a ``getLogger`` imported from it) by the
    only module-level binding of that name in the file (and declared ``global`` nowhere)."""
    imports = tuple(imports)
    module_aliases = {record.alias or "logging" for record in imports if record.module == "logging" and record.name is None}
    get_logger = {record.alias or "getLogger" for record in imports if record.module == "logging" and record.name == "getLogger"}
    factories = {f"{alias}.getLogger" for alias in module_aliases} | get_logger
    bound: dict[str, list[bool]] = {}
    for text in lines:
        declared = re.match(r"^\s*global\s+(.+)$", text)
        for name in re.findall(r"[A-Za-z_]\w*", declared.group(1)) if declared else ():
            bound.setdefault(name, []).append(False)  # a function may rebind it
        if text[:1] in ("", " ", "\t", "#"):
            continue  # indented (or blank): not a module-level binding
        head = _BINDING.match(text)
        if head is not None:
            bound.setdefault(head.group(1), []).append(head.group(2) in factories)
    loggers = {name for name, kinds in bound.items() if kinds == [True]}
    return frozenset(module_aliases | loggers) - {name for name, kinds in bound.items() if name in module_aliases}


def is_logging_call(callee: str, names: frozenset[str]) -> bool:
    """Whether a call written ``callee`` (``logger.error``) emits a log record on one of
    ``names`` (:func:`logging_names`)."""
    parts = strip_arguments(callee).split(".")
    return len(parts) == 2 and parts[0] in names and parts[1] in LOG_METHODS


def is_string_literal_call(callee: str) -> bool:
    """Whether a call written ``callee`` is a method of a string literal
    (``"failed: {}".format``)."""
    return _STRING_LITERAL.match(callee) is not None and "." in callee
