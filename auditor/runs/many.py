"""Scan many: audit a list of repositories in one resumable run.

Inputs: a ``ManyConfig`` — a targets spec (a file of local paths or git URLs, one per line,
or a directory whose subdirectories are repositories), an output directory (the run
directory) and a ``ScanConfig`` template applied to every repository. Output: a
``ManyResult``, and on disk one report set per repository plus an index::

    OUT/state.jsonl                      done and failed (repository, window, rules, prompt hash) items
    OUT/repos/<key>/report.{json,sarif,md}
    OUT/index.json, OUT/index.md         every repository's status, windows, findings, tokens
    OUT/checkouts/<key>/                 shallow clones of git targets
    OUT/work/                            per-repository plans handed between Ray stages

The stages: plan (checkout, walk, index, pack into requests), generate (the engine, the
windows of all repositories batched together), finish (static pass, parse, ground,
render). Plan and finish call ``run_scan`` itself, with engines that capture the requests
and then answer them, so each report is exactly `auditor scan`'s. This module runs the
stages sequentially in-process; ``auditor.runs.many_ray`` runs the same stage functions as a
Ray Data pipeline when ray is installed. Request ids are ``<key>/window-<i>`` so that the
windows of every repository can share one engine batch (and one replay recording).

Resume: each finished window is appended to ``state.jsonl`` under (repository, window,
rule set, prompt hash); the prompt hash covers the request's exact content and the
engine's output-changing settings, so a re-run sends only windows that are new, changed
or failed. A repository that cannot be checked out or planned, or a window the engine
fails, is recorded with its error and never stops the other repositories.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from auditor.engine.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    Engine,
    EngineSettings,
    error_completion,
)
from auditor.engine.registry import create_engine, resolve_auto
from auditor.errors import AuditorError, EngineUnavailable, UsageError
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.report import render
from auditor.report.model import ScanResult
from auditor.engine.result_cache import CachingEngine, cacheable, request_key
from auditor.rules.loader import Rule
from auditor.runs.scan import ScanConfig, ScanPlan, finish_scan, plan_scan, selected_rules

logger = logging.getLogger(__name__)

Backend = Literal["auto", "ray", "sequential"]

REPORT_FILES: dict[str, str] = {"json": "report.json", "sarif": "report.sarif", "markdown": "report.md"}
STATE_FILE = "state.jsonl"
GIT_TIMEOUT_S = 600.0
THROUGHPUT_INTERVAL_S = 30.0
RAY_MISSING_NOTICE = (
    "ray is not installed: running scan-many's stages sequentially in this process "
    "(install the extra with `pip install 'auditor[ray]'` to run them on a Ray cluster)"
)


class TargetError(AuditorError):
    """One repository could not be checked out (missing path, failed clone, unknown revision)."""


# --- targets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One repository to audit.

    ``source`` is an absolute local path or a git URL; ``revision`` a branch, tag or
    commit (git sources only); ``key`` the repository's unique, filesystem-safe name in
    the run (report directory, request ids, state entries).
    """

    key: str
    source: str
    revision: str | None = None
    is_git: bool = False

    @property
    def label(self) -> str:
        """The source as the user wrote it, with its revision."""
        return f"{self.source}@{self.revision}" if self.revision else self.source


_SCP_LIKE = re.compile(r"^[\w.+-]+@[\w.-]+:")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _looks_like_git_url(source: str) -> bool:
    return "://" in source or bool(_SCP_LIKE.match(source)) or source.endswith(".git")


def _split_revision(text: str) -> tuple[str, str | None]:
    """``url#rev`` or ``url@rev`` -> (url, rev). An ``@`` names a revision only after the last
    ``/`` and ``:`` (so ``git@host:org/repo.git`` has none); revisions with ``/`` need ``#``."""
    if "#" in text:
        source, revision = text.rsplit("#", 1)
        return source, revision or None
    at = text.rfind("@")
    if at > max(text.rfind("/"), text.rfind(":")):
        return text[:at], text[at + 1 :] or None
    return text, None


def parse_target_line(text: str, base_dir: Path) -> tuple[str, str | None, bool] | None:
    """(source, revision, is_git) for one line of a targets file; None for blanks and comments.

    A line starting with ``#`` is a comment, and so is anything after whitespace + ``#``.
    Relative paths are resolved against ``base_dir``. An existing local directory is taken
    as is (even with ``@`` in its name); a local path with a revision is cloned at it.
    """
    line = re.split(r"\s#", text, maxsplit=1)[0].strip()
    if not line or line.startswith("#"):
        return None
    local = (base_dir / line).expanduser()
    if not _looks_like_git_url(line) and local.is_dir():
        return str(local.resolve()), None, False
    source, revision = _split_revision(line)
    if _looks_like_git_url(source):
        return source, revision, True
    path = str((base_dir / source).expanduser().resolve())
    return path, revision, revision is not None


