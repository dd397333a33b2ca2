"""Django's request transaction: whether the settings a project runs with wrap every view in
``transaction.atomic`` (``ATOMIC_REQUESTS``), and where the pass read that.

Django reads ``ATOMIC_REQUESTS`` per database alias, from ``settings.DATABASES[alias]``
(``django/db/utils.py`` ``ConnectionHandler.configure_settings`` defaults it to False), and
``BaseHandler.make_view_atomic`` (``django/core/handlers/base.py``) wraps a view in
``atomic(using=alias)`` for each alias that sets it, less the aliases the view's
``non_atomic_requests`` names. A top-level ``ATOMIC_REQUESTS = True`` is no option of any
connection: Django never reads it. The writes the pass sees go to the ``default`` alias (a
model call without ``using``), so the view is covered when ``DATABASES['default']`` sets it.

Class-based settings (readthedocs's ``Settings.load_settings``, django-configurations) turn a
class's attributes into the module's settings: a class body is read like the module's, a
``DATABASES`` property by the dict it returns, and a settings class imported from another
settings module (``from .base import BaseSettings``) brings that module's statements first.

Read forms, in statement order through ``from X import *`` (settings split over modules):
``DATABASES = {'default': {..., 'ATOMIC_REQUESTS': True}}`` (or ``dict(...)``),
``DATABASES['default'] = {...}``, ``DATABASES['default']['ATOMIC_REQUESTS'] = True``,
``DATABASES['default'].update(ATOMIC_REQUESTS=True)`` / ``.update({...})`` and
``DATABASES.update({...})``; statements under ``if``/``try``/``with`` count as run. A value
that is not a literal (``env.bool(...)``) is not taken as True.

The settings module is the ``DJANGO_SETTINGS_MODULE`` default of production ``manage.py``,
``wsgi.py`` or ``asgi.py`` files; when no launcher names one, every production settings file
is read. Test, example and demo settings never count, named by a launcher or not (a plugin's
``manage.py`` that runs its tests with ``settings/test.py`` says nothing of its host). A library with no settings of its
own can declare its host's with a ``host-setting`` row in a ``--tx-models`` file
(docs/tx-models.md).

Output: :class:`RequestSettings`, with the sentence a finding's explanation gives.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from auditor.analysis.entrypoints import is_test_path
from auditor.callgraph.names import python_module_name
from auditor.index.model import FileIndex

_SETTINGS_MODULE = re.compile(r"""DJANGO_SETTINGS_MODULE['"]\s*,\s*['"]([\w.]+)['"]""")
_LAUNCHERS = ("manage.py", "wsgi.py", "asgi.py")
_OPTION = "ATOMIC_REQUESTS"
_DEFAULT = "default"
_IMPORT_DEPTH = 8


@dataclass(frozen=True)
class RequestSettings:
    """Whether Django runs every view in a transaction, and what that was read from.

    ``atomic``: the default alias sets ``ATOMIC_REQUESTS``; ``source``: the settings file it
    was read from (the one found setting it, else the first read that has ``DATABASES``), or
    the models file that declares the host's setting; ``declared``: ``source`` is such a
    file; ``ignored``: a settings file whose top-level ``ATOMIC_REQUESTS = True`` Django
    never reads."""

    atomic: bool = False
    source: str = ""
    declared: bool = False
    ignored: str = ""

    def origin(self) -> str:
        """Where the request transaction comes from ("" when views run in none)."""
        if not self.atomic:
            return ""
        where = f"declared for the host in {self.source}" if self.declared else f"of DATABASES['default'] in {self.source}"
        return f"ATOMIC_REQUESTS {where}"

    def note(self) -> str:
        """The sentence that says which request setting a view's grade assumes."""
        if self.atomic:
            return f"Views run in a transaction: {self.origin()}."
        if self.source:
            text = f"Assumes requests are not atomic (settings read: {self.source}; DATABASES['default'] does not set ATOMIC_REQUESTS)"
        else:
            text = "Assumes requests are not atomic (no settings module with DATABASES found)"
        if self.ignored:
            text += f"; the top-level ATOMIC_REQUESTS = True in {self.ignored} is no DATABASES option, and Django ignores it"
        return text + "."


