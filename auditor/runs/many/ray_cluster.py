"""Scan many on Ray Data: the scan-many stages as one streaming pipeline.

Inputs: a ``ManyConfig``, its parsed targets and the resolved engine name. Output: the
same ``ManyResult``, reports, index and state as ``auditor.runs.many.run_many_sequential``.

Pipeline (Ray Data, streaming)::

    targets ──flat_map (CPU tasks: checkout, walk, index, pack)──▶
        one "repository" row per target + one "window" row per window still to generate
    ──map_batches(GenerationActor, ActorPoolStrategy(size=workers), num_gpus=gpus_per_worker)──▶
        window rows of all repositories batched together, completions filled in
    ──driver: iter_rows──▶ state.jsonl (each answer recorded as it arrives)
    then repositories ──map (CPU tasks: static pass, parse, ground, render)──▶ driver writes reports + index

Generation path: auditor's own ``GenerationActor`` running one engine per actor —
for ``vllm`` one in-process ``vllm.LLM`` through ``auditor.engine.vllm_engine.VllmEngine``,
for ``openai`` the endpoint pool over ``vllm serve`` servers (actors without GPUs).
``ray.data.llm``'s vLLM processor is not used: ray[llm] 2.60 pins vLLM 0.29.0 while
auditor needs 0.33 (``StructuredOutputsParams``, the ``nemotron_v3`` reasoning parser
settings, ``thinking_token_budget``), and the processor would bypass the engine's
admission check (one over-long prompt aborts vLLM's whole batch) and its reasoning split.

Plans travel between the pack and finish stages as files under ``OUT/work`` (a pickle of
``RepositoryPlan`` written by this run), so on a multi-node cluster ``--out`` must be on
storage every node mounts. Ray workers run in an empty working directory
(``runtime_env["working_dir"]``) so that they import the installed auditor whatever the
directory the run was started from: by default Ray puts the driver's current directory
first on every worker's ``sys.path``, and a folder named ``auditor`` there (a Django app, a
checkout) would shadow the package. Relative paths in the configuration are made absolute
first. Ray retries lost tasks and restarts lost actors (Ray Data's
defaults: ``max_restarts=-1``, ``max_task_retries=-1``); answers already recorded in the
state are not asked for again on a re-run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import pickle
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from auditor.engine.base import (
    ChatRequest,
    Completion,
    EngineSettings,
    error_completion,
)
from auditor.engine.opening import EngineChoice, choose_engine, open_engine
from auditor.errors import AuditorError, EngineUnavailable
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.runs.many.outcomes import (
    FAILED,
    ManyResult,
    RepositoryOutcome,
    failed_outcome,
    render_reports,
    succeeded_outcome,
    write_index,
    write_reports,
)
from auditor.runs.many.stages import (
    THROUGHPUT_INTERVAL_S,
    ManyConfig,
    finish_repository,
    plan_target,
    throughput_message,
)
from auditor.runs.many.state import (
    STATE_FILE,
    RunState,
    WorkItem,
    completion_from_json,
    completion_to_json,
    engine_fingerprint,
    request_from_json,
    request_to_json,
    work_item,
)
from auditor.runs.many.targets import Target

logger = logging.getLogger(__name__)

REPOSITORY_ROW = "repository"
WINDOW_ROW = "window"


class PipelineError(AuditorError):
    """A Ray stage failed as a whole (an actor that cannot start its engine, a lost cluster)."""


@dataclass(frozen=True)
class GenerationOptions:
    """What each generation actor builds its engine from."""

    engine: EngineChoice
    settings: EngineSettings
    endpoints: tuple[str, ...] = ()
    use_cache: bool = False


def _row(kind: str, repository: str, **values: Any) -> dict[str, Any]:
    """A pipeline row; every row has every column so blocks share one schema."""
    row = {"kind": kind, "repository": repository, "window": -1, "item": "", "request": "",
           "completion": "", "error": "", "commit": "", "items": "[]"}
    row.update(values)
    return row


def pack_rows(row: dict[str, Any], *, config: ManyConfig, engine: EngineChoice,
              done: frozenset[str], fingerprint: str) -> list[dict[str, Any]]:
    """CPU stage: check out, walk, index and pack one target; write its plan to ``OUT/work``.

    Returns its repository row (with the error when it failed) and one window row per
    request whose work item is not in ``done``.
    """
    target = Target(key=row["key"], source=row["source"], revision=row["revision"] or None, is_git=bool(row["is_git"]))
    try:
        plan, checkout = plan_target(target, config, engine)
        path = plan_path(config.out, target.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps((plan, checkout), protocol=pickle.HIGHEST_PROTOCOL))
    except (AuditorError, OSError) as exc:
        return [_row(REPOSITORY_ROW, target.key, error=str(exc) or type(exc).__name__)]
    items = [item_token(work_item(target.key, index, plan.rule_set, request, fingerprint))
             for index, request in enumerate(plan.requests)]
    rows = [_row(REPOSITORY_ROW, target.key, commit=checkout.commit or "", items=json.dumps(items))]
    for index, (token, request) in enumerate(zip(items, plan.requests)):
        if token not in done:
            rows.append(_row(WINDOW_ROW, target.key, window=index, item=token, request=request_to_json(request)))
    return rows


def plan_path(out: Path, key: str) -> Path:
    """Where the pack stage leaves a repository's plan for the finish stage."""
    return out / "work" / f"{key}.plan.pickle"


