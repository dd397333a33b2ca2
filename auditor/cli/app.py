"""The ``auditor`` command line: a thin typer shell over the core stages.

Each command (one module per command in this package) turns its options into the core's
frozen configuration, calls one core function and renders the result. Progress arrives
through a callback rendered with rich on stderr (``auditor.cli.console``); ``AuditorError``
subclasses become exit codes in one place (``exit_on_error``), and so do the usage errors
typer/click find while parsing (exit 64, naming the option).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer


def _click_class(name: str) -> type[Exception]:
    """A base class of typer's parse errors by name (typer >= 0.29 bundles its own click)."""
    return next(base for base in typer.BadParameter.__mro__ if base.__name__ == name)


ClickUsageError = _click_class("UsageError")
ClickException = _click_class("ClickException")
ClickAbort = typer.Abort

from auditor import __version__
from auditor.cli.console import exit_on_error, print_error, print_interrupted, stderr
from auditor.cli.signals import exit_code_for, interrupt_on_termination
from auditor.errors import AuditorError, ExitCode

# Start-up cost matters (``auditor pack`` is benchmarked end to end): this module and the
# command modules import only what building the commands needs. Everything a command
# uses to run (the core stages, engines, reporters, rich.progress/table) is imported
# inside that command, so ``auditor pack`` never imports scan, many, engines or reports.
# tests/test_cli_imports.py guards this.

app = typer.Typer(
    name="auditor",
    help="Long-context codebase audits: exact-token packing for Nemotron 3 Nano, grounded call-chain findings.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"auditor {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    ctx: typer.Context,
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version and exit.")
    ] = None,
) -> None:
    """auditor: audit a repository with a long-context model, or statically without one.

    Option defaults can come from auditor.toml or [tool.auditor] in pyproject.toml (found
    from the working directory upward); flags on the command line win.
    """
    from auditor.config.project import load_project_config

    group = ctx.command
    commands = {
        name: frozenset(param.name for param in command.params if param.name)
        for name, command in getattr(group, "commands", {}).items()
    }
    try:
        project = load_project_config(Path.cwd(), commands)
        _check_config_values(ctx, project)
    except AuditorError as error:
        print_error(error)
        raise typer.Exit(int(error.exit_code)) from None
    if project.defaults:
        ctx.default_map = {name: dict(values) for name, values in project.defaults.items()}
    from rich.logging import RichHandler

    # Core modules log warnings (e.g. an unwritable cache); show them once, through rich.
    logging.basicConfig(
        level=logging.WARNING, format="%(message)s", handlers=[RichHandler(console=stderr, show_time=False, show_path=False)]
    )


def _check_config_values(ctx: typer.Context, project: object) -> None:
    """Convert every value the configuration file sets the way its option would, so a bad
    value is a usage error naming the file and the key, not the flag. Only the command
    being run is checked: a shared value it rejects is named as its own."""
    from auditor.errors import UsageError

    source = getattr(project, "source", None)
    invoked = ctx.invoked_subcommand
    for name, values in getattr(project, "defaults", {}).items():
        if invoked is not None and name != invoked:
            continue
        command = ctx.command.commands[name]  # type: ignore[attr-defined]
        params = {param.name: param for param in command.params}
        trial = type(ctx)(command, info_name=name, parent=ctx)
        for key, value in values.items():
            items = value if isinstance(value, list) else [value]
            if any(isinstance(item, (dict, list)) for item in items):
                raise UsageError(f"{source}: {key.replace('_', '-')} takes a value or a list of values, not {value!r}")
            try:
                params[key].process_value(trial, value)
            except Exception as exc:  # noqa: BLE001 - typer reports bad values through several exception types
                message = getattr(exc, "message", None) or str(exc)
                raise UsageError(f"{source}: {key.replace('_', '-')} = {value!r} is not valid for '{name}': {message}") from None


from auditor.cli.doctor import doctor_command  # noqa: E402
from auditor.cli.explain import explain_command  # noqa: E402
from auditor.cli.many import scan_many_command  # noqa: E402
from auditor.cli.pack import pack_command  # noqa: E402
from auditor.cli.plan import plan_command  # noqa: E402
from auditor.cli.probe import probe_command  # noqa: E402
from auditor.cli.review import review_command  # noqa: E402
from auditor.cli.rules import rules_command  # noqa: E402
from auditor.cli.scan import scan_command  # noqa: E402

for _name, _command in (
    ("pack", pack_command),
    ("scan", scan_command),
    ("rules", rules_command),
    ("review", review_command),
    ("scan-many", scan_many_command),
    ("probe", probe_command),
    ("plan", plan_command),
    ("doctor", doctor_command),
    ("explain", explain_command),
):
    app.command(_name)(exit_on_error(_command))


def plain_flags(command: object) -> object:
    """``command`` (a typer group) with no type shown for on/off flags in ``--help``
    (typer shows ``<bool>`` on each, ``--help`` included), for it and every subcommand."""
    commands = [command, *getattr(command, "commands", {}).values()]
    for each in commands:
        context = typer.Context(each, help_option_names=["-h", "--help"])  # type: ignore[arg-type]
        for param in [*each.params, each.get_help_option(context)]:  # type: ignore[attr-defined]
            if param is not None and getattr(param, "is_flag", False):
                param.metavar = ""
    return command


def main() -> None:
    """Console-script entry point. typer/click's own parse errors (a bad value, an unknown
    option, a missing argument) exit 64 like every usage error, not click's 2. SIGTERM and
    SIGHUP stop a run as Ctrl-C does (auditor.cli.signals), exiting 128 + the signal."""
    interrupt_on_termination()
    try:
        code = plain_flags(typer.main.get_command(app))(standalone_mode=False)  # type: ignore[operator]
    except (ClickAbort, KeyboardInterrupt) as interrupt:
        print_interrupted(interrupt)
        raise SystemExit(int(exit_code_for(interrupt))) from None
    except ClickUsageError as error:
        error.show()
        raise SystemExit(int(ExitCode.USAGE)) from None
    except ClickException as error:
        error.show()
        raise SystemExit(int(ExitCode.FATAL)) from None
    raise SystemExit(code or 0)


if __name__ == "__main__":
    main()
