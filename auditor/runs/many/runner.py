"""Run scan-many: parse the targets, then run the stages (plan, generate, finish) for every
repository, sequentially in-process or, when ray is installed and asked for, as the Ray
pipeline of ``auditor.runs.many.ray_cluster``.

The stages: plan (checkout, walk, index, pack into requests), generate (the engine, the
windows of all repositories batched together), finish (static pass, parse, ground,
render). Resume: each finished window is appended to ``state.jsonl`` under (repository,
window, rule set, prompt hash); the prompt hash covers the request's exact content and the
engine's output-changing settings, so a re-run sends only windows that are new, changed
or failed.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections import Counter
from collections.abc import Sequence

from auditor.engine.base import (
    ChatRequest,
    Completion,
    Engine,
    error_completion,
)
from auditor.engine.opening import EngineChoice, NoModel, choose_engine, open_engine
from auditor.errors import AuditorError, EngineUnavailable, UsageError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.runs.many.checkout import Checkout
from auditor.runs.many.outcomes import (
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
    RepositoryPlan,
    finish_repository,
    plan_target_isolated,
    throughput_message,
)
from auditor.runs.many.state import STATE_FILE, RunState, WorkItem, engine_fingerprint, work_item
from auditor.runs.many.targets import Target, parse_targets
from auditor.runs.prepare import selected_rules

logger = logging.getLogger(__name__)


RAY_MISSING_NOTICE = (
    "ray is not installed: running scan-many's stages sequentially in this process "
    "(install the extra with `pip install 'auditor[ray]'` to run them on a Ray cluster)"
)


def ray_available() -> bool:
    """Whether ray (with Ray Data) is installed, found without importing it."""
    try:
        return importlib.util.find_spec("ray") is not None and importlib.util.find_spec("ray.data") is not None
    except (ImportError, ValueError):
        return False


def run_many(config: ManyConfig, progress: ProgressCallback = no_progress) -> ManyResult:
    """Audit every target; write reports, the index and the state into ``config.out``.

    Runs on Ray when ray is installed (backend "auto" or "ray"), else sequentially in this
    process and says so. Raises ``AuditorError`` only for setup failures (no targets, an
    unknown rule or engine); per-repository and per-window failures are in the result.
    """
    targets = parse_targets(config.targets)
    selected_rules(config.scan.rules)  # an unknown rule is a setup error, not 100 repository failures
    if config.backend == "ray" or (config.backend == "auto" and ray_available()):
        if not ray_available():
            raise UsageError("--backend ray needs ray: pip install 'auditor[ray]'")
        from auditor.runs.many.ray_cluster import run_many_ray

        return run_many_ray(config, targets, progress)
    if config.backend == "auto":
        progress(ProgressEvent(stage="scan-many", message=RAY_MISSING_NOTICE))
    choice = choose_engine(config.scan.engine, config.scan.engine_settings, endpoints=config.endpoints)
    for notice in choice.notices:
        progress(ProgressEvent(stage="scan-many", message=notice))
    return run_many_sequential(config, targets, choice, progress)


def run_many_sequential(
    config: ManyConfig,
    targets: Sequence[Target],
    choice: EngineChoice,
    progress: ProgressCallback = no_progress,
) -> ManyResult:
    """The scan-many stages one after another in this process (same outputs as on Ray)."""
    state = RunState(config.out / STATE_FILE)
    engine = open_engine(choice, config.scan.engine_settings, use_cache=config.scan.use_cache, endpoints=config.endpoints)
    fingerprint = engine_fingerprint(choice.name, config.scan.engine_settings)
    plans: dict[str, tuple[RepositoryPlan, Checkout]] = {}
    outcomes: dict[str, RepositoryOutcome] = {}
    for number, target in enumerate(targets, start=1):
        try:
            plans[target.key] = plan_target_isolated(target, config, choice)
        except (AuditorError, OSError) as exc:
            logger.warning("repository %s failed: %s", target.key, exc)
            state.record_repository_failure(target.key, str(exc))
            outcomes[target.key] = failed_outcome(target, str(exc))
        progress(ProgressEvent(stage="pack", completed=number, total=len(targets)))

    answers: dict[str, dict[int, Completion]] = {key: {} for key in plans}
    pending: list[tuple[str, int, WorkItem, ChatRequest]] = []
    for key, (plan, _) in sorted(plans.items()):
        for index, request in enumerate(plan.requests):
            item = work_item(key, index, plan.rule_set, request, fingerprint)
            done = state.done(item, request)
            if done is None:
                pending.append((key, index, item, request))
            else:
                answers[key][index] = done
    generated = _generate_sequential(engine, pending, answers, state, config.batch_size, progress)
    pending_counts = Counter(entry[0] for entry in pending)

    by_key = {target.key: target for target in targets}
    for number, (key, (plan, checkout)) in enumerate(sorted(plans.items()), start=1):
        completions = [answers[key][index] for index in range(len(plan.requests))]
        reused = len(plan.requests) - pending_counts.get(key, 0)
        try:
            result = finish_repository(plan, completions)
            reports = render_reports(result, config.formats)
            write_reports(config.out, key, reports)
        except (AuditorError, OSError, ValueError) as exc:
            state.record_repository_failure(key, str(exc))
            outcomes[key] = failed_outcome(by_key[key], str(exc))
        else:
            outcomes[key] = succeeded_outcome(by_key[key], checkout.commit, result, reused, reports)
        progress(ProgressEvent(stage="report", completed=number, total=len(plans)))
    many = ManyResult(out=config.out, backend="sequential", engine=choice.name,
                      repositories=tuple(outcomes[key] for key in sorted(outcomes)),
                      windows_generated=generated, notices=choice.notices)
    write_index(many)
    progress(ProgressEvent(stage="scan-many", message=many.summary()))
    return many


def _generate_sequential(
    engine: Engine | NoModel,
    pending: Sequence[tuple[str, int, WorkItem, ChatRequest]],
    answers: dict[str, dict[int, Completion]],
    state: RunState,
    batch_size: int,
    progress: ProgressCallback,
) -> int:
    """Send the pending windows of all repositories in batches; record each answer."""
    if not pending:
        return 0
    if isinstance(engine, NoModel):
        raise UsageError("windows to generate but no model engine")  # plans of the static engine have no requests
    started, tokens, last_message = time.monotonic(), 0, time.monotonic()
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        try:
            completions = engine.generate([entry[3] for entry in batch])
        except EngineUnavailable as exc:
            completions = [error_completion(entry[3], str(exc)) for entry in batch]
        for (key, index, item, request), completion in zip(batch, completions):
            state.record(item, completion)
            answers[key][index] = completion
            tokens += completion.completion_tokens
        done, now = start + len(batch), time.monotonic()
        message = None
        if done == len(pending) or now - last_message >= THROUGHPUT_INTERVAL_S:
            message = throughput_message(done, len(pending), tokens, now - started)
            last_message = now
        progress(ProgressEvent(stage="generate", completed=done, total=len(pending), message=message))
    return len(pending)