def item_token(item: WorkItem) -> str:
    """A work item as one string (a row value)."""
    return json.dumps([item.repository, item.window, item.rules, item.prompt_hash])


def item_from_token(token: str) -> WorkItem:
    """The work item ``item_token`` wrote."""
    repository, window, rules, prompt_hash = json.loads(token)
    return WorkItem(repository, window, rules, prompt_hash)


class GenerationActor:
    """GPU stage: one engine per Ray actor (one in-process ``vllm.LLM`` for vllm), answering
    the window rows of a batch in one ``generate`` call and passing other rows through.

    Constructing it creates the engine, so a missing vLLM or GPU fails the actor at start
    with ``EngineUnavailable``; the model itself loads on the first batch.
    """

    def __init__(self, options: GenerationOptions) -> None:
        """Build the engine named by ``options``."""
        self.options = options
        self.engine = open_engine(options.engine, options.settings, use_cache=options.use_cache, endpoints=options.endpoints)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        """Fill ``completion`` for every window row of ``batch`` (a column -> values mapping)."""
        columns = {name: list(values) for name, values in batch.items()}
        positions = [i for i, kind in enumerate(columns["kind"]) if kind == WINDOW_ROW]
        requests = [request_from_json(columns["request"][i]) for i in positions]
        try:
            completions = self.engine.generate(requests) if requests else []
        except EngineUnavailable as exc:
            completions = [error_completion(request, str(exc)) for request in requests]
        for position, completion in zip(positions, completions):
            columns["completion"][position] = completion_to_json(completion)
        return columns


def generation_resources(config: ManyConfig, engine: EngineChoice) -> float:
    """GPUs per generation actor: ``--gpus-per-worker``, else the tensor-parallel size for
    vllm and none for engines that run elsewhere (openai, replay)."""
    if config.gpus_per_worker is not None:
        return config.gpus_per_worker
    return float(config.scan.engine_settings.tensor_parallel_size) if engine.name == "vllm" else 0.0


