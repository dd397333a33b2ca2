"""The engine stage: chat requests in, completions out, through a named engine.

Built-in engines: ``vllm`` (in-process), ``openai`` (OpenAI-compatible server),
``replay`` (recorded completions). Third-party engines plug in through the entry-point
group ``auditor.engines``. Importing this package never imports vLLM, and imports none of
its submodules: the names below load on first use, so ``from auditor.engine.base import
EngineSettings`` does not pay for the registry and the engines.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from auditor.engine.base import (
        ChatMessage,
        ChatRequest,
        Completion,
        Engine,
        EngineSettings,
        error_completion,
    )
    from auditor.engine.opening import EngineChoice, NoModel, choose_engine, open_engine
    from auditor.engine.reasoning import split_output, split_reasoning
    from auditor.engine.registry import (
        ENTRY_POINT_GROUP,
        available_engines,
        create_engine,
        register_engine,
    )

_SUBMODULE_OF: dict[str, str] = {
    "ChatMessage": "base",
    "ChatRequest": "base",
    "Completion": "base",
    "Engine": "base",
    "EngineSettings": "base",
    "error_completion": "base",
    "split_output": "reasoning",
    "split_reasoning": "reasoning",
    "ENTRY_POINT_GROUP": "registry",
    "available_engines": "registry",
    "create_engine": "registry",
    "register_engine": "registry",
    "choose_engine": "opening",
    "open_engine": "opening",
    "EngineChoice": "opening",
    "NoModel": "opening",
}

__all__ = [
    "ENTRY_POINT_GROUP",
    "ChatMessage",
    "ChatRequest",
    "Completion",
    "Engine",
    "EngineSettings",
    "available_engines",
    "create_engine",
    "error_completion",
    "register_engine",
    "choose_engine",
    "open_engine",
    "EngineChoice",
    "NoModel",
    "split_output",
    "split_reasoning",
]


def __getattr__(name: str) -> Any:
    """The public name from the submodule that defines it, imported on first use."""
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBMODULE_OF})
