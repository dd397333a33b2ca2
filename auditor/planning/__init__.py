"""Planning stage: what running the model takes, before running it.

- ``checkpoint``: reading a checkpoint (directory, cached HF id or bare config.json) and
  its weight precision; ``PlanError``.
- ``plan``: the memory plan (weights, KV cache, Mamba state, what fits in a GPU) and the
  exact ``vllm.LLM`` arguments.
- ``timing``: seconds per request from the shipped device profiles
  (``device_profiles.json``).

Nothing here imports vLLM or torch, or downloads. The machine check that uses these
(``auditor doctor``) is ``auditor.engine.doctor``.
"""