def finish_row(row: dict[str, Any], *, config: ManyConfig) -> dict[str, Any]:
    """CPU stage: static pass, parse, ground and render one repository from its plan and completions."""
    path = plan_path(config.out, row["repository"])
    plan, checkout = pickle.loads(path.read_bytes())
    completions = [completion_from_json(text) for text in json.loads(row["completions"])]
    # A window whose answer never came back has a placeholder without a prompt count.
    completions = [
        replace(c, request_id=r.id, prompt_tokens=c.prompt_tokens or r.prompt_tokens)
        for c, r in zip(completions, plan.requests)
    ]
    target = Target(key=row["key"], source=row["source"], revision=row["revision"] or None, is_git=bool(row["is_git"]))
    try:
        result = finish_repository(plan, completions)
        reports = render_reports(result, config.formats)
    except (AuditorError, ValueError) as exc:
        outcome = failed_outcome(target, str(exc))
        return {"repository": row["repository"], "reports": "{}", "outcome": pickle.dumps(outcome)}
    outcome = succeeded_outcome(target, checkout.commit, result, int(row["reused"]), reports)
    return {"repository": row["repository"], "reports": json.dumps(reports), "outcome": pickle.dumps(outcome)}


def run_many_ray(config: ManyConfig, targets: Sequence[Target], progress: ProgressCallback = no_progress) -> ManyResult:
    """Run scan-many as a Ray Data pipeline on the cluster at ``config.ray_address`` (a
    local instance when None; an already initialised Ray is used as is)."""
    import ray

    started_here = False
    config = with_absolute_paths(config)
    if not ray.is_initialized():
        with worker_runtime_env() as runtime_env:
            ray.init(
                address=config.ray_address,
                include_dashboard=False,
                logging_level=logging.WARNING,
                runtime_env=runtime_env,
            )
        started_here = True
    try:
        engine = choose_engine(config.scan.engine, config.scan.engine_settings, endpoints=config.endpoints,
                               cluster_gpus=ray.cluster_resources().get("GPU", 0.0))
        for notice in engine.notices:
            progress(ProgressEvent(stage="scan-many", message=notice))
        return _run(config, targets, engine, progress)
    finally:
        if started_here:
            ray.shutdown()


@contextmanager
def worker_runtime_env() -> Iterator[dict[str, Any]]:
    """The runtime environment ``ray.init`` gets: an empty working directory (uploaded at
    init, so it may go once init returns). With a working directory Ray adds neither the
    driver's current directory nor its script's directory to the workers' ``sys.path``."""
    with tempfile.TemporaryDirectory(prefix="auditor-ray-workdir-") as empty:
        yield {"working_dir": empty}


