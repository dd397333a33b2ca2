"""Termination signals handled like Ctrl-C: the same cleanup, a documented exit code.

A CI runner or a supervisor stops a job with SIGTERM, a closed terminal sends SIGHUP. By
default either kills the process where it stands: no message, a temporary review worktree
left registered. :func:`interrupt_on_termination` makes both raise :class:`Terminated`, a
``KeyboardInterrupt``, so every cleanup path Ctrl-C takes (cancelled requests, stopped
workers, removed worktrees) runs for them too; the CLI then exits ``128 + signal``
(SIGINT 130, SIGHUP 129, SIGTERM 143), as a shell reports a process a signal ended.
"""

from __future__ import annotations

import signal
from types import FrameType

from auditor.errors import ExitCode

TERMINATION_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Terminated(KeyboardInterrupt):
    """A termination signal arrived; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def interrupt_on_termination() -> None:
    """From now on SIGTERM and SIGHUP raise :class:`Terminated` in the main thread. A
    signal the parent process set to be ignored (``nohup``) stays ignored."""
    for signum in TERMINATION_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue
        signal.signal(signum, _raise_terminated)


def termination_of(interrupt: BaseException) -> Terminated | None:
    """The :class:`Terminated` behind ``interrupt`` (click wraps it in an ``Abort``), if any."""
    seen: BaseException | None = interrupt
    while seen is not None:
        if isinstance(seen, Terminated):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def exit_code_for(interrupt: BaseException) -> ExitCode:
    """The exit code for the interrupt that stopped the run: ``128 + signal number``
    (Ctrl-C 130, SIGHUP 129, SIGTERM 143)."""
    terminated = termination_of(interrupt)
    if terminated is None:
        return ExitCode.INTERRUPTED
    return ExitCode(128 + terminated.signum)
