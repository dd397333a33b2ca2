"""The exit-code ladder of a scan-like run, written once in ``auditor.errors.exit_code``."""

from __future__ import annotations

import pytest

from auditor.errors import ExitCode, Shortfall, exit_code, worst_shortfall


@pytest.mark.parametrize(
    ("shortfall", "blocking", "error", "expected"),
    [
        (None, False, False, ExitCode.OK),
        (None, True, False, ExitCode.OK),
        (None, True, True, ExitCode.FINDINGS),
        (Shortfall.PARTIAL, True, False, ExitCode.OK),
        (Shortfall.PARTIAL, False, True, ExitCode.INCOMPLETE),
        (Shortfall.RECALL_DEGRADED, True, True, ExitCode.RECALL_DEGRADED),
        (Shortfall.INCOMPLETE, True, True, ExitCode.INCOMPLETE),
        (Shortfall.INCOMPLETE, False, False, ExitCode.INCOMPLETE),
    ],
)
def test_exit_code_ladder(shortfall: Shortfall | None, blocking: bool, error: bool, expected: ExitCode) -> None:
    assert exit_code(shortfall, blocking=blocking, error=error) is expected


def test_the_worst_shortfall_wins() -> None:
    assert worst_shortfall(incomplete=True, recall_degraded=True, partial=True) is Shortfall.INCOMPLETE
    assert worst_shortfall(incomplete=False, recall_degraded=True, partial=True) is Shortfall.RECALL_DEGRADED
    assert worst_shortfall(incomplete=False, recall_degraded=False, partial=True) is Shortfall.PARTIAL
    assert worst_shortfall(incomplete=False, recall_degraded=False, partial=False) is None
