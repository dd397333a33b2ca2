"""Clients of stores outside the database: a search index (Elasticsearch, OpenSearch,
Solr) or a key-value server (Redis). Their ``delete``/``save``/``update`` calls look like
ORM writes (the rule's ``*.delete`` sink) but run no SQL: ``pysolr.Solr.delete`` posts to
Solr's update handler (pysolr.py ``Solr.delete`` -> ``Solr._update``), ``Elasticsearch.delete``
sends an HTTP ``DELETE /{index}/_doc/{id}`` (elasticsearch/_sync/client/__init__.py
``Elasticsearch.delete``), ``redis.Redis.delete`` sends the ``DEL`` command (redis/commands/core.py
``BasicKeyCommands.delete``). No database transaction covers or is broken by them.

A call's receiver counts as such a client only on evidence read from the code, never from
its name: the receiver's name is bound (a local bound once in the function, by a plain
assignment above the call and in no other target position anywhere in it, else a module-level name of
the file, else the name a ``from M import name`` brings in from the repository module ``M``)
to

- a constructor of a client class imported from one of those packages
  (``pysolr.Solr(url)``, ``Elasticsearch(url)`` after ``from elasticsearch import
  Elasticsearch``, ``redis.Redis.from_url(url)``);
- a call of a repository function (or ``LocalProxy(function)``: werkzeug's proxy forwards
  every attribute to what the function returns, werkzeug/local.py ``LocalProxy``) whose
  return annotation names such a class (``def make_connection() -> Solr``) or whose every
  ``return`` is such a constructor, a local bound to one, or an attribute the function set
  to such a local (``SETTINGS._es = es; return SETTINGS._es``).

A call on an attribute of a module-level object (``sentinel.master.delete(...)``) counts when
the object is an instance of a repository class whose every assignment of that attribute is
one call of such a client (no conditional expression), the class's other such attribute, or
redis's ``Sentinel.master_for``/``slave_for`` (which return a ``Redis`` client,
redis/sentinel.py) in a module that imports redis (pybossa's ``Sentinel`` wrapper); the name is
bound once in its module and nowhere else there, or comes through ``from M import *`` from the
one star-imported module that binds it; no function around the call has it as a parameter or
local; and nothing else sets the attribute: no annotation, class attribute, tuple target or
``setattr`` in the class, no assignment in a repository base class, none of that attribute on
any object outside the class in a file that is no test.

Anything else (a parameter, a name bound twice, an unresolved import) is no client: its call
keeps the model's verdict.

Inputs: the call graph and the file texts. Output: :meth:`StoreClients.is_client`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.analysis.entrypoints import is_test_path
from auditor.analysis.transactions.dispatch import lineage_has_line
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.name_bindings import FunctionBindings, function_bindings
from auditor.analysis.transactions.expressions import assigned_expression
from auditor.index.model import Definition

CLIENT_PACKAGES = frozenset({"pysolr", "elasticsearch", "opensearchpy", "redis"})
"""Top-level packages whose client classes talk to a store outside the database."""
_CLIENT_CLASSES = frozenset({"Solr", "SolrCloud", "Elasticsearch", "AsyncElasticsearch", "OpenSearch", "AsyncOpenSearch",
                             "Redis", "StrictRedis", "RedisCluster", "from_url"})  # fmt: skip
_RETURNS = re.compile(r"\)\s*->\s*['\"]?(?:Optional\[)?([A-Za-z_][\w.]*)")
_LOCAL_PROXY = re.compile(r"^(?:[\w.]*\.)?LocalProxy\(\s*([A-Za-z_][\w.]*)\s*\)$")
_DEPTH = 3
# A call as written on its first line (the arguments may carry on below): the called name.
_CALLED = re.compile(r"^([A-Za-z_][\w.]*)\s*\(")
_SENTINEL_CLIENT = re.compile(r"^[\w.]+\.(?:master_for|slave_for)\s*\(")


def _binding_line(name: str) -> re.Pattern[str]:
    """A line that binds ``name`` at any indentation: an assignment (a tuple target too), a
    ``for``/``as`` target, a ``global`` declaration."""
    word = re.escape(name)
    return re.compile(
        rf"^\s*(?:[\w.\[\]]+\s*,\s*)*{word}\s*(?:,\s*[\w.\[\]]+\s*)*(?::[^=]+)?=(?!=)"
        rf"|\bglobal\b[^\n]*\b{word}\b|\b(?:for|as)\s+(?:[\w\s,*]*,\s*)?{word}\b"
    )


class StoreClients:
    """Which receiver names hold a client of a store outside the database (kept per name)."""

    def __init__(self, graph: CallGraph, facts: Mapping[str, FileFacts]) -> None:
        self.graph = graph
        self.facts = facts
        self._module_names: dict[tuple[str, str], bool] = {}
        self._factories: dict[FunctionRef, bool] = {}
        self._function_bindings: dict[tuple[str, int], FunctionBindings | None] = {}

    def is_client(self, path: str, definition: Definition | None, receiver: str, line: int, attribute: str | None = None) -> bool:
        """Whether ``receiver`` (the root name of a call's receiver, at ``line`` of the
        function ``definition`` in ``path``) holds a search-index or key-value client, or,
        with ``attribute`` (``sentinel.master.delete``), a module-level object whose
        ``attribute`` holds one (:meth:`_held_client`)."""
        facts = self.facts.get(path)
        if facts is None or not receiver.isidentifier():
            return False
        if attribute is not None and not self.is_client(path, definition, receiver, line):
            enclosing = [item for item in facts.index.definitions if item.kind != "class" and item.start_line <= line <= item.end_line]
            for function in enclosing:  # the call's function and every function around it
                signature = " ".join(facts.line_text(number) for number in range(function.start_line, function.body_start_line))
                bindings = self._bindings(path, function)
                if re.search(rf"[(,]\s*\**{re.escape(receiver)}\b", signature) or bindings is None or bindings.lines_binding(receiver):
                    return False  # a parameter, a local, or not parsed: not the module-level object
            return self._held_client(path, receiver, attribute)
        if definition is not None:
            signature = " ".join(facts.line_text(number) for number in range(definition.start_line, definition.body_start_line))
            if re.search(rf"[(,]\s*\**{re.escape(receiver)}\b", signature):
                return False  # a parameter: whatever the caller passes
            bindings = self._bindings(path, definition)
            if bindings is None:
                return False  # not parsed: what it holds is not known
            bound = bindings.lines_binding(receiver)
            if bound:
                # One plain assignment above the call and no other binding anywhere in the
                # function (a ``for``/``with``/``except`` target, a second branch, ...).
                if len(bound) != 1 or bound[0] >= line:
                    return False
                assigned = assigned_expression(facts.line_text(bound[0]), receiver)
                return assigned is not None and not assigned[1] and self._client_value(path, assigned[0], 0)
        return self._module_client(path, receiver, 0)

    def _bindings(self, path: str, definition: Definition) -> FunctionBindings | None:
        """Every binding of a name in ``definition`` (any target position), parsed once."""
        key = (path, definition.start_line)
        if key not in self._function_bindings:
            facts = self.facts[path]
            lines = [facts.line_text(number) for number in range(definition.start_line, definition.end_line + 1)]
            self._function_bindings[key] = function_bindings(lines, definition.start_line)
        return self._function_bindings[key]

    def _module_client(self, path: str, name: str, depth: int) -> bool:
        """Whether the module-level ``name`` of ``path`` is bound once to a client, or is
        imported from a repository module whose ``name`` is."""
        key = (path, name)
        known = self._module_names.get(key)
        if known is not None:
            return known
        self._module_names[key] = False
        binding = self._module_binding(path, name, depth)
        found = binding is not None and self._client_value(*binding)
        self._module_names[key] = found
        return found

    def _module_binding(self, path: str, name: str, depth: int) -> tuple[str, str, int] | None:
        """The one expression the module-level ``name`` of ``path`` is bound to (following a
        ``from M import name`` into the repository module ``M``): its path, text and depth."""
        facts = self.facts.get(path)
        if facts is None or depth > _DEPTH:
            return None
        texts = [facts.line_text(number) for number in range(1, len(facts.lines) + 1)]
        bound = [assigned for text in texts if text[:1] == name[:1] and (assigned := assigned_expression(text, name)) is not None]
        rebound = any(re.search(rf"\bglobal\b[^\n]*\b{re.escape(name)}\b|\b(?:for|as)\s+(?:[\w\s,*]*,\s*)?{re.escape(name)}\b", text) for text in texts)
        if len(bound) == 1 and not bound[0][1] and not rebound:
            return path, bound[0][0], depth
        if not bound:
            named = [item for item in facts.index.imports if item.name == name and (item.alias is None or item.alias == name)]
            starred = [item for item in facts.index.imports if item.name == "*"]  # ``from pybossa.extensions import *``
            for item in named or starred[::-1]:  # the last star import binding the name wins
                module = self.graph.module_path(path, item.module)
                found = self._module_binding(module, name, depth + 1) if module is not None else None
                if found is not None or named:
                    return found
        return None

    def _held_binding(self, path: str, name: str, depth: int) -> tuple[str, str] | None:
        """The one expression the module-level ``name`` of ``path`` is bound to, for
        :meth:`_held_client`: bound by one plain unindented assignment and by nothing else
        in the file (an ``if``'s, a ``for``/``as``/``global``), else imported by name, else
        from the one star-imported module that binds it anywhere."""
        facts = self.facts.get(path)
        if facts is None or depth > _DEPTH:
            return None
        texts = [facts.line_text(number) for number in range(1, len(facts.lines) + 1)]
        binds = _binding_line(name)
        bound = [text for text in texts if binds.search(text)]
        if bound:
            assigned = assigned_expression(bound[0], name) if len(bound) == 1 and bound[0][:1] == name[:1] else None
            return (path, assigned[0]) if assigned is not None and not assigned[1] else None
        named = [item for item in facts.index.imports if item.name == name and (item.alias is None or item.alias == name)]
        modules = [self.graph.module_path(path, item.module) for item in named]
        if not named:
            starred = [self.graph.module_path(path, item.module) for item in facts.index.imports if item.name == "*"]
            modules = [module for module in starred if module is not None and self._binds_anywhere(module, binds)]
        return self._held_binding(modules[0], name, depth + 1) if len(modules) == 1 and modules[0] is not None else None

    def _binds_anywhere(self, path: str, binds: re.Pattern[str]) -> bool:
        facts = self.facts.get(path)
        return facts is not None and any(binds.search(facts.line_text(number)) for number in range(1, len(facts.lines) + 1))

    def _held_client(self, path: str, name: str, attribute: str) -> bool:
        """Whether ``name.attribute`` holds a client: the module-level ``name`` is an instance
        of a repository class (``sentinel = Sentinel()``, pybossa's wrapper) whose every
        assignment of ``self.attribute`` is a client (a constructor of one, the same class's
        other such attribute, or redis's ``Sentinel.master_for``/``slave_for``, which return a
        ``Redis`` client: redis/sentinel.py, in a module that imports redis)."""
        key = (path, f"{name}.{attribute}")
        known = self._module_names.get(key)
        if known is not None:
            return known
        self._module_names[key] = False
        binding = self._held_binding(path, name, 0)
        called = _CALLED.match(binding[1].strip()) if binding is not None else None
        cls = self.graph.resolve(binding[0], called.group(1)) if binding is not None and called is not None else None
        definition = self.graph.definition(cls) if cls is not None else None
        found = definition is not None and definition.kind == "class" and self._attribute_clients(cls, definition, attribute, set())
        found = found and cls is not None and definition is not None and not self._set_from_outside(cls, definition, attribute)
        self._module_names[key] = found
        return found

    def _set_from_outside(self, cls: FunctionRef, definition: Definition, attribute: str) -> bool:
        """Whether a file other than a test assigns ``attribute`` of any object outside the
        class (``holder.session = db.session``, ``h.session = ...`` through an alias, a
        function's ``store.session = ...``, alone or in a tuple target), or sets it with
        ``setattr``."""
        word = re.escape(attribute)
        assignment = re.compile(rf"^\s*(?:[\w.\[\]]+\s*,\s*)*[\w.\[\]]*\.{word}\s*(?:,\s*[\w.\[\]]+\s*)*(?::[^=]+)?=(?!=)")
        named = re.compile(rf"setattr\([^)]*['\"]{word}['\"]")
        for path, facts in self.facts.items():
            if is_test_path(path):
                continue
            for number in range(1, len(facts.lines) + 1):
                inside = path == cls.path and definition.start_line <= number <= definition.end_line
                text = facts.line_text(number)
                if not inside and (assignment.match(text) or named.search(text)):
                    return True
        return False

    def _set_in_bases(self, cls: FunctionRef, attribute: str) -> bool:
        """Whether a repository base class of ``cls`` (at any depth) assigns ``self.attribute``."""
        assignment = re.compile(rf"\bself\.{re.escape(attribute)}\s*(?:,[^=\n]*)?(?::[^=]+)?=(?!=)")
        return lineage_has_line(self.graph, self.facts, self.graph.base_classes(cls), lambda text: assignment.search(text) is not None)

    def _attribute_clients(self, cls: FunctionRef, definition: Definition, attribute: str, seen: set[str]) -> bool:
        facts = self.facts.get(cls.path)
        if facts is None:
            return False
        lines = [facts.line_text(number) for number in range(definition.start_line, definition.end_line + 1)]
        word = re.escape(attribute)
        odd = re.compile(
            rf"self\.{word}\s*,[^=\n]*=(?!=)|,\s*self\.{word}\s*(?:,[^=\n]*)?=(?!=)"  # ``self.a, self.b = ...``
            rf"|self\.{word}\s*:|^\s*{word}\s*(?::[^=]+)?=(?!=)|setattr\("  # annotated, a class attribute, setattr
        )
        if any(odd.search(text) for text in lines) or self._set_in_bases(cls, attribute):
            return False  # what it holds is not read here
        assigned = re.compile(rf"\s*self\.{re.escape(attribute)}\s*=(?!=)\s*(.+)$")
        values = [found.group(1).strip() for text in lines if (found := assigned.match(text)) is not None]
        redis = any(item.module.split(".", 1)[0] == "redis" for item in facts.index.imports)
        seen = seen | {attribute}

        def client(value: str) -> bool:
            if re.search(r"\b(?:if|else|or|and|lambda)\b", value):
                return False  # ``StrictRedis() if USE_REDIS else db.session``
            other = re.fullmatch(r"self\.(\w+)", value)
            if other is not None:
                return other.group(1) not in seen and self._attribute_clients(cls, definition, other.group(1), seen)
            return self._client_value(cls.path, value, 1) or (redis and _SENTINEL_CLIENT.match(value) is not None)

        return bool(values) and all(client(value) for value in values)

    def _client_value(self, path: str, expression: str, depth: int) -> bool:
        """Whether ``expression`` (written in ``path``) evaluates to a client."""
        expression = expression.split("#", 1)[0].strip()
        proxy = _LOCAL_PROXY.match(expression)
        if proxy is not None:
            function = self.graph.resolve(path, proxy.group(1))
            return function is not None and self._factory(function, depth + 1)
        called = _CALLED.match(expression)
        if called is None:
            return False
        name = called.group(1)
        if self._client_class(path, name):
            return True
        function = self.graph.resolve(path, name)
        return function is not None and depth <= _DEPTH and self._factory(function, depth + 1)

    def _client_class(self, path: str, name: str) -> bool:
        """Whether the dotted ``name`` written in ``path`` is a client class (or its
        ``from_url``) of :data:`CLIENT_PACKAGES`: ``pysolr.Solr``, or ``Solr`` imported from it."""
        facts = self.facts.get(path)
        parts = name.split(".")
        if facts is None or parts[-1] not in _CLIENT_CLASSES:
            return False
        head = parts[0]
        for item in facts.index.imports:
            package = item.module.split(".", 1)[0]
            if package not in CLIENT_PACKAGES:
                continue
            if item.name is None and (item.alias or item.module.split(".", 1)[0]) == head and len(parts) >= 2:
                return True  # ``import pysolr`` ... ``pysolr.Solr(...)``
            if item.name is not None and (item.alias or item.name) == head:
                return True  # ``from pysolr import Solr`` ... ``Solr(...)``
        return False

    def _factory(self, function: FunctionRef, depth: int) -> bool:
        """Whether the repository function returns a client wherever it returns."""
        known = self._factories.get(function)
        if known is not None:
            return known
        self._factories[function] = False
        definition = self.graph.definition(function)
        facts = self.facts.get(function.path)
        found = False
        if definition is not None and facts is not None and definition.kind != "class" and depth <= _DEPTH:
            lines = [facts.line_text(number) for number in range(definition.start_line, definition.end_line + 1)]
            signature = " ".join(facts.line_text(number) for number in range(definition.start_line, definition.body_start_line))
            annotated = _RETURNS.search(signature)
            if annotated is not None:
                found = self._client_class(function.path, annotated.group(1))
            else:
                returns = [text.strip()[len("return") :].strip() for text in lines if text.strip().startswith("return")]
                found = bool(returns) and all(self._returns_client(function.path, lines, value, depth) for value in returns)
        self._factories[function] = found
        return found

    def _returns_client(self, path: str, lines: list[str], value: str, depth: int) -> bool:
        """Whether a ``return value`` of a factory (its ``lines``) returns a client: a client
        constructor, a local bound only to one, or an attribute bound only to such a local."""
        if not value:
            return False
        if _CALLED.match(value):
            return self._client_value(path, value, depth)
        locals_ = [found[0] for text in lines if (found := assigned_expression(text, value)) is not None]
        if not locals_:
            return False
        return all(
            self._client_value(path, source, depth) or (source.isidentifier() and source != value and self._returns_client(path, lines, source, depth))
            for source in locals_
        )
