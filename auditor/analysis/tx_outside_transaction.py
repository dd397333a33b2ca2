"""The static tx-outside-transaction pass (the rule's entry point for the scan stage).

The analysis lives in :mod:`auditor.analysis.transactions`: one transaction model per
framework, path-sensitive write sequences and dispatch-aware reachability.
"""

from auditor.analysis.transactions import (
    FOUND_BY,
    InvalidSeverityError,
    StaticResult,
    TxOptions,
    analyze_tx_outside_transaction,
)

__all__ = ["FOUND_BY", "InvalidSeverityError", "StaticResult", "TxOptions", "analyze_tx_outside_transaction"]