def _base_name(source: str) -> str:
    tail = source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    tail = tail.removesuffix(".git")
    return _UNSAFE.sub("-", tail).strip("-.") or "repository"


def assign_keys(entries: Sequence[tuple[str, str | None, bool]]) -> tuple[Target, ...]:
    """Targets with unique keys: the repository's name (plus its revision), and a short hash
    of the source where two targets would share a name. UsageError on a repeated target."""
    seen: set[tuple[str, str | None]] = set()
    for source, revision, _ in entries:
        if (source, revision) in seen:
            raise UsageError(f"target listed twice: {source}" + (f"@{revision}" if revision else ""))
        seen.add((source, revision))
    names = [
        _base_name(source) + (f"-{_UNSAFE.sub('-', revision).strip('-.')}" if revision else "")
        for source, revision, _ in entries
    ]
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    targets = []
    for name, (source, revision, is_git) in zip(names, entries):
        if counts[name] > 1:
            digest = hashlib.sha256(f"{source}#{revision or ''}".encode()).hexdigest()[:8]
            name = f"{name}-{digest}"
        targets.append(Target(key=name, source=source, revision=revision, is_git=is_git))
    return tuple(targets)


def parse_targets(spec: Path) -> tuple[Target, ...]:
    """The repositories named by ``spec``: a targets file, or a directory of repositories
    (each non-hidden subdirectory, sorted). UsageError when ``spec`` names none."""
    if spec.is_dir():
        entries: list[tuple[str, str | None, bool]] = [
            (str(child.resolve()), None, False)
            for child in sorted(spec.iterdir())
            if child.is_dir() and not child.name.startswith(".")
        ]
        if not entries:
            raise UsageError(f"{spec}: no repository directories in it")
        return assign_keys(entries)
    if not spec.is_file():
        raise UsageError(f"targets not found: {spec} (a file of paths or git URLs, or a directory of repositories)")
    try:
        lines = spec.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read targets file {spec}: {exc}") from exc
    entries = [parsed for line in lines if (parsed := parse_target_line(line, spec.parent)) is not None]
    if not entries:
        raise UsageError(f"{spec}: no targets (one local path or git URL per line)")
    return assign_keys(entries)


# --- checkout --------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkout:
    """Where a target's files are, and the commit checked out (None for a plain local path)."""

    root: Path
    commit: str | None


def _git(args: Sequence[str], cwd: Path) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"git {args[0]} failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        raise TargetError(f"git {args[0]} failed: {message}")
    return done.stdout.strip()


def checkout_target(target: Target, checkouts_dir: Path) -> Checkout:
    """The target's files on disk: a local path as is, a git source fetched shallowly
    (depth 1, at its revision or the remote HEAD) into ``checkouts_dir/<key>``.

    A checkout left by an earlier run of the same run directory is reused. Raises
    ``TargetError`` when the path is missing or git fails.
    """
    if not target.is_git:
        root = Path(target.source)
        if not root.is_dir():
            raise TargetError(f"{target.source}: not a directory")
        return Checkout(root=root, commit=None)
    destination = checkouts_dir / target.key
    if (destination / ".git").is_dir():
        try:
            return Checkout(root=destination, commit=_git(["rev-parse", "HEAD"], destination))
        except TargetError:
            logger.info("discarding the unfinished checkout %s", destination)
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    try:
        _git(["init", "--quiet"], destination)
        _git(["fetch", "--quiet", "--depth", "1", target.source, target.revision or "HEAD"], destination)
        _git(["checkout", "--quiet", "--detach", "FETCH_HEAD"], destination)
        commit = _git(["rev-parse", "HEAD"], destination)
    except TargetError:
        shutil.rmtree(destination, ignore_errors=True)
        raise
    return Checkout(root=destination, commit=commit)


# --- configuration ---------------------------------------------------------------------


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
    formats: tuple[str, ...] = ("json", "sarif", "markdown")
    batch_size: int = 8
    backend: Backend = "auto"
    ray_address: str | None = None
    workers: int = 1
    gpus_per_worker: float | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.formats) - set(REPORT_FILES))
        if unknown:
            raise UsageError(f"unknown report format(s) {', '.join(unknown)}; known: {', '.join(sorted(REPORT_FILES))}")
        if self.batch_size < 1:
            raise UsageError("--batch-size must be at least 1")
        if self.workers < 1:
            raise UsageError("--workers must be at least 1")
        if self.gpus_per_worker is not None and self.gpus_per_worker < 0:
            raise UsageError("--gpus-per-worker must not be negative")


