"""The endpoint pool: the ``openai`` engine over several ``vllm serve`` endpoints, so one run
can spread its windows over many servers."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from auditor.engine.base import ChatRequest, Completion, Engine, error_completion
from auditor.errors import EngineUnavailable, UsageError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress


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
