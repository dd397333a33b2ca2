"""Calls that always raise ``TypeError``: a Python function called with more positional
arguments than it takes, or with a keyword it has no parameter for.

Binding a call's arguments to a ``def``'s parameters raises ``TypeError`` before the body
runs when "there are more positional arguments than there are formal parameter slots" and
no ``*identifier`` takes the excess, or a keyword names no parameter and no
``**identifier`` takes it (language reference, "Calls"). So nothing in the callee runs on
such a call, and the statement ends the path. zeeguu's ``get_notification_for_user`` calls
the view ``get_bookmarks_recommended_for_practice(1)``, which takes no parameter: its
commits never run there.

The check is kept to what the call graph proves: a direct, non-approximate edge to a
module-level function of the same name that its module defines once (the later of two
``def``s is what the name holds; never a method, whose ``self`` a
``staticmethod``/``classmethod`` would change, nor a class), with the whole argument text
read and no ``*``/``**`` unpacking. A decorator may change what the name calls, so every
decorator of the callee must hand the call on unchanged: a route registration called on an
object that returns the function (Flask's ``Scaffold.route`` returns ``f``:
flask/sansio/scaffold.py; FastAPI's ``APIRouter.api_route`` returns ``func``: fastapi/routing.py),
``functools.wraps``/``lru_cache``/``cache`` (named through ``functools`` or imported from it), ``contextlib.contextmanager`` (its helper calls
``func(*args, **kwds)`` at once: contextlib.py ``_GeneratorContextManagerBase.__init__``), or a repository decorator whose wrapper takes ``(*args, **kwargs)``
and calls the function with them. and never rewrites them. Anything else (``click.command``, whose
object takes an argv list; a project's own ``@cache``) leaves the call alone, as do a name
the module also binds by assignment or import (``slow = cached(slow)``) and arguments that
hold a comment, a ``lambda`` or a comprehension (their pieces are not the arguments).

Inputs: the call graph, the per-file facts and :class:`~.arguments.Arguments`. Output:
:meth:`Arity.rejects` and :meth:`Arity.raising_lines`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from auditor.callgraph.graph import CallGraph, Edge, FunctionRef
from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.arguments import Arguments
from auditor.analysis.transactions.facts import FileFacts
from auditor.index.model import TEXT_LIMIT, CallSite

_ROUTES = frozenset({"route", "get", "post", "put", "patch", "delete", "head", "options", "api_route", "websocket"})
_STANDARD = {"wraps": "functools", "lru_cache": "functools", "cache": "functools", "contextmanager": "contextlib",
             "asynccontextmanager": "contextlib"}  # fmt: skip
# Pieces that ``split_arguments`` does not split as Python binds them: a comment, a lambda's
# parameter list, a comprehension's targets.
_UNCOUNTABLE = re.compile(r"#|\blambda\b|\bfor\b")
_FORWARDING_WRAPPER = re.compile(r"^\s*def\s+\w+\(\s*\*(\w+)\s*,\s*\*\*(\w+)\s*\)", re.MULTILINE)


class Arity:
    """Which resolved calls bind arguments their callee cannot take."""

    def __init__(
        self, graph: CallGraph, facts: Mapping[str, FileFacts], arguments: Arguments,
        resolve: Callable[[str, str], FunctionRef | None],
    ) -> None:  # fmt: skip
        self.graph = graph
        self.facts = facts
        self.arguments = arguments
        self.resolve = resolve
        """A decorator's dotted name written in a path to the repository function it names
        (:meth:`.Boundaries.wrapper_target`, which resolves each once)."""
        self._forwarding: dict[tuple[str, str], bool] = {}
        self._lines: dict[FunctionRef, frozenset[int]] = {}

    def rejects(self, edge: Edge, call: CallSite | None) -> bool:
        """Whether the call behind ``edge`` always raises ``TypeError`` (module docstring)."""
        if call is None or edge.approximate or len(call.arguments) >= TEXT_LIMIT or _UNCOUNTABLE.search(call.arguments):
            return False  # a comment, a ``lambda`` or a comprehension: the pieces are not the arguments
        definition = self.graph.definition(edge.callee)
        facts = self.facts.get(edge.callee.path)
        if definition is None or facts is None or facts.index.language != "python":
            return False
        if definition.kind != "function" or definition.parent is not None or call.name != definition.name:
            return False
        if sum(1 for other in facts.index.definitions if other.parent is None and other.name == definition.name) != 1:
            return False  # bound twice in its module: the later ``def`` is what the name calls
        if re.search(rf"^(?:{re.escape(definition.name)}\s*(?::[^=\n]*)?=(?!=)|(?:from\s+\S+\s+)?import\b.*\b{re.escape(definition.name)}\b)", facts.text, re.MULTILINE):
            return False  # rebound at module level (``slow = cached(slow)``, a fallback import)
        if not all(self._hands_on(edge.callee.path, decorator) for decorator in definition.decorators):
            return False
        passed = self.arguments.passed(call.arguments)
        if passed is None:
            return False  # ``*args``/``**kwargs`` unpacked: any number may arrive
        keywords, positional = passed
        star_args, star_kwargs = self.arguments.variadic(edge.callee)
        names = {name for name, _ in self.arguments.parameters(edge.callee)}
        if not star_args and positional > self.arguments.positional(edge.callee):
            return True
        return not star_kwargs and any(keyword not in names for keyword in keywords)

    def raising_lines(self, ref: FunctionRef, edges: tuple[Edge, ...], call_for: Callable[[Edge], CallSite | None]) -> frozenset[int]:
        """The lines of ``ref`` holding a call into one of ``edges`` that always raises."""
        found = self._lines.get(ref)
        if found is None:
            found = self._lines[ref] = frozenset(edge.line for edge in edges if self.rejects(edge, call_for(edge)))
        return found

    def _hands_on(self, path: str, decorator: str) -> bool:
        """Whether a decorator (as written) hands a call on to the function unchanged: a
        route registration called on an object (``@bp.route(...)``), one of ``functools``'
        or ``contextlib``'s named through that module or imported from it, or a repository
        wrapper that forwards ``(*args, **kwargs)`` untouched."""
        name = strip_arguments(decorator.lstrip("@")).strip()
        last = name.rsplit(".", 1)[-1]
        if last in _ROUTES and "." in name and decorator.rstrip().endswith(")"):
            return True
        if last in _STANDARD and self._standard(path, name):
            return True
        key = (path, name)
        found = self._forwarding.get(key)
        if found is None:
            found = self._forwarding[key] = self._forwards(path, name)
        return found

    def _standard(self, path: str, name: str) -> bool:
        """Whether ``name`` is the standard library's: ``functools.wraps``, or ``wraps``
        imported from ``functools`` in ``path``."""
        module = _STANDARD[name.rsplit(".", 1)[-1]]
        if "." in name:
            return name.rsplit(".", 1)[0] == module
        facts = self.facts.get(path)
        return facts is not None and any(item.module == module and item.name == name and item.alias is None for item in facts.index.imports)

    def _forwards(self, path: str, name: str) -> bool:
        ref = self.resolve(path, name)
        definition = self.graph.definition(ref) if ref is not None else None
        facts = self.facts.get(ref.path) if ref is not None else None
        if definition is None or facts is None or definition.kind != "function":
            return False
        text = "\n".join(facts.lines[definition.start_line - 1 : definition.end_line])
        header = text[text.find("def ") :]
        opening = header.find("(")
        wrapped = header[opening + 1 : header.find(")", opening)].split(",", 1)[0].split(":", 1)[0].strip() if opening >= 0 else ""
        if not wrapped.isidentifier():
            return False
        return any(
            re.search(rf"\b{re.escape(wrapped)}\(\s*\*{match.group(1)}\s*,\s*\*\*{match.group(2)}\s*\)", text)
            and not re.search(rf"\b(?:{match.group(1)}|{match.group(2)})\s*(?:\[[^\]]*\]\s*)?(?:[-+]?=(?!=)|\.(?:pop|update|setdefault|clear|append|insert)\()", text)
            for match in _FORWARDING_WRAPPER.finditer(text)
        )  # the wrapper hands ``*args, **kwargs`` on and never rewrites them