def resolve_engine(config: ManyConfig) -> tuple[str, tuple[str, ...]]:
    """The engine name to run and the notices saying how ``auto`` was resolved."""
    name = config.scan.engine
    if name != "auto":
        return name, ()
    if config.endpoints:
        return "openai", (f"engine auto -> openai: {len(config.endpoints)} endpoint(s) given",)
    resolved, reason = resolve_auto(config.scan.engine_settings)
    return resolved, (f"engine auto -> {resolved}: {reason}",)


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


# --- engines ---------------------------------------------------------------------------


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


# --- plan and finish (the single-repository stages) -------------------------------------
#
# Both stages call ``run_scan`` itself, so a repository's report is exactly what `auditor
# scan` gives: the plan stage runs it with an engine that only captures the requests, the
# finish stage with one that answers them from the completions generated in between.

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
    engine: str,
    notices: Sequence[str] = (),
    progress: ProgressCallback = no_progress,
) -> RepositoryPlan:
    """Walk, index, statically analyse and pack ``config.root`` exactly as ``auditor scan``
    does (``engine`` is a resolved name), with request ids prefixed by ``key``."""
    plan = plan_scan(config, engine, request_prefix=f"{key}/", notices=tuple(notices), progress=progress)
    return RepositoryPlan(key, plan, rule_set(plan.rules))


def finish_repository(plan: RepositoryPlan, completions: Sequence[Completion]) -> ScanResult:
    """The ``ScanResult`` ``auditor scan`` gives for this repository when the model answers
    with ``completions`` (one per request, in order)."""
    return finish_scan(plan.scan, completions)


# --- serialisation between stages ------------------------------------------------------


def request_to_json(request: ChatRequest) -> str:
    """A request as JSON (for Ray rows)."""
    return json.dumps(asdict(request), sort_keys=True, ensure_ascii=False)


def request_from_json(text: str) -> ChatRequest:
    """The request ``request_to_json`` wrote."""
    data = json.loads(text)
    data["messages"] = tuple(ChatMessage(**message) for message in data["messages"])
    return ChatRequest(**data)


def completion_to_json(completion: Completion) -> str:
    """A completion as JSON (state file, Ray rows)."""
    return json.dumps(asdict(completion), sort_keys=True, ensure_ascii=False)


def completion_from_json(text: str | Mapping[str, Any]) -> Completion:
    """The completion ``completion_to_json`` wrote (or its decoded object)."""
    data = json.loads(text) if isinstance(text, str) else dict(text)
    return Completion(**data)


# --- run state -------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkItem:
    """One window of one repository, identified the way resume matches it."""

    repository: str
    window: int
    rules: str
    prompt_hash: str


def rule_set(rules: Sequence[Rule]) -> str:
    """A rule set as work items name it: the sorted rule ids."""
    return ",".join(sorted(rule.id for rule in rules))


def work_item(repository: str, window: int, rules: str, request: ChatRequest, fingerprint: str) -> WorkItem:
    """The item for a window: its rule set and the hash of its exact request content under
    this engine (the shared result cache's key)."""
    return WorkItem(repository, window, rules, request_key(fingerprint, request))


