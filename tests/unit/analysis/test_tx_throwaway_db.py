"""Not a database write (round 5): what is written through a connection to SQLite's
``:memory:`` database, opened in the function or passed down as an argument, leaves
nothing behind."""

from __future__ import annotations

import pytest

from auditor.rules.loader import Rule, load_rule
from tests.support import analyze_source, reported

RUNNER = """
    import sqlite3

    def fill(connection, name, rows):
        connection.execute("CREATE TABLE " + name + " (a)")
        for row in rows:
            connection.execute("INSERT INTO " + name + " VALUES (?)", row)

    def fill_all(connection, names):
        fill(connection, names[0], [])
        fill(connection, names[1], [])
        fill(connection=connection, name=names[2], rows=[])

    def fill_other(connection, names):
        connection = sqlite3.connect("app.db")
        fill(connection, names[0], [])
        fill(connection, names[1], [])
    """


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


def _serious(views: str, rule: Rule) -> set:
    found = reported(analyze_source({"reports/runner.py": RUNNER, "reports/views.py": views}, rule))
    return {key for key, finding in found.items() if finding.severity in ("critical", "high")}


def test_writes_to_an_in_memory_database_passed_down_are_no_finding(rule: Rule):
    views = """
        import sqlite3

        from .runner import fill_all

        def run(request):
            connection = sqlite3.connect(":memory:")
            fill_all(connection, request.names)
            connection.execute("INSERT INTO t VALUES (1)")
            connection.execute("INSERT INTO t VALUES (2)")
            return None
        """
    assert not _serious(views, rule)


@pytest.mark.parametrize(
    "opening",
    [
        'connection = sqlite3.connect("app.db")',  # a file: it persists
        'connection = sqlite3.connect(":memory:") if request.fast else sqlite3.connect("app.db")',
    ],
)
def test_a_connection_that_may_persist_keeps_the_finding(opening: str, rule: Rule):
    views = f"""
        import sqlite3

        from .runner import fill_all

        def run(request):
            {opening}
            fill_all(connection, request.names)
            return None
        """
    assert ("reports/runner.py", "fill_all") in _serious(views, rule)


def test_a_parameter_bound_again_is_not_the_in_memory_connection(rule: Rule):
    views = """
        import sqlite3

        from .runner import fill_other

        def run(request):
            connection = sqlite3.connect(":memory:")
            fill_other(connection, request.names)
            return None
        """
    assert ("reports/runner.py", "fill_other") in _serious(views, rule)
