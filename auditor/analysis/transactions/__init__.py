"""The static tx-outside-transaction analysis, one module per job.

- :mod:`.analysis`: the run (:func:`analyze_tx_outside_transaction`, :class:`TxOptions`,
  :class:`StaticResult`): wires the steps below together, in order; its docstring says
  what counts and how severe it is.
- :mod:`.explain`: why one function was or was not reported (:func:`explain`).
- :mod:`.base`: the model interface and effect kinds; :mod:`.django`, :mod:`.sqlalchemy`,
  :mod:`.spring`, :mod:`.go_sql`, :mod:`.side_effects` and :mod:`.generic`: one
  transaction model per framework; :mod:`.effects`: the models asked in order and the
  effect a call counts as.
- :mod:`.framework_facts`: framework facts as data (``models/*.yaml`` and a project's
  ``--tx-models`` files): boundaries, opt-outs, after-commit calls, writes, the signals
  sent inside a transaction, and DRF's dispatch; the format is in docs/tx-models.md.
- :mod:`.framework_calls`: the framework's calls into the project as edges (DRF's view
  actions to the serializer's ``create``/``update``, a project signal's ``send`` to its
  receivers) and the view actions that are entry points.
- :mod:`.facts`: per-file effect sites and the regions boundaries cover; :mod:`.facts_cache`
  keeps each file's by what they read, so an edit recomputes only the edited file's.
- :mod:`.result_memo`: a whole run's result kept under a key of every input (an unchanged
  repository analysed again with the same options is a lookup).
- :mod:`.boundaries`: which decorators, ``with`` expressions and entry points open a
  transaction (a delete's ``pre_delete``/``post_delete`` receivers run inside one), and
  which call edges a boundary blocks.
- :mod:`.reach`: entry points (less the framework-called ones a real entry point reaches),
  the edges followed (graph plus :mod:`.framework_calls`, :mod:`.dispatch` and
  :mod:`.receivers` edges) and the search from the entry points.
- :mod:`.arguments`: a call's arguments against its callee's parameters (which are false).
- :mod:`.sequences`: each function's heaviest feasible path of effects, walked by
  :mod:`.paths`, less the registry rows :mod:`.registry_rows` sets aside; :mod:`.memo`:
  helpers memoized on an object write once per path; :mod:`.stored_flags`: false arguments
  stored on ``self`` switch off its methods' arms.
- :mod:`.grading`: the severity of a path and its reason; :mod:`.assessment`: likelihood ×
  impact (:mod:`.likelihood`, :mod:`.impact`) and the grade's evidence.
- :mod:`.findings`: graded paths to findings (folding helpers into their callers);
  :mod:`.ordering`: how convincing each is (the report's order within a severity).
- :mod:`.scanning`: text scanning (the one bracket scanner, a call's text, file lines).
- :mod:`.languages`: what differs per language, as data.
"""

from auditor.analysis.transactions.analysis import (
    InvalidSeverityError,
    StaticResult,
    TxOptions,
    analyze_tx_outside_transaction,
)
from auditor.analysis.transactions.effects import MODELS
from auditor.analysis.transactions.findings import FOUND_BY

__all__ = ["FOUND_BY", "MODELS", "InvalidSeverityError", "StaticResult", "TxOptions", "analyze_tx_outside_transaction"]