class RunState:
    """The run directory's ``state.jsonl``: one JSON line per done or failed item, appended
    as they happen so an interrupted run loses nothing finished. Later lines win."""

    def __init__(self, path: Path) -> None:
        """Read the state at ``path`` (none yet is an empty state); malformed lines are skipped."""
        self.path = path
        self._done: dict[WorkItem, Completion] = {}
        if path.is_file():
            # An interrupted append can leave a last line cut anywhere, even inside a UTF-8
            # sequence: decode leniently (that line is then skipped as malformed) and end it
            # with a newline so the next record starts a line of its own.
            text = path.read_bytes().decode("utf-8", errors="replace")
            if text and not text.endswith("\n"):
                with path.open("a", encoding="utf-8") as handle:
                    handle.write("\n")
            for number, line in enumerate(text.splitlines(), start=1):
                try:
                    record = json.loads(line)
                    if record["status"] == "repository-failed":
                        continue
                    item = WorkItem(record["repository"], record["window"], record["rules"], record["prompt_hash"])
                    if record["status"] == "done":
                        self._done[item] = completion_from_json(record["completion"])
                    else:
                        self._done.pop(item, None)
                except (ValueError, KeyError, TypeError) as exc:
                    logger.warning("%s:%d: skipping a malformed state line: %s", path, number, exc)

    def done_items(self) -> tuple[WorkItem, ...]:
        """Every item recorded as done and not failed since."""
        return tuple(self._done)

    def done(self, item: WorkItem, request: ChatRequest) -> Completion | None:
        """The recorded completion of ``item``, answered under the request's id; None if not done."""
        completion = self._done.get(item)
        return None if completion is None else replace(completion, request_id=request.id)

    def record(self, item: WorkItem, completion: Completion) -> None:
        """Append ``item`` as done (a finished answer) or failed (an engine error or abort)."""
        status = "done" if cacheable(completion) else "failed"
        record: dict[str, Any] = {**asdict(item), "status": status}
        if status == "done":
            record["completion"] = asdict(completion)
            self._done[item] = completion
        else:
            record["error"] = completion.error or f"finish_reason {completion.finish_reason}"
            self._done.pop(item, None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")

    def record_repository_failure(self, repository: str, error: str) -> None:
        """Append a repository that failed before any window existed (checkout, walk, pack)."""
        record = {"repository": repository, "status": "repository-failed", "error": error}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")


# --- outcomes, reports and the index ---------------------------------------------------


@dataclass(frozen=True)
class RepositoryOutcome:
    """One repository's line in the index.

    ``status`` is "ok" (every window answered), "incomplete" (some window failed or was cut
    off; see its reports) or "failed" (no report: ``error`` says why).
    """

    key: str
    source: str
    revision: str | None
    commit: str | None
    status: str
    error: str | None = None
    windows: int = 0
    windows_reused: int = 0
    findings: int = 0
    severities: tuple[tuple[str, int], ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reports: tuple[str, ...] = ()


@dataclass(frozen=True)
class ManyResult:
    """What a scan-many run did, over every repository (sorted by key)."""

    out: Path
    backend: str
    engine: str
    repositories: tuple[RepositoryOutcome, ...]
    windows_generated: int
    notices: tuple[str, ...] = ()

    @property
    def windows(self) -> int:
        """Windows over all repositories, generated now or reused from the state."""
        return sum(outcome.windows for outcome in self.repositories)

    @property
    def windows_reused(self) -> int:
        """Windows answered from the run state (done in an earlier run)."""
        return sum(outcome.windows_reused for outcome in self.repositories)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over all repositories' windows."""
        return sum(outcome.prompt_tokens for outcome in self.repositories)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens over all repositories' windows."""
        return sum(outcome.completion_tokens for outcome in self.repositories)

    @property
    def failures(self) -> int:
        """Repositories that failed or are incomplete."""
        return sum(outcome.status != "ok" for outcome in self.repositories)

    def summary(self) -> str:
        """One line: repositories, windows, tokens, failures."""
        return (
            f"{len(self.repositories)} repositories, {self.windows} windows "
            f"({self.windows_generated} generated, {self.windows_reused} reused), "
            f"{self.prompt_tokens:,} prompt tokens, {self.completion_tokens:,} completion tokens, "
            f"{self.failures} failed or incomplete"
        )


def render_reports(result: ScanResult, formats: Iterable[str]) -> dict[str, str]:
    """The repository's reports, file name -> text, for each requested format."""
    return {REPORT_FILES[fmt]: render(result, fmt) for fmt in sorted(formats)}


def succeeded_outcome(target: Target, commit: str | None, result: ScanResult, reused: int, reports: Iterable[str]) -> RepositoryOutcome:
    """The index line of a repository that was scanned (complete or not)."""
    return RepositoryOutcome(
        key=target.key,
        source=target.source,
        revision=target.revision,
        commit=commit,
        status="ok" if result.complete else "incomplete",
        error=None if result.complete else "; ".join(e.message for e in result.errors) or "incomplete windows",
        windows=len(result.windows),
        windows_reused=reused,
        findings=len(result.findings),
        severities=result.severity_counts(),
        prompt_tokens=result.prompt_tokens_sent,
        completion_tokens=sum(window.completion_tokens for window in result.windows),
        reports=tuple(sorted(f"repos/{target.key}/{name}" for name in reports)),
    )


def failed_outcome(target: Target, error: str) -> RepositoryOutcome:
    """The index line of a repository that could not be scanned."""
    return RepositoryOutcome(key=target.key, source=target.source, revision=target.revision, commit=None,
                             status="failed", error=error)


def write_reports(out: Path, key: str, reports: Mapping[str, str]) -> None:
    """Write one repository's reports under ``out/repos/<key>/``."""
    directory = out / "repos" / key
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(reports.items()):
        (directory / name).write_text(text, encoding="utf-8")


def index_json(result: ManyResult) -> str:
    """The run's index as JSON: sorted keys, repositories by key, no times."""
    document = {
        "engine": result.engine,
        "repositories": [
            {**asdict(outcome), "severities": dict(outcome.severities), "reports": list(outcome.reports)}
            for outcome in result.repositories
        ],
        "totals": {
            "repositories": len(result.repositories),
            "windows": result.windows,
            "windows_reused": result.windows_reused,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "failures": result.failures,
        },
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def index_markdown(result: ManyResult) -> str:
    """The run's index as a Markdown summary table, one row per repository."""
    lines = [
        "# auditor scan-many",
        "",
        f"Engine: {result.engine}. {_cell(result.summary())}.",
        "",
        "| repository | status | windows | findings | severities | prompt tokens | completion tokens | report | error |",
        "|---|---|---:|---:|---|---:|---:|---|---|",
    ]
    for outcome in result.repositories:
        severities = ", ".join(f"{count} {severity}" for severity, count in outcome.severities) or "-"
        report = next((path for path in outcome.reports if path.endswith(".md")), "")
        link = f"[{outcome.key}]({report})" if report else "-"
        lines.append(
            f"| {_cell(outcome.key)} | {outcome.status} | {outcome.windows} | {outcome.findings} | {severities} | "
            f"{outcome.prompt_tokens:,} | {outcome.completion_tokens:,} | {link} | {_cell(outcome.error or '')} |"
        )
    return "\n".join(lines) + "\n"


def write_index(result: ManyResult) -> None:
    """Write ``index.json`` and ``index.md`` into the run directory."""
    result.out.mkdir(parents=True, exist_ok=True)
    (result.out / "index.json").write_text(index_json(result), encoding="utf-8")
    (result.out / "index.md").write_text(index_markdown(result), encoding="utf-8")


# --- the sequential run ----------------------------------------------------------------


def throughput_message(done: int, total: int, completion_tokens: int, seconds: float) -> str:
    """'12/40 windows generated, 1,234 completion tokens/s'."""
    rate = completion_tokens / seconds if seconds > 0 else 0.0
    return f"{done}/{total} windows generated, {rate:,.0f} completion tokens/s"


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
        from auditor.runs.many_ray import run_many_ray

        return run_many_ray(config, targets, progress)
    if config.backend == "auto":
        progress(ProgressEvent(stage="scan-many", message=RAY_MISSING_NOTICE))
    engine, notices = resolve_engine(config)
    for notice in notices:
        progress(ProgressEvent(stage="scan-many", message=notice))
    return run_many_sequential(config, targets, engine, notices, progress)


def plan_target(target: Target, config: ManyConfig, engine: str, notices: Sequence[str]) -> tuple[RepositoryPlan, Checkout]:
    """Check the target out and plan it; raises AuditorError/OSError for a failed repository."""
    checkout = checkout_target(target, config.out / "checkouts")
    return plan_repository(target.key, replace(config.scan, root=checkout.root), engine, notices), checkout


def run_many_sequential(
    config: ManyConfig,
    targets: Sequence[Target],
    engine_name: str,
    notices: Sequence[str] = (),
    progress: ProgressCallback = no_progress,
) -> ManyResult:
    """The scan-many stages one after another in this process (same outputs as on Ray)."""
    state = RunState(config.out / STATE_FILE)
    engine = None if engine_name == "static" else build_engine(
        engine_name, config.scan.engine_settings, config.endpoints, config.scan.use_cache)
    fingerprint = engine_fingerprint(engine_name, config.scan.engine_settings)
    plans: dict[str, tuple[RepositoryPlan, Checkout]] = {}
    outcomes: dict[str, RepositoryOutcome] = {}
    for number, target in enumerate(targets, start=1):
        try:
            plans[target.key] = plan_target(target, config, engine_name, notices)
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
    many = ManyResult(out=config.out, backend="sequential", engine=engine_name,
                      repositories=tuple(outcomes[key] for key in sorted(outcomes)),
                      windows_generated=generated, notices=tuple(notices))
    write_index(many)
    progress(ProgressEvent(stage="scan-many", message=many.summary()))
    return many


def _generate_sequential(
    engine: Engine | None,
    pending: Sequence[tuple[str, int, WorkItem, ChatRequest]],
    answers: dict[str, dict[int, Completion]],
    state: RunState,
    batch_size: int,
    progress: ProgressCallback,
) -> int:
    """Send the pending windows of all repositories in batches; record each answer."""
    if not pending:
        return 0
    if engine is None:
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
