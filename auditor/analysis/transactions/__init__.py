"""The static tx-outside-transaction analysis, one transaction model per framework.

Modules: :mod:`.base` (the model interface and effect kinds), :mod:`.django`,
:mod:`.sqlalchemy`, :mod:`.spring`, :mod:`.go_sql`, :mod:`.side_effects` and
:mod:`.generic` (the models), :mod:`.paths` (path-sensitive sequences),
:mod:`.dispatch` (class-hierarchy and ``getattr`` dispatch edges) and :mod:`.analysis`
(reachability, sequences and findings).
"""

from auditor.analysis.transactions.analysis import (
    FOUND_BY,
    MODELS,
    InvalidSeverityError,
    StaticResult,
    TxOptions,
    analyze_tx_outside_transaction,
)

__all__ = ["FOUND_BY", "MODELS", "InvalidSeverityError", "StaticResult", "TxOptions", "analyze_tx_outside_transaction"]
