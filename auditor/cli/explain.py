"""The ``auditor explain`` command: why the static pass did or did not report one function."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from auditor.cli.flags import MinSeverity
from auditor.cli.output import OutputFormat
from auditor.errors import UsageError


def explain_command(
    path: Annotated[Path, typer.Argument(help="Repository (or subdirectory) the static pass runs on.")],
    target: Annotated[str, typer.Argument(metavar="FILE:FUNCTION", help="The function: its file relative to PATH, a colon, its qualname (or unique last names).")],
    *,
    format: Annotated[OutputFormat, typer.Option("--format", "-f", help="text or json.")] = OutputFormat.TEXT,
    min_severity: Annotated[MinSeverity, typer.Option("--min-severity", case_sensitive=False, help="Lowest severity the scan would report (critical, high, medium, low).")] = MinSeverity.HIGH,
    include_tests: Annotated[bool, typer.Option("--include-tests", help="Count test code, fixtures and dev-data commands as entry points too.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the file index and call graph caches.")] = False,
    tx_models: Annotated[list[Path], typer.Option("--tx-models", help="A transaction-models file with the project's own boundary helpers, writes and signals (repeatable; relative to PATH).")] = [],
) -> None:
    """Explain why the tx-outside-transaction static pass reported a function or not."""
    from auditor.analysis.transactions import TxOptions
    from auditor.analysis.transactions.explain import AnalysisInputs, explain
    from auditor.rules.loader import builtin_rules
    from auditor.runs.prepare import prepare_repository

    file, separator, function = target.rpartition(":")
    if not separator or not file or not function:
        raise UsageError(f"give the function as FILE:FUNCTION, not {target!r}")
    models = tuple(model if model.is_absolute() else path / model for model in tx_models)
    options = TxOptions(min_severity=min_severity.value, include_tests=include_tests, models=models)
    prepared = prepare_repository(path, use_cache=not no_cache)
    inputs = AnalysisInputs(prepared.indexes, prepared.texts, builtin_rules()["tx-outside-transaction"], prepared.graph)
    explanation = explain(inputs, Path(file).as_posix(), function, options)
    if format is OutputFormat.JSON:
        typer.echo(json.dumps(explanation.to_dict(), sort_keys=True, indent=2, ensure_ascii=False))
    else:
        typer.echo(explanation.describe(), nl=False)
