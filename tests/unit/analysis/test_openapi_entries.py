"""HTTP entry points an OpenAPI document names (auditor/analysis/openapi_operations.py).

connexion imports each operation's handler from its ``operationId``: the longest importable
module prefix, then attributes (``connexion/utils.py`` ``get_function_from_name``), after the
operation's own router controller is prefixed (``Resolver.resolve_operation_id``;
``x-openapi-router-controller`` in OpenAPI 3, ``x-swagger-router-controller`` in Swagger 2, never
read from the path item). A spec-first app has no route decorator, so without these its
requests reach nothing."""

from __future__ import annotations

import json
import textwrap

import pytest

from auditor.analysis.entrypoints import find_entry_points
from auditor.callgraph.graph import CallGraph
from auditor.index.indexer import index_source
from auditor.rules.loader import Rule, load_rule
from auditor.analysis.transactions import analyze_tx_outside_transaction
from tests.support import ALL_SEVERITIES, reported

SPEC = """
    openapi: "3.0.2"
    info: {title: backend, version: "1"}
    paths:
      /login:
        get:
          operationId: backend.routes.auth.login
      /users/{name}:
        post:
          x-openapi-router-controller: backend.routes.users
          operationId: create
        delete:
          x-openapi-router-controller: backend.routes.users
          operationId: Users.remove
      /users:
        x-openapi-router-controller: backend.routes.users
        get:
          operationId: listing
      /docs:
        get:
          operationId: connexion.apis.flask_api.console_ui_home
      /missing:
        get:
          operationId: backend.routes.auth.nothing_here
    """
ROUTES = {
    "src/backend/routes/auth.py": """
        from backend.models import db, User, Token

        def login():
            db.session.add(User(name="a"))
            db.session.commit()
            db.session.add(Token(user="a"))
            db.session.commit()

        def helper():
            return 1
        """,
    "src/backend/routes/users.py": """
        def create(name):
            return name

        def listing():
            return []

        class Users:
            @staticmethod
            def remove(name):
                return name
        """,
    "src/backend/models.py": "class User:\n    pass\n\n\nclass Token:\n    pass\n\n\ndb = None\n",
}


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _inputs(files: dict[str, str]) -> tuple[dict, dict[str, str]]:
    """Every file's text and the Python files' indexes (a spec is walked, not indexed)."""
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    return {path: index_source(path, text, "python") for path, text in texts.items() if path.endswith(".py")}, texts


def _entries(files: dict[str, str]) -> dict[str, tuple[str, str]]:
    indexes, texts = _inputs(files)
    found = find_entry_points(indexes, CallGraph.build(indexes), None, texts)
    return {f"{entry.ref.path}:{entry.ref.qualname}": (entry.kind, entry.detail) for entry in found}


def test_operation_ids_name_repository_handlers_as_http_entry_points():
    found = _entries({**ROUTES, "src/backend/api.yml": SPEC})
    assert found["src/backend/routes/auth.py:login"] == ("http", "openapi operation GET '/login' (src/backend/api.yml)")
    # a bare operationId under the operation's router controller
    assert found["src/backend/routes/users.py:create"] == ("http", "openapi operation POST '/users/{name}' (src/backend/api.yml)")
    assert found["src/backend/routes/users.py:Users.remove"][1].startswith("openapi operation DELETE")
    # connexion reads no controller from the path item: a bare "listing" resolves to nothing
    assert "src/backend/routes/users.py:listing" not in found
    assert "src/backend/routes/auth.py:helper" not in found


def test_swagger_2_reads_its_own_controller_key_and_a_package_re_export_is_followed():
    swagger = """
        swagger: "2.0"
        paths:
          /users:
            post:
              x-swagger-router-controller: backend.routes.users
              operationId: create
            get:
              x-openapi-router-controller: backend.routes.users
              operationId: listing
          /login:
            get:
              operationId: backend.routes.login
        """
    found = _entries({**ROUTES, "src/backend/routes/__init__.py": "from .auth import login\n", "src/backend/swagger.yaml": swagger})
    assert found["src/backend/routes/users.py:create"][1] == "openapi operation POST '/users' (src/backend/swagger.yaml)"
    assert "src/backend/routes/users.py:listing" not in found  # Swagger 2 ignores the OpenAPI 3 key
    assert found["src/backend/routes/auth.py:login"][1] == "openapi operation GET '/login' (src/backend/swagger.yaml)"


