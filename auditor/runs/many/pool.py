"""Engines for scan-many: one engine per run (``build_engine``), an endpoint pool that spreads
requests over several OpenAI-compatible servers, and the fingerprint of the settings that
change an engine's output (part of every state record's prompt hash).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from auditor.engine.base import (
    ChatRequest,
    Completion,
    Engine,
    EngineSettings,
    error_completion,
)
from auditor.engine.registry import create_engine
from auditor.engine.result_cache import CachingEngine
from auditor.errors import EngineUnavailable, UsageError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress


def engine_fingerprint(engine: str, settings: EngineSettings) -> str:
    """The engine name and every setting that changes its outputs, as canonical JSON.

    Computed without creating the engine (the driver of a Ray run may have no GPU), so it
    names the recording file for replay rather than digesting it.
    """
    return json.dumps(
        {
            "engine": engine,
            "model": settings.model,
            "kv_cache_dtype": settings.kv_cache_dtype,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "seed": settings.seed,
            "thinking_token_budget": settings.thinking_token_budget,
            "replay_path": settings.replay_path,
        },
        sort_keys=True,
    )


class EndpointPoolEngine:
    """The ``openai`` engine over several ``vllm serve`` endpoints: a batch is dealt out
    round-robin, each endpoint's share sent concurrently; an endpoint found unreachable is
    dropped and its share goes to the others. Requests nobody can answer get error
    completions."""

    name = "openai"

    def __init__(self, engines: Sequence[Engine]) -> None:
        """Spread requests over ``engines`` (one per endpoint); UsageError when there are none."""
        if not engines:
            raise UsageError("the endpoint pool needs at least one endpoint")
        self._engines = list(engines)

    def identity(self) -> str:
        """The first reachable endpoint's identity (every endpoint serves the same model)."""
        problems = []
        for engine in self._engines:
            try:
                return engine.identity()
            except EngineUnavailable as exc:
                problems.append(str(exc))
        raise EngineUnavailable("no endpoint is reachable: " + "; ".join(problems))

    def generate(self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress) -> list[Completion]:
        """One completion per request, in request order."""
        results: dict[int, Completion] = {}
        pending = list(range(len(requests)))
        live = list(self._engines)
        problems: list[str] = []
        while pending and live:
            shares = {slot: pending[slot :: len(live)] for slot in range(len(live))}
            with ThreadPoolExecutor(max_workers=len(live)) as pool:
                futures = {
                    slot: pool.submit(live[slot].generate, [requests[i] for i in share])
                    for slot, share in shares.items()
                    if share
                }
            pending, dead = [], []
            for slot, future in sorted(futures.items()):
                try:
                    completions = future.result()
                except EngineUnavailable as exc:
                    problems.append(str(exc))
                    dead.append(slot)
                    pending.extend(shares[slot])
                    continue
                results.update(zip(shares[slot], completions))
            live = [engine for slot, engine in enumerate(live) if slot not in dead]
            pending.sort()
            progress(ProgressEvent(stage="engine", completed=len(results), total=len(requests)))
        for index in pending:
            results[index] = error_completion(requests[index], "no endpoint is reachable: " + "; ".join(problems))
        return [results[index] for index in range(len(requests))]


def build_engine(name: str, settings: EngineSettings, endpoints: Sequence[str] = (), use_cache: bool = False) -> Engine:
    """The engine to generate with: ``name`` from the registry, the endpoint pool for
    ``openai`` with endpoints, wrapped in the shared result cache when ``use_cache``."""
    if name == "openai" and endpoints:
        engines = [create_engine("openai", replace(settings, base_url=url)) for url in endpoints]
        engine: Engine = engines[0] if len(engines) == 1 else EndpointPoolEngine(engines)
    else:
        engine = create_engine(name, settings)
    return CachingEngine(engine) if use_cache else engine
