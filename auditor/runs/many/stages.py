"""The scan-many stages shared by the sequential runner and the Ray pipeline: plan a
repository (checkout, walk, index, pack into requests) and finish it (static pass, parse,
ground, render), each through ``run_scan`` itself so each report is exactly `auditor
scan`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from auditor.engine.base import (
    ChatRequest,
    Completion,
)
from auditor.engine.opening import EngineChoice
from auditor.errors import AuditorError, UsageError
from auditor.progress import ProgressCallback, no_progress
from auditor.report import Format
from auditor.report.model import ScanResult
from auditor.config.scan import ScanConfig
from auditor.runs.many.checkout import Checkout, checkout_target
from auditor.runs.many.outcomes import REPORT_FILES
from auditor.runs.many.state import rule_set
from auditor.runs.many.targets import Target
from auditor.runs.scan import (
    ScanPlan,
    finish_scan,
    plan_scan,
)

Backend = Literal["auto", "ray", "sequential"]


THROUGHPUT_INTERVAL_S = 30.0


@dataclass(frozen=True)
class ManyConfig:
    """One scan-many run.

    ``scan`` is the template every repository is scanned with (its ``root`` is replaced).
    ``endpoints`` are OpenAI-compatible base URLs for the ``openai`` engine, requests being
    spread over them. ``batch_size`` is how many windows go to one engine call (one Ray
    batch). ``workers`` is the size of the generation actor pool, ``gpus_per_worker`` each
    actor's GPUs (default: the tensor-parallel size for vllm, 0 otherwise).
    """

    targets: Path
    out: Path
    scan: ScanConfig = field(default_factory=lambda: ScanConfig(root=Path(".")))
    endpoints: tuple[str, ...] = ()
    formats: tuple[Format, ...] = (Format.JSON, Format.SARIF, Format.MARKDOWN)
    batch_size: int = 8
    backend: Backend = "auto"
    ray_address: str | None = None
    workers: int = 1
    gpus_per_worker: float | None = None
    # Seconds one repository may take to check out, walk, index, analyse and pack, in a
    # process of its own (0: no limit, in this process). A repository over it is failed
    # and stopped; the others go on. The CLI's default is 1800.
    target_timeout_s: float = 0.0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.formats) - set(REPORT_FILES))
        if unknown:
            raise UsageError(f"unknown report format(s) {', '.join(unknown)}; known: {', '.join(sorted(REPORT_FILES))}")
        if self.batch_size < 1:
            raise UsageError("--batch-size must be at least 1")
        if self.workers < 1:
            raise UsageError("--workers must be at least 1")
        if self.target_timeout_s < 0:
            raise UsageError("--target-timeout must not be negative")
        if self.gpus_per_worker is not None and self.gpus_per_worker < 0:
            raise UsageError("--gpus-per-worker must not be negative")


@dataclass(frozen=True)
class RepositoryPlan:
    """A repository ready for generation: ``auditor.runs.scan``'s plan with request ids
    ``<key>/window-<i>`` (none for the static engine), plus the rule-set key for resume."""

    key: str
    scan: ScanPlan
    rule_set: str

    @property
    def requests(self) -> tuple[ChatRequest, ...]:
        """The repository's requests, in window order."""
        return self.scan.requests


def plan_repository(
    key: str,
    config: ScanConfig,
    engine: EngineChoice,
    progress: ProgressCallback = no_progress,
) -> RepositoryPlan:
    """Walk, index, statically analyse and pack ``config.root`` exactly as ``auditor scan``
    does for ``engine``, with request ids prefixed by ``key``."""
    plan = plan_scan(config, engine, request_prefix=f"{key}/", progress=progress)
    return RepositoryPlan(key, plan, rule_set(plan.inputs.rules))


def finish_repository(plan: RepositoryPlan, completions: Sequence[Completion]) -> ScanResult:
    """The ``ScanResult`` ``auditor scan`` gives for this repository when the model answers
    with ``completions`` (one per request, in order)."""
    return finish_scan(plan.scan, completions)


def throughput_message(done: int, total: int, completion_tokens: int, seconds: float) -> str:
    """'12/40 windows generated, 1,234 completion tokens/s'."""
    rate = completion_tokens / seconds if seconds > 0 else 0.0
    return f"{done}/{total} windows generated, {rate:,.0f} completion tokens/s"


def plan_target(target: Target, config: ManyConfig, engine: EngineChoice) -> tuple[RepositoryPlan, Checkout]:
    """Check the target out and plan it; raises AuditorError/OSError for a failed repository."""
    checkout = checkout_target(target, config.out / "checkouts")
    return plan_repository(target.key, replace(config.scan, root=checkout.root), engine), checkout


class TargetTimeout(AuditorError):
    """A repository took longer than ``--target-timeout`` to plan."""


def plan_target_isolated(target: Target, config: ManyConfig, engine: EngineChoice) -> tuple[RepositoryPlan, Checkout]:
    """``plan_target`` in a child process that is killed past ``config.target_timeout_s``, so
    one hostile repository (a pathological tree, a parser stuck on a file) cannot stall the
    run. Raises TargetTimeout, or the error the child met (as an AuditorError)."""
    if config.target_timeout_s <= 0:
        return plan_target(target, config, engine)
    import multiprocessing
    import pickle

    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    # Not a daemon: the child may start its own index workers (daemons cannot have children).
    child = context.Process(target=_plan_in_child, args=(sender, target, config, engine))
    child.start()
    sender.close()
    try:
        if not receiver.poll(config.target_timeout_s):
            raise TargetTimeout(f"{target.key}: planning took longer than --target-timeout {config.target_timeout_s:g} s; stopped")
        outcome, value = pickle.loads(receiver.recv_bytes())
    except EOFError:
        child.join(5)
        raise AuditorError(f"{target.key}: the planning process died (exit code {child.exitcode})") from None
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join(5)
    if outcome == "error":
        raise AuditorError(value)
    return value


def _plan_in_child(sender: Any, target: Target, config: ManyConfig, engine: EngineChoice) -> None:
    import pickle

    try:
        result: tuple[str, Any] = ("ok", plan_target(target, config, engine))
    except (AuditorError, OSError) as exc:
        result = ("error", str(exc) or type(exc).__name__)
    sender.send_bytes(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    sender.close()