def with_absolute_paths(value: Any) -> Any:
    """``value`` (a dataclass, nested ones included) with every relative Path field (alone
    or in a tuple) made absolute against the current directory, which workers do not share."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for item in dataclasses.fields(value):
        if not item.init:
            continue
        current = getattr(value, item.name)
        if isinstance(current, Path):
            updated: Any = current if current.is_absolute() else current.absolute()
        elif isinstance(current, tuple) and any(isinstance(part, Path) for part in current):
            updated = tuple(part.absolute() if isinstance(part, Path) else part for part in current)
        else:
            updated = with_absolute_paths(current)
        if updated is not current:
            changes[item.name] = updated
    return replace(value, **changes) if changes else value


def _target_row(target: Target) -> dict[str, Any]:
    return {"key": target.key, "source": target.source, "revision": target.revision or "", "is_git": target.is_git}


def _run(config: ManyConfig, targets: Sequence[Target], engine: EngineChoice, progress: ProgressCallback) -> ManyResult:
    import ray.data

    state = RunState(config.out / STATE_FILE)
    fingerprint = engine_fingerprint(engine.name, config.scan.engine_settings)
    done = frozenset(item_token(item) for item in state.done_items())
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    pack = functools.partial(pack_rows, config=config, engine=engine, done=done, fingerprint=fingerprint)
    packed = ray.data.from_items([_target_row(t) for t in targets], override_num_blocks=len(targets)).flat_map(pack)
    if engine.runs_model:
        from ray.data import ActorPoolStrategy

        options = GenerationOptions(engine, config.scan.engine_settings, config.endpoints, config.scan.use_cache)
        packed = packed.map_batches(
            GenerationActor,
            fn_constructor_kwargs={"options": options},
            compute=ActorPoolStrategy(size=config.workers),
            num_gpus=generation_resources(config, engine),
            batch_size=config.batch_size,
            batch_format="numpy",
        )

    by_key = {target.key: target for target in targets}
    repositories: dict[str, dict[str, Any]] = {}
    fresh: dict[str, dict[int, Completion]] = {}
    generated = tokens = 0
    started = last_message = time.monotonic()
    for row in _rows(packed):
        key = row["repository"]
        if row["kind"] == REPOSITORY_ROW:
            repositories[key] = row
            progress(ProgressEvent(stage="pack", completed=len(repositories), total=len(targets)))
            continue
        completion = completion_from_json(row["completion"])
        item = item_from_token(row["item"])
        state.record(item, completion)
        fresh.setdefault(key, {})[int(row["window"])] = completion
        generated += 1
        tokens += completion.completion_tokens
        now = time.monotonic()
        message = None
        if now - last_message >= THROUGHPUT_INTERVAL_S:
            message, last_message = throughput_message(generated, generated, tokens, now - started), now
        progress(ProgressEvent(stage="generate", completed=generated, message=message))
    if generated:
        progress(ProgressEvent(stage="generate", completed=generated, total=generated,
                               message=throughput_message(generated, generated, tokens, time.monotonic() - started)))

    outcomes: dict[str, RepositoryOutcome] = {}
    finish_rows = []
    for key in sorted(repositories):
        row = repositories[key]
        if row["error"]:
            state.record_repository_failure(key, row["error"])
            outcomes[key] = failed_outcome(by_key[key], row["error"])
            continue
        items = [item_from_token(token) for token in json.loads(row["items"])]
        completions, reused = _completions_for(items, state, fresh.get(key, {}))
        finish_rows.append({**_target_row(by_key[key]), "repository": key, "reused": reused,
                            "completions": json.dumps([completion_to_json(c) for c in completions])})
    if finish_rows:
        finished = ray.data.from_items(finish_rows, override_num_blocks=len(finish_rows)).map(
            functools.partial(finish_row, config=config))
        for number, row in enumerate(_rows(finished), start=1):
            key = row["repository"]
            outcomes[key] = pickle.loads(row["outcome"])
            if outcomes[key].status == FAILED:
                state.record_repository_failure(key, outcomes[key].error or "finish failed")
            else:
                write_reports(config.out, key, json.loads(row["reports"]))
            plan_path(config.out, key).unlink(missing_ok=True)
            progress(ProgressEvent(stage="report", completed=number, total=len(finish_rows)))
    many = ManyResult(out=config.out, backend="ray", engine=engine.name,
                      repositories=tuple(outcomes[key] for key in sorted(outcomes)),
                      windows_generated=generated, notices=engine.notices)
    write_index(many)
    progress(ProgressEvent(stage="scan-many", message=many.summary()))
    return many


def _rows(dataset: Any) -> Iterator[dict[str, Any]]:
    """The dataset's rows as they stream out; a failed stage becomes a ``PipelineError``."""
    import ray.exceptions

    try:
        yield from dataset.iter_rows()
    except ray.exceptions.RayError as exc:
        raise PipelineError(
            f"the Ray pipeline failed: {exc}. Answers received so far are kept in the run's "
            f"{STATE_FILE}: re-run with the same --out to resume"
        ) from exc


def _completions_for(items: Sequence[WorkItem], state: RunState, fresh: dict[int, Completion]) -> tuple[list[Completion], int]:
    """Each window's completion: this run's answer, else the state's; and how many came from
    the state. A window with neither (its row was lost) gets an error completion."""
    completions, reused = [], 0
    for index, item in enumerate(items):
        placeholder = ChatRequest(id=f"{item.repository}/window-{index}", messages=(), prompt_tokens=0, max_tokens=0)
        answer = fresh.get(index)
        if answer is None:
            answer = state.done(item, placeholder)
            reused += answer is not None
        completions.append(answer or error_completion(placeholder, "no completion came back from the pipeline"))
    return completions, reused


__all__ = [
    "GenerationActor",
    "GenerationOptions",
    "PipelineError",
    "finish_row",
    "generation_resources",
    "pack_rows",
    "run_many_ray",
]
