"""The static analyses by rule id: a rule with one here is audited without a model too.

Each analysis takes the index (``FileIndex`` per path), the file texts, the rule and the
call graph, and returns a ``StaticResult`` of grounded findings. Adding a rule's analysis
is adding a module to this package and a line below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from auditor.analysis.transactions import StaticResult, analyze_tx_outside_transaction

StaticAnalysis = Callable[..., StaticResult]
"""``analysis(indexes, texts, rule, graph, options=TxOptions(...), cache_dir=None) -> StaticResult``;
a run's options (the lowest severity shown, whether test code, fixtures and dev-data
commands count as entry points) are a ``TxOptions``; with ``cache_dir`` the analysis keeps
what it computed there (and returns what an uncached run would)."""

STATIC_ANALYSES: Mapping[str, StaticAnalysis] = {
    "tx-outside-transaction": analyze_tx_outside_transaction,
}


def static_analysis_for(rule_id: str) -> StaticAnalysis | None:
    """The static analysis of the rule ``rule_id``, or None when it needs a model."""
    return STATIC_ANALYSES.get(rule_id)
