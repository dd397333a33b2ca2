"""The ``auditor rules`` command: the built-in rules as a table. Registered in ``auditor.cli.app``."""

from __future__ import annotations


def rules_command() -> None:
    """List the built-in rules; the ``checked by`` column says which need a model (a scan
    without one leaves those out unless ``--rule`` names them)."""
    from rich.console import Console
    from rich.table import Table

    from auditor.rules.loader import builtin_rules
    from auditor.runs.prepare import needs_model

    table = Table(title="Built-in rules")
    table.add_column("id", no_wrap=True)
    for column in ("severity", "languages", "checked by", "title"):
        table.add_column(column)
    for rule in builtin_rules().values():
        checked_by = "model only" if needs_model(rule) else "static pass and model"
        table.add_row(rule.id, rule.severity, ", ".join(rule.languages), checked_by, rule.title)
    Console().print(table)