@pytest.mark.parametrize("document", [
    "openapi: 3.0.0\ninfo: {title: !!bool maybe}\npaths: {}\noperationId: x\n",
    "openapi: 3.0.0\nx: !!int ''\noperationId: x\n",
    "openapi: 3.0.0\nwhen: !!timestamp yesterday\noperationId: x\n",
    "openapi: 3.0.0\npaths:\n  ~:\n    get: {operationId: backend.routes.auth.login}\n",
])
def test_a_document_the_loader_rejects_or_an_odd_key_is_no_spec_and_no_crash(document: str):
    assert "src/backend/routes/auth.py:login" not in _entries({**ROUTES, "src/backend/api.yml": document})


def test_a_deeply_nested_json_document_is_no_spec_and_no_crash():
    deep = '{"openapi": "3.0.0", "operationId": "x", "paths": ' + "[" * 200_000 + "]" * 200_000 + "}"
    assert "src/backend/routes/auth.py:login" not in _entries({**ROUTES, "src/backend/api.json": deep})


def test_a_json_document_counts_and_other_yaml_or_broken_documents_do_not():
    as_json = json.dumps({"swagger": "2.0", "paths": {"/login": {"post": {"operationId": "backend.routes.auth.login"}}}})
    assert _entries({**ROUTES, "openapi/api.json": as_json})["src/backend/routes/auth.py:login"][1] == (
        "openapi operation POST '/login' (openapi/api.json)"
    )
    # no openapi/swagger key: a workflow file that happens to say operationId
    not_a_spec = "jobs:\n  build:\n    operationId: backend.routes.auth.login\n"
    broken = "openapi: 3.0.0\npaths: {/login: {get: {operationId: backend.routes.auth.login\n"
    for other in (not_a_spec, broken):
        assert "src/backend/routes/auth.py:login" not in _entries({**ROUTES, "deploy/x.yml": other})


def test_a_spec_under_tests_and_a_handler_under_tests_define_no_entry_point():
    assert "src/backend/routes/auth.py:login" not in _entries({**ROUTES, "tests/data/api.yml": SPEC})
    in_tests = SPEC.replace("backend.routes.auth.login", "tests.fakes.login")
    found = _entries({**ROUTES, "tests/fakes.py": "def login():\n    return 1\n", "src/backend/api.yml": in_tests})
    assert "tests/fakes.py:login" not in found


def test_a_django_view_a_spec_also_names_keeps_its_label_and_atomic_requests(rule: Rule):
    # the view's label is what ATOMIC_REQUESTS reads: a document must not replace it
    spec = "openapi: 3.0.0\npaths:\n  /orders:\n    post: {operationId: shop.views.create_order}\n"
    views = "from .models import Order, Line\n\ndef create_order(request):\n    order = Order.objects.create()\n    Line.objects.create(order=order)\n"
    files = {"shop/views.py": views, "shop/models.py": "class Order:\n    pass\n\nclass Line:\n    pass\n",
             "shop/settings.py": 'DATABASES = {"default": {"ATOMIC_REQUESTS": True}}\n', "docs/openapi.yml": spec}
    assert _entries(files)["shop/views.py:create_order"] == ("http", "django view")
    indexes, texts = _inputs(files)
    assert ("shop/views.py", "create_order") not in reported(analyze_tx_outside_transaction(indexes, texts, rule, options=ALL_SEVERITIES))


def test_a_handler_committing_twice_is_reported_from_its_operation(rule: Rule):
    indexes, texts = _inputs({**ROUTES, "src/backend/api.yml": SPEC})
    finding = reported(analyze_tx_outside_transaction(indexes, texts, rule, options=ALL_SEVERITIES))[("src/backend/routes/auth.py", "login")]
    assert finding.chain[0].note.startswith("entry point: openapi operation GET '/login'")


def test_the_chain_cache_misses_when_a_document_changes(tmp_path):
    # relevance chains start at the entry points, and the documents are no indexed files
    from auditor.pack.chains import ChainCache, relevance_chains
    from auditor.rules.loader import builtin_rules

    rules = [next(iter(builtin_rules().values()))]
    code = {"app/api.py": "from app.store import save\n\ndef login():\n    save()\n", "app/store.py": "def save():\n    return 1\n"}
    spec = "openapi: 3.0.0\npaths:\n  /login:\n    get:\n      operationId: app.api.login\n"
    indexes, _ = _inputs(code)
    graph = CallGraph.build(indexes)
    cache = ChainCache(tmp_path)
    assert cache.chains(indexes, {**code, "api.yml": spec}, graph, rules, ["app/store.py"]) == (("app/api.py", "app/store.py"),)
    assert cache.chains(indexes, code, graph, rules, ["app/store.py"]) == relevance_chains(indexes, code, graph, rules, ["app/store.py"]) == ()
