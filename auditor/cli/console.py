"""What the CLI shows on stderr: one rich console, progress bars fed by the core's progress
callback, notices and warnings, and the one place ``AuditorError`` becomes an exit code."""

from __future__ import annotations

import functools
from typing import Callable, Iterable, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from auditor.cli.signals import exit_code_for, termination_of
from auditor.errors import AuditorError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress

stderr = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., object])


def exit_on_error(command: F) -> F:
    """Map AuditorError to its exit code with a one-line message, and an interrupt (Ctrl-C,
    SIGTERM, SIGHUP: auditor.cli.signals) to 128 + the signal with one; nothing else is caught."""

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return command(*args, **kwargs)
        except AuditorError as error:
            print_error(error)
            raise typer.Exit(int(error.exit_code)) from None
        except KeyboardInterrupt as interrupt:
            # typer would turn it into a silent exit 130, whatever the signal.
            print_interrupted(interrupt)
            raise typer.Exit(int(exit_code_for(interrupt))) from None

    return wrapper  # type: ignore[return-value]


def print_interrupted(interrupt: BaseException) -> None:
    """One line on stderr saying the run was stopped, and by which signal."""
    terminated = termination_of(interrupt)
    what = f"{terminated.args[0]} received" if terminated is not None else "interrupted"
    stderr.print(f"{what}: stopped before the run finished (its report, if any, is incomplete)", highlight=False)


def print_error(error: AuditorError) -> None:
    """'error: ...' on stderr."""
    stderr.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)


def print_notices(notices: Iterable[str], *, label: str = "notice") -> None:
    """Each notice (or warning) on its own line on stderr."""
    for notice in notices:
        stderr.print(f"[yellow]{label}:[/] {escape(notice)}", highlight=False)


class RichProgress:
    """Renders ProgressEvents as rich progress bars (one per stage) and notices on stderr."""

    def __init__(self, console: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._console = console
        self._progress = Progress(
            TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=True,
        )
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> "RichProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        if event.message:
            self._console.print(f"[dim]{escape(event.stage)}:[/] {escape(event.message)}", highlight=False)
        if event.total is None and not event.completed:
            return
        task = self._tasks.get(event.stage)
        if task is None:
            task = self._tasks[event.stage] = self._progress.add_task(event.stage, total=event.total)
        self._progress.update(task, completed=event.completed, total=event.total)


class _Quiet:
    """A progress context that shows nothing (machine-readable output, or not a terminal)."""

    def __enter__(self) -> ProgressCallback:
        return no_progress

    def __exit__(self, *exc: object) -> None:
        return None


class _Log:
    """A progress context that prints stage notices only (CI logs: no bars)."""

    def __enter__(self) -> ProgressCallback:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, event: ProgressEvent) -> None:
        if event.message:
            stderr.print(f"[dim]{escape(event.stage)}:[/] {escape(event.message)}", highlight=False)


def progress_for(show: bool) -> RichProgress | _Quiet:
    """A rich progress display on stderr when ``show``, else a silent one."""
    return RichProgress(stderr) if show else _Quiet()


def notices_only() -> _Log:
    """A progress context that prints stage notices on stderr without bars."""
    return _Log()
