"""One way to get an engine: ``choose_engine`` resolves ``--engine`` (``auto`` included) to an
``EngineChoice``, and ``open_engine`` turns a choice into something that answers requests —
an ``Engine`` (wrapped in the result cache, spread over an endpoint pool) or ``NoModel``
when only the static pass runs.

Every command that runs a model (scan, review, scan-many, probe) and ``doctor`` ask these
two functions; none restates the ``auto`` rule.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from auditor.engine.base import Engine, EngineSettings
from auditor.engine.openai_engine import BASE_URL_ENV  # the server URL's variable, in one place

STATIC: Final = "static"
AUTO: Final = "auto"


@dataclass(frozen=True)
class EngineChoice:
    """The engine a run will use: a registered engine's name, or no model at all.

    ``notice`` says why ``auto`` chose it (None when the user named the engine).
    """

    name: str
    notice: str | None = None

    @property
    def runs_model(self) -> bool:
        """False for the static pass only."""
        return self.name != STATIC

    @property
    def notices(self) -> tuple[str, ...]:
        """The notice as a tuple, for results that collect notices."""
        return (self.notice,) if self.notice else ()


NO_MODEL: Final = EngineChoice(STATIC)


@dataclass(frozen=True)
class NoModel:
    """What ``open_engine`` gives for the static choice: nothing to send requests to."""

    name: str = STATIC


def auto_rule(*, vllm_problem: str | None, base_url: str | None) -> tuple[str, str]:
    """The ``auto`` rule itself, from what this machine has: vllm when it imports with a CUDA
    device, else openai when a base URL is set, else static. Returns (name, reason)."""
    if vllm_problem is None:
        return "vllm", "vllm is installed and a CUDA device is present: running the model in-process"
    if base_url:
        return "openai", f"{vllm_problem}: using the OpenAI-compatible server at {base_url}"
    return STATIC, f"{vllm_problem} and no {BASE_URL_ENV}: running the static pass only (no model)"


def choose_engine(
    requested: str, settings: EngineSettings, *, endpoints: Sequence[str] = (), cluster_gpus: float = 0.0
) -> EngineChoice:
    """Resolve ``--engine``: any name but ``auto`` as given; ``auto`` is openai when scan-many
    was given endpoints, vllm when its Ray cluster has GPUs (the driver itself may have
    none), else the rule above for this machine (never a CPU-only vLLM). Imports nothing
    heavy unless vLLM is installed."""
    if requested != AUTO:
        return EngineChoice(requested)
    if endpoints:
        return EngineChoice("openai", f"engine auto -> openai: {len(endpoints)} endpoint(s) given")
    if cluster_gpus > 0:
        return EngineChoice("vllm", f"engine auto -> vllm: the Ray cluster has {cluster_gpus:g} GPU(s)")
    from auditor.engine.vllm_engine import vllm_unavailable_reason

    name, reason = auto_rule(
        vllm_problem=vllm_unavailable_reason(), base_url=settings.base_url or os.environ.get(BASE_URL_ENV)
    )
    return EngineChoice(name, f"engine auto -> {name}: {reason}")


def open_engine(
    choice: EngineChoice,
    settings: EngineSettings,
    *,
    use_cache: bool = True,
    endpoints: Sequence[str] = (),
    cache_dir: Path | None = None,
) -> Engine | NoModel:
    """The engine for ``choice``: ``NoModel`` for the static pass; for ``openai`` with several
    ``endpoints``, a pool spreading requests over them; wrapped in the on-disk result cache
    unless ``use_cache`` is False. Raises UsageError for an unknown name and
    EngineUnavailable when the engine cannot run here."""
    if not choice.runs_model:
        return NoModel()
    from auditor.engine.registry import create_engine

    if choice.name == "openai" and len(endpoints) > 1:
        from auditor.engine.pool import EndpointPoolEngine

        engine: Engine = EndpointPoolEngine([create_engine("openai", replace(settings, base_url=url)) for url in endpoints])
    else:
        if choice.name == "openai" and endpoints:
            settings = replace(settings, base_url=endpoints[0])
        engine = create_engine(choice.name, settings)
    if not use_cache:
        return engine
    from auditor.engine.result_cache import CachingEngine, default_result_cache_dir

    return CachingEngine(engine, cache_dir or default_result_cache_dir())
