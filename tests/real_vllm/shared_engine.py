"""``VllmEngine`` with the ``vllm.LLM`` built once per checkpoint and engine settings.

Each ``auditor scan`` builds its own engine from its flags; loading the model takes 25-50 s
on two CPU cores, so the real-engine tests share the loaded ``LLM`` between engines whose
``llm_kwargs`` (checkpoint, window, chunk size, prefix caching, ...) are equal. Sampling
settings (thinking budget, temperature) stay per engine. ``enforce_eager`` is forced on:
it halves the load time on the CPU backend.
"""

from __future__ import annotations

import dataclasses
import gc
import json
from typing import Any, ClassVar

from auditor.engine.base import EngineSettings
from auditor.engine.vllm_engine import VllmEngine, _tokenizer, llm_kwargs, think_close_token_id


class SharedLlmEngine(VllmEngine):
    """A ``VllmEngine`` that reuses a session-wide ``vllm.LLM`` for equal ``llm_kwargs``."""

    loaded: ClassVar[dict[str, Any]] = {}
    loads: ClassVar[int] = 0

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(dataclasses.replace(settings, enforce_eager=True))

    def _load(self) -> Any:
        if self._llm is None:
            key = json.dumps(llm_kwargs(self.settings), sort_keys=True, default=str)
            cached = self.loaded.get(key)
            if cached is None:
                self.loaded[key] = super()._load()
                SharedLlmEngine.loads += 1
            else:
                self._llm = cached
                self._think_close_id = think_close_token_id(_tokenizer(cached))
        return self._llm

    @classmethod
    def shutdown_all(cls) -> None:
        """Drop every shared LLM (its engine-core process exits with it)."""
        for llm in cls.loaded.values():
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
            if callable(shutdown):
                shutdown()
        cls.loaded.clear()
        gc.collect()
