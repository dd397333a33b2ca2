"""The defaults more than one module uses, each written once.

A leaf with no imports: the command line reads its option defaults from here without
loading a pipeline stage, and the stages' own option records default to the same values.
"""

from __future__ import annotations

# The model's context window in tokens (Nemotron 3 Nano's 262,144): the window packs fill.
MAX_MODEL_LEN = 262_144
# Reasoning traces on audit tasks run to tens of thousands of tokens; 32,768 leaves room for
# a long trace plus a findings answer while keeping 229,376 tokens (87.5%) for the prompt.
OUTPUT_TOKENS = 32_768
# Space kept in every window for its recall canaries and their questions: three canaries and
# their questions take at most ~940 tokens on a 131K-id vocabulary (measured over 20 seeds).
CANARY_RESERVE_TOKENS = 1_536
# Windows sent per repository (0: no limit).
MAX_WINDOWS = 0

# Recall canaries planted in every scan window, and the canary recall below which a window
# is recall-degraded.
CANARIES = 3
RECALL_THRESHOLD = 0.8

# ``auditor probe``: the grid's context lengths and depths (in percent) as ``--lengths`` and
# ``--depths`` take them, the canaries asked about per request, and the tokens reserved for
# each answer (a few recall questions without reasoning take a few hundred).
PROBE_LENGTHS = "8K,32K,64K,128K,200K,262144"
PROBE_DEPTHS = "0,10,20,30,40,50,60,70,80,90,100"
PROBE_CANARIES_PER_CELL = 3
PROBE_OUTPUT_TOKENS = 1_024

# Files larger than this many bytes are skipped by the walk.
MAX_FILE_BYTES = 1_000_000
# Seconds one file's indexing may take (a 1 MB file takes well under one) before it is skipped
# and listed as not audited: one hostile file never stalls a scan.
PARSE_BUDGET_S = 30.0
# Seconds the walk's work on one file (read, decode, classify, stand-in checks) may take
# before the file is dropped and listed as not audited ("file-deadline"): its later steps
# (index, pack) never run on it.
FILE_DEADLINE_S = 30.0

# vLLM: fraction of GPU memory it may use (its own default is 0.92; this keeps headroom).
GPU_MEMORY_UTILIZATION = 0.9
# vLLM: a few packed windows at once (its default of 256+ would reserve a Mamba state per slot).
MAX_NUM_SEQS = 4
# vLLM: chunked-prefill step size; the Spark measurements peak near 8K-token prefills (a
# 262K-token window prefills in 32 steps).
MAX_NUM_BATCHED_TOKENS = 8_192
# The device profile ``auditor plan`` estimates time for.
DEVICE_PROFILE = "dgx-spark"
# Above this many planned prompt tokens per token of audited code, scan and pack say so
# before anything is sent (``--max-token-ratio`` sets it and makes it fatal).
MAX_TOKEN_RATIO = 3.0