@dataclass
class _State:
    """What the statements read so far leave: each alias's ``ATOMIC_REQUESTS`` (None when
    ``DATABASES`` was never assigned) and the files with an ignored top-level one."""

    aliases: dict[str, bool] | None = None
    ignored: str = ""
    origin: str = ""
    """The file of the statement that last set the default alias."""

    def set(self, aliases: dict[str, bool], path: str, *, replace: bool = False) -> None:
        """Merge ``aliases`` in (``replace``: they are the whole ``DATABASES``)."""
        self.aliases = aliases if replace else {**(self.aliases or {}), **aliases}
        if replace or _DEFAULT in aliases:
            self.origin = path


def request_settings(indexes: Mapping[str, FileIndex], texts: Mapping[str, str], declared: str = "") -> RequestSettings:
    """The request setting the project runs with (``declared``: a models file that declares
    the host runs with ``ATOMIC_REQUESTS``, which wins)."""
    if declared:
        return RequestSettings(atomic=True, source=declared, declared=True)
    modules = {python_module_name(path): path for path in indexes if path.endswith(".py")}
    chosen: list[str] = []
    for path in sorted(indexes):
        if path.rsplit("/", 1)[-1] in _LAUNCHERS and not _demo_path(path):
            chosen += [_module_path(name, modules) for name in _SETTINGS_MODULE.findall(texts.get(path, ""))]
    settings = sorted({path for path in chosen if path is not None and not _demo_path(path)})
    if not settings:
        settings = [path for path in sorted(indexes) if "settings" in path and path.endswith(".py") and not _demo_path(path)]
    read = ""
    ignored = ""
    for path in settings:
        state = _State()
        _run(path, texts, modules, state, set())
        ignored = ignored or state.ignored
        if state.aliases is None:
            continue
        if state.aliases.get(_DEFAULT):
            return RequestSettings(atomic=True, source=state.origin)
        read = read or path
    return RequestSettings(source=read, ignored=ignored)


def _run(path: str, texts: Mapping[str, str], modules: Mapping[str, str], state: _State, seen: set[str]) -> None:
    """Apply one settings module's statements to ``state`` (star imports run in place)."""
    if path in seen or len(seen) > _IMPORT_DEPTH:
        return
    seen.add(path)
    try:
        tree = ast.parse(texts.get(path, ""))
    except (SyntaxError, ValueError):
        return
    _statements(tree.body, path, texts, modules, state, seen)


def _statements(body: list[ast.stmt], path: str, texts: Mapping[str, str], modules: Mapping[str, str], state: _State, seen: set[str]) -> None:
    for statement in body:
        if isinstance(statement, ast.ImportFrom):
            # ``from X import *``, or a settings class imported from another settings module
            target = _module_path(_absolute(path, "." * statement.level + (statement.module or "")), modules)
            star = any(alias.name == "*" for alias in statement.names)
            if target is not None and (star or "settings" in target):
                _run(target, texts, modules, state, seen)
        elif isinstance(statement, ast.ClassDef):
            _statements(statement.body, path, texts, modules, state, seen)  # class-based settings
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == "DATABASES":
            returned = next((node.value for node in ast.walk(statement) if isinstance(node, ast.Return) and node.value is not None), None)
            if returned is not None:
                state.set(_aliases(returned), path, replace=True)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                _assign(target, statement.value, path, state)
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            _update(statement.value, path, state)
        elif isinstance(statement, (ast.If, ast.Try, ast.With)):
            for block in _blocks(statement):
                _statements(block, path, texts, modules, state, seen)


def _blocks(statement: ast.If | ast.Try | ast.With) -> list[list[ast.stmt]]:
    if isinstance(statement, ast.If):
        return [statement.body, statement.orelse]
    if isinstance(statement, ast.Try):
        return [statement.body, *(handler.body for handler in statement.handlers), statement.orelse, statement.finalbody]
    return [statement.body]


