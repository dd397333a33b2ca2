"""The ``auditor rules`` command: the built-in rules as a table. Registered in ``auditor.cli.app``."""

from __future__ import annotations


def rules_command() -> None:
    """List the built-in rules."""
    from rich.console import Console
    from rich.table import Table

    from auditor.rules.loader import builtin_rules

    table = Table(title="Built-in rules")
    table.add_column("id", no_wrap=True)
    for column in ("severity", "languages", "title"):
        table.add_column(column)
    for rule in builtin_rules().values():
        table.add_row(rule.id, rule.severity, ", ".join(rule.languages), rule.title)
    Console().print(table)
