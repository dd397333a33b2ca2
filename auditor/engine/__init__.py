"""The engine stage: chat requests in, completions out, through a named engine.

Built-in engines: ``vllm`` (in-process), ``openai`` (OpenAI-compatible server),
``replay`` (recorded completions). Third-party engines plug in through the entry-point
group ``auditor.engines``. Importing this package never imports vLLM.
"""

from auditor.engine.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    Engine,
    EngineSettings,
    error_completion,
)
from auditor.engine.reasoning import split_output, split_reasoning
from auditor.engine.registry import (
    ENTRY_POINT_GROUP,
    available_engines,
    create_engine,
    register_engine,
    resolve_auto,
)

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
    "resolve_auto",
    "split_output",
    "split_reasoning",
]