def _assign(target: ast.expr, value: ast.expr | None, path: str, state: _State) -> None:
    if value is None:
        return
    if isinstance(target, ast.Name) and target.id == "DATABASES":
        state.set(_aliases(value), path, replace=True)
    elif isinstance(target, ast.Name) and target.id == _OPTION:
        if _true(value):
            state.ignored = state.ignored or path
    elif isinstance(target, ast.Subscript) and _is_databases(target.value):
        alias = _key(target.slice)  # DATABASES['x'] = {...}
        if alias is not None:
            state.set({alias: bool(_option(value))}, path)
    elif isinstance(target, ast.Subscript) and _key(target.slice) == _OPTION:
        alias = _alias_of(target.value)  # DATABASES['x']['ATOMIC_REQUESTS'] = True
        if alias is not None:
            state.set({alias: _true(value)}, path)


def _update(call: ast.Call, path: str, state: _State) -> None:
    """``DATABASES['x'].update(...)`` and ``DATABASES.update({...})``."""
    function = call.func
    if not isinstance(function, ast.Attribute) or function.attr != "update":
        return
    if _is_databases(function.value):
        for argument in call.args:
            state.set(_aliases(argument), path)
        return
    alias = _alias_of(function.value)
    if alias is None:
        return
    given = [_option(argument) for argument in call.args] + [_keyword(call)]
    found = [value for value in given if value is not None]
    if found:
        state.set({alias: found[-1]}, path)


def _aliases(value: ast.expr) -> dict[str, bool]:
    """Each alias of a ``DATABASES`` value and whether it sets ``ATOMIC_REQUESTS`` (no alias
    known when the value is not a literal)."""
    if isinstance(value, ast.Dict):
        return {key: bool(_option(item)) for key, item in zip(map(_key, value.keys), value.values, strict=True) if key is not None}
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        return {keyword.arg: bool(_option(keyword.value)) for keyword in value.keywords if keyword.arg is not None}
    return {}


def _option(value: ast.expr) -> bool | None:
    """The ``ATOMIC_REQUESTS`` one alias's settings literal gives (None when it says nothing)."""
    if isinstance(value, ast.Dict):
        found = [_true(item) for key, item in zip(value.keys, value.values, strict=True) if key is not None and _key(key) == _OPTION]
        return found[-1] if found else None
    if isinstance(value, ast.Call):
        return _keyword(value)
    return None


def _keyword(call: ast.Call) -> bool | None:
    """``ATOMIC_REQUESTS=...`` among a ``dict(...)``/``update(...)`` call's keywords."""
    found = [_true(keyword.value) for keyword in call.keywords if keyword.arg == _OPTION]
    return found[-1] if found else None


def _alias_of(node: ast.expr) -> str | None:
    """``x`` of ``DATABASES['x']``."""
    if isinstance(node, ast.Subscript) and _is_databases(node.value):
        return _key(node.slice)
    return None


def _is_databases(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "DATABASES"


def _key(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _demo_path(path: str) -> bool:
    """Test, example and demo code, and settings modules for tests (``settings/test.py``,
    ``test_settings.py``, ``settings_tests.py``)."""
    parts = path.split("/")
    name = parts[-1].removesuffix(".py")
    test_settings = name.startswith("test") or name.endswith(("_test", "_tests", "_testing"))
    return is_test_path(path) or test_settings or any(part in ("example", "examples", "demo", "sample", "docs") for part in parts[:-1])


def _absolute(path: str, module: str) -> str:
    if not module.startswith("."):
        return module
    rest = module.lstrip(".")
    # A package's ``__init__`` is the package itself: one dot names it.
    dots = len(module) - len(rest) - path.endswith("/__init__.py")
    name = python_module_name(path).split(".")
    package = name[:-dots] if dots else name
    return ".".join([*package, *([rest] if rest else [])])


def _module_path(name: str | None, modules: Mapping[str, str]) -> str | None:
    if not name:
        return None
    if name in modules:
        return modules[name]
    suffix = [module for module in modules if module.endswith("." + name)]
    return modules[min(suffix)] if len(suffix) == 1 else None
