"""HTTP entry points an OpenAPI document names (auditor/analysis/openapi_operations.py).

connexion imports each operation's handler from its ``operationId``: the longest importable
module prefix, then attributes (``connexion/utils.py`` ``get_function_from_name``), with
``x-openapi-router-controller`` naming the module of a bare one. A spec-first app has no
route decorator, so without these its requests reach nothing."""

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
        x-openapi-router-controller: backend.routes.users
        post:
          operationId: create
        delete:
          operationId: Users.remove
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
    # a bare operationId under the path item's router controller
    assert found["src/backend/routes/users.py:create"] == ("http", "openapi operation POST '/users/{name}' (src/backend/api.yml)")
    assert found["src/backend/routes/users.py:Users.remove"][1].startswith("openapi operation DELETE")
    assert "src/backend/routes/auth.py:helper" not in found


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


def test_a_spec_under_tests_defines_no_entry_point():
    assert "src/backend/routes/auth.py:login" not in _entries({**ROUTES, "tests/data/api.yml": SPEC})


def test_a_handler_committing_twice_is_reported_from_its_operation(rule: Rule):
    indexes, texts = _inputs({**ROUTES, "src/backend/api.yml": SPEC})
    finding = reported(analyze_tx_outside_transaction(indexes, texts, rule, options=ALL_SEVERITIES))[("src/backend/routes/auth.py", "login")]
    assert finding.chain[0].note.startswith("entry point: openapi operation GET '/login'")
