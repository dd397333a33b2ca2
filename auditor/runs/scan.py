"""Scan: the audit run — plan the windows (``auditor.runs.prepare``: walk, index, the one
static pass, pack, canaries), ask the engine, ground the answers, judge the static
candidates, merge with the static pass, and assemble a ``ScanResult`` for the reporters.

Inputs: a frozen ``ScanConfig``. Output: ``ScanResult``. Every failure that leaves part of
the repository unread or a rule unchecked (an incomplete window, an engine error, a skipped
source file, windows cut by --max-windows, a rule that needs a model when none ran) is
recorded in the result, never dropped: the CLI turns it into an exit code.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from auditor import __version__
from auditor.analysis.transactions import StaticResult
from auditor.engine.base import (
    ChatRequest,
    Completion,
    Engine,
)
from auditor.engine.opening import EngineChoice, NoModel, choose_engine, open_engine
from auditor.engine.result_cache import CachingEngine, default_result_cache_dir
from auditor.errors import AuditorError
from auditor.findings.answer import ParsedAnswer, answer_schema_json, parse_answer
from auditor.findings.grounding import RepositoryView, ground_answer
from auditor.findings.injection import detect_injections
from auditor.findings.merge import merge_findings
from auditor.findings.model import Claim, Finding, Rejected
from auditor.findings.suppress import (
    apply_suppressions,
    read_baseline,
)
from auditor.index.locator import IndexLocator
from auditor.languages import language_for_path
from auditor.pack.deadline import FILE_DEADLINE
from auditor.pack.packer import (
    PackResult,
    Window,
)
from auditor.pack.scope import scope_class
from auditor.planning.timing import estimate_time
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.recall.windows import (
    CanaryPlan,
    CanaryReport,
    read_canaries,
)
from auditor.recall.canaries import cites_canary
from auditor.report.model import (
    Coverage,
    NotAudited,
    ScanError,
    ScanResult,
    WindowOutcome,
    WindowRecall,
)
from auditor.rules.loader import Rule, builtin_rules
from auditor.config.scan import ScanConfig
from auditor.runs.judge import judge_windows
from auditor.runs.prepare import PreparedRepository, ScanInputs, WindowPlan, plan_windows, prepare_scan
from auditor.runs.scope import coverage_under, paths_under, reported_root_name
from auditor.tokens.tokenizer import (
    PromptTokenizer,
    load_tokenizer,
    with_count_cache,
)

STATIC_TOKENIZER_SOURCE = "none (static pass)"


@dataclass(frozen=True)
class ScanPlan:
    """A repository ready for generation: everything ``finish_scan`` needs besides the
    completions. ``windows`` is None and ``requests`` empty when no model runs (static)."""

    config: ScanConfig
    engine: EngineChoice
    inputs: ScanInputs
    notices: tuple[str, ...]
    windows: WindowPlan | None = None
    requests: tuple[ChatRequest, ...] = ()


def plan_scan(
    config: ScanConfig,
    engine: EngineChoice,
    *,
    request_prefix: str = "",
    prepared: PreparedRepository | None = None,
    progress: ProgressCallback = no_progress,
) -> ScanPlan:
    """Walk, index, run the static pass, and plan the windows (``plan_windows``, as ``auditor
    pack`` does): the requests for ``engine``.

    Request ids are ``<request_prefix>window-<i>``. ``prepared`` reuses a walked and indexed
    repository.
    """
    notes = list(engine.notices)
    tokenizer: PromptTokenizer | None = None
    if engine.runs_model:
        tokenizer = load_tokenizer(config.tokenizer_request)  # the vocabulary itself loads when first needed
        if config.use_cache:
            tokenizer = with_count_cache(tokenizer, scope=config.scope)
    inputs = prepare_scan(
        config, runs_model=engine.runs_model, prepared=prepared,
        on_change=tokenizer.preload if tokenizer is not None else None, progress=progress,
    )
    if inputs.static.reported:
        for rule, result in inputs.static.results:
            notes.extend(_static_notes(rule, result, config))
    if inputs.unselected:
        notes.append(
            f"rules that need a model were not selected, as no model runs: {', '.join(inputs.unselected)} "
            "(name one with --rule to check it with a model; without one the scan is then partial)"
        )
    if tokenizer is None:
        notes.append("no model ran: findings come from the static pass only")
        return ScanPlan(config, engine, inputs, tuple(notes))

    windows = plan_windows(config, tokenizer, inputs=inputs, progress=progress)
    notes.extend(windows.notices)
    rule_ids = [rule.id for rule in inputs.rules]
    requests = tuple(
        ChatRequest(
            id=f"{request_prefix}window-{window.index}",
            messages=tuple(window.messages),
            prompt_tokens=window.prompt_tokens,
            max_tokens=config.window.output_tokens,
            thinking=config.window.thinking,
            json_schema=answer_schema_json(rule_ids, [candidate.id for candidate in window.candidates]),
        )
        for window, _ in windows.planted
    )
    if requests:
        progress(ProgressEvent(stage="engine", message=_time_estimate(windows.sent, config.window.output_tokens, engine.name)))
    return ScanPlan(config, engine, inputs, tuple(notes), windows, requests)


@dataclass(frozen=True)
class ModelRun:
    """What the model's answers gave: one outcome per window, the errors met, grounded
    findings and rejected claims, the tokens sent, and the static findings as the model
    judged them. For the static pass: the static findings alone."""

    windows: tuple[WindowOutcome, ...] = ()
    errors: tuple[ScanError, ...] = ()
    findings: tuple[Finding, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    prompt_tokens_sent: int = 0
    static_findings: tuple[Finding, ...] = ()  # the static pass's, with the model's verdicts
    warnings: tuple[str, ...] = ()  # verdicts that could not stand (ignored; nothing went unread)


def finish_scan(plan: ScanPlan, completions: Sequence[Completion]) -> ScanResult:
    """Parse, ground and score the completions (one per request, in order), merge with the
    static pass, apply suppressions and the baseline: the scan's result."""
    config, prepared, rules = plan.config, plan.inputs.repository, plan.inputs.rules
    texts = prepared.texts
    if plan.windows is None:
        run = ModelRun(static_findings=plan.inputs.static.reported_findings)
        coverage = Coverage(full=tuple(sorted(prepared.indexes)), skeleton=(),
                            omitted=tuple(sorted(set(texts) - set(prepared.indexes))))
        engine, model, tokenizer_source, tokenizer_exact = "static", None, STATIC_TOKENIZER_SOURCE, False
    else:
        run = _model_run(plan, plan.windows, completions)
        coverage = _coverage(plan.windows.packed, texts)
        engine, model = plan.engine.name, config.engine_settings.model
        tokenizer = plan.windows.packed.tokenizer
        tokenizer_source, tokenizer_exact = tokenizer.source, tokenizer.exact
    # A subdirectory scanned within its repository reports what lies under it (auditor.runs.scope).
    under = config.report_under
    overran = plan.windows.packed.overran if plan.windows is not None else ()
    not_audited = tuple(item for item in _not_audited(prepared, rules, overran) if item.path.startswith(under))
    coverage = replace(coverage_under(coverage, under), not_audited=not_audited)
    gaps = _coverage_gaps(not_audited, plan, coverage)
    known = set(builtin_rules()) | {rule.id for rule in rules}
    baseline = read_baseline(config.baseline) if config.baseline else None
    merged = [finding for finding in merge_findings([run.findings, run.static_findings]) if finding.path.startswith(under)]
    suppression = apply_suppressions(merged, paths_under(texts, under), known, baseline)
    # Planted instructions matter where a model read the text: flag the files it was shown.
    shown = set(coverage.full) | set(coverage.skeleton) if run.windows else set()
    return ScanResult(
        tool_version=__version__,
        root=reported_root_name(config),
        engine=engine,
        model=model,
        tokenizer_source=tokenizer_source,
        tokenizer_exact=tokenizer_exact,
        rules=rules,
        findings=suppression.kept,
        rejected=run.rejected,
        windows=run.windows,
        errors=(*gaps, *run.errors),
        notices=(*plan.notices, *_skip_summary(not_audited), *_decoded_summary(prepared, under),
                 *_parse_error_summary(prepared, under)),
        coverage=coverage,
        injection_flags=detect_injections({p: t for p, t in texts.items() if p in shown}),
        prompt_tokens_sent=run.prompt_tokens_sent,
        suppressed=suppression.suppressed,
        warnings=(*suppression.warnings, *run.warnings),
        block_disputed=config.block_disputed,
    )


# Skip reasons that leave a file the user meant to audit unread (as opposed to the defaults
# and the user's own --exclude/--include/.auditorignore, which are listed but deliberate).
_UNREAD_REASONS = frozenset({"too-large", "non-utf8", "unreadable", "vanished", "binary", "parse-budget", "not-a-file",
                             "placeholder", "file-deadline"})
# Skip reasons that leave a whole tree of source unread (auditor.walk.placeholders), whatever its name.
_UNREAD_TREES = frozenset({"submodule", "nested-repository"})
_LISTED_IN_NOTICES = 10


def _listed(items: Sequence[str]) -> str:
    """The first few items, comma-separated, and how many more there are."""
    more = len(items) - _LISTED_IN_NOTICES
    return ", ".join(items[:_LISTED_IN_NOTICES]) + (f", and {more} more" if more > 0 else "")


def _not_audited(
    prepared: PreparedRepository, rules: Sequence[Rule], overran: Sequence[tuple[str, str]] = ()
) -> tuple[NotAudited, ...]:
    """Every file the walk, the index or the pack (``overran``: past the per-file deadline)
    left out, marked ``source`` when it is unread code a rule covers."""
    covered = {language for rule in rules for language in rule.languages}
    items = []
    skips = [(item.path, getattr(item.reason, "value", str(item.reason)), item.detail)
             for item in (*prepared.walk.skipped, *prepared.index_skipped)]
    for path, reason, detail in (*skips, *((path, FILE_DEADLINE, detail) for path, detail in overran)):
        language = language_for_path(path)
        source = reason in _UNREAD_TREES or (reason in _UNREAD_REASONS and language is not None and language in covered)
        items.append(NotAudited(path, reason, detail, source))
    return tuple(sorted(items, key=lambda item: (not item.source, item.path, item.reason)))


def _coverage_gaps(not_audited: Sequence[NotAudited], plan: ScanPlan, coverage: Coverage) -> tuple[ScanError, ...]:
    """The parts of the repository the scan did not audit, as errors every report shows."""
    gaps = [
        ScanError("not-audited", f"{item.path} was not audited ({item.reason}{': ' + item.detail if item.detail else ''})")
        for item in not_audited
        if item.source
    ]
    if plan.windows is not None:
        capped = [omitted.path for omitted in plan.windows.packed.omitted
                  if omitted.reason.startswith("over --max-windows") and omitted.path.startswith(plan.config.report_under)]
        if capped:
            gaps.append(ScanError(
                "windows-capped",
                f"--max-windows {plan.config.window.max_windows} left {len(capped)} file(s) out of every window: "
                f"the model did not read them ({', '.join(sorted(capped)[:5])}{', ...' if len(capped) > 5 else ''})",
            ))
    # Without a model, a rule with no static analysis is not checked at all.
    for rule_id in plan.inputs.static.not_run if plan.windows is None else ():
        gaps.append(ScanError(
            "rule-not-run",
            f"rule {rule_id} was not checked: it has no static analysis and no model ran "
            "(--engine vllm, or --engine openai --base-url URL, runs it)",
        ))
    if not coverage.full and not coverage.skeleton and _had_something_to_audit(plan):
        gaps.append(ScanError("nothing-audited", "no file was audited: the walk, --include/--exclude or the rules selected nothing"))
    return tuple(gaps)


def _had_something_to_audit(plan: ScanPlan) -> bool:
    """Whether the scan was meant to audit some file: always, but for a diff-scoped review
    (``window.change``) whose change reaches no production source file (a docs-only or
    CI-only change packs nothing, and that is no gap)."""
    change, under = plan.config.window.change, plan.config.report_under
    if change is None:
        return True
    indexes, texts = plan.inputs.repository.indexes, plan.inputs.repository.texts
    return any(
        path in indexes and path.startswith(under) and scope_class(path, texts[path]) is None for path in change.paths
    )


def _skip_summary(not_audited: Sequence[NotAudited]) -> tuple[str, ...]:
    """One notice naming the files left out by default or by the user's own exclusions."""
    deliberate = [item for item in not_audited if not item.source]
    if not deliberate:
        return ()
    counts = Counter(item.reason for item in deliberate)
    named = _listed([f"{item.path} ({item.reason})" for item in deliberate])
    reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
    return (f"{len(deliberate)} file(s) not audited ({reasons}): {named}",)


def _static_notes(rule: Rule, result: StaticResult, config: ScanConfig) -> list[str]:
    """What the static pass left out or could not follow, so a short list is not read as all there is."""
    notes = []
    if result.hidden_findings:
        notes.append(
            f"{rule.id}: {result.hidden_findings} static finding(s) below --min-severity {config.min_severity} not shown "
            "(--min-severity medium shows sequences graded harmless or re-runnable, low single autocommit writes too)"
        )
    notes.extend(f"{rule.id}: assumes {assumption}" for assumption in result.assumptions)
    if result.unresolved_calls:
        notes.append(
            f"{rule.id}: {result.unresolved_calls} call(s) in entry-reachable code could not be resolved to a repository "
            "function: a chain through one of them is not followed"
        )
    return notes


def _parse_error_summary(prepared: PreparedRepository, under: str = "") -> tuple[str, ...]:
    """One notice naming the files under ``under`` tree-sitter could only partly parse (their
    calls and definitions after the error may be missing from the call graph)."""
    broken = sorted(path for path, index in prepared.indexes.items() if index.has_errors and path.startswith(under))
    if not broken:
        return ()
    named = _listed(broken)
    return (f"{len(broken)} file(s) have syntax errors and were only partly indexed: {named}",)


def _decoded_summary(prepared: PreparedRepository, under: str = "") -> tuple[str, ...]:
    """One notice naming the files under ``under`` read in an encoding other than UTF-8."""
    decoded = sorted(
        (entry.path, entry.encoding) for entry in prepared.walk.files
        if entry.encoding not in ("utf-8", "") and entry.path.startswith(under)
    )
    if not decoded:
        return ()
    named = _listed([f"{path} ({encoding})" for path, encoding in decoded])
    return (f"{len(decoded)} file(s) decoded from another encoding than UTF-8: {named}",)


def _model_run(plan: ScanPlan, planned: WindowPlan, completions: Sequence[Completion]) -> ModelRun:
    """Read the model's completions against the packed repository."""
    if len(completions) != len(plan.requests):
        raise ValueError(f"{len(completions)} completions for {len(plan.requests)} requests")
    prepared = plan.inputs.repository
    texts = prepared.texts
    repository = RepositoryView(
        files={path: texts[path] for path in _carried(planned.packed)},
        locator=IndexLocator(prepared.indexes),
        edges=prepared.graph,
        virtual_paths=frozenset(path for _, canaries in planned.planted for canary in canaries.canaries for path in canary.paths),
    )
    rules_by_id = {rule.id: rule for rule in plan.inputs.rules}
    windows, errors, findings, rejected, answers = _read_completions(
        list(planned.planted), list(completions), repository, rules_by_id, plan.config.recall_threshold
    )
    # The model judged the static candidates its windows listed: confirmed, or disputed with a reason.
    judged = judge_windows(
        plan.inputs.static.reported_findings, [w for w, _ in planned.planted], answers, repository.files
    )
    return ModelRun(
        windows=tuple(windows), errors=tuple(errors), findings=tuple(findings), rejected=tuple(rejected),
        static_findings=judged.findings, warnings=tuple(f"window {p.window}: {p.message}" for p in judged.problems),
        prompt_tokens_sent=sum(c.prompt_tokens or r.prompt_tokens for c, r in zip(completions, plan.requests)),
    )


def run_scan(
    config: ScanConfig,
    progress: ProgressCallback = no_progress,
    *,
    engine: Engine | None = None,
    prepared: PreparedRepository | None = None,
) -> ScanResult:
    """Run one scan: plan, generate, finish. Raises AuditorError subclasses only for setup
    failures (bad rule, engine unavailable); every later failure is recorded in the result.

    ``engine`` reuses an engine already started (review scans head and base with one model);
    ``prepared`` reuses a walked and indexed repository.
    """
    if engine is None:
        choice = choose_engine(config.engine, config.engine_settings)
        opened = open_engine(choice, config.engine_settings, use_cache=config.use_cache)
    else:
        choice = EngineChoice(engine.name)
        opened = CachingEngine(engine, default_result_cache_dir()) if config.use_cache and not isinstance(
            engine, CachingEngine) else engine
    plan = plan_scan(config, choice, prepared=prepared, progress=progress)
    if isinstance(opened, NoModel) or not plan.requests:
        return finish_scan(plan, [])
    result = finish_scan(plan, opened.generate(list(plan.requests), progress))
    # Every report names the model that answered: the server's name for it, not only the one asked for.
    return replace(result, model=served_model(opened) or result.model)


def served_model(engine: Engine) -> str | None:
    """The model ``engine`` serves, as its identity names it (the name a server lists, the
    vLLM engine's checkpoint path); None when the identity names none (a recording)."""
    try:
        identity = json.loads(engine.identity())
    except (ValueError, TypeError):
        return None
    model = identity.get("model") if isinstance(identity, dict) else None
    return model if isinstance(model, str) and model else None


def failed_result(config: ScanConfig, error: AuditorError) -> ScanResult:
    """The result of a scan that could not run (bad rule, engine unavailable, bad input):
    no findings, the error recorded as kind "fatal", so every report format shows it."""
    return ScanResult(
        tool_version=__version__,
        root=reported_root_name(config),
        engine=config.engine,
        model=config.engine_settings.model,
        tokenizer_source="none (the scan did not run)",
        tokenizer_exact=False,
        rules=(),
        findings=(),
        rejected=(),
        windows=(),
        errors=(ScanError("fatal", str(error)),),
        notices=(),
        coverage=Coverage(full=(), skeleton=(), omitted=()),
        injection_flags=(),
        prompt_tokens_sent=0,
    )


def _time_estimate(packed: PackResult, output_tokens: int, engine_name: str) -> str:
    """A notice before a long prefill: windows, tokens, and the time a DGX Spark would take."""
    estimates = [estimate_time(window.prompt_tokens, output_tokens) for window in packed.windows]
    prompt_tokens = sum(window.prompt_tokens for window in packed.windows)
    ttft = sum(estimate.ttft_s for estimate in estimates)
    total = sum(estimate.total_s for estimate in estimates)
    return (
        f"{len(estimates)} window(s), {prompt_tokens:,} prompt tokens to {engine_name}; on a "
        f"{estimates[0].profile if estimates else 'reference'} profile: prefill ~{ttft:.0f} s, "
        f"at most ~{total:.0f} s with a full {output_tokens:,}-token answer per window"
    )


def _carried(packed: PackResult) -> set[str]:
    return {f.path for window in packed.windows for f in window.files}


def _coverage(packed: PackResult, texts: Mapping[str, str]) -> Coverage:
    full = {f.path for w in packed.windows for f in w.files if f.tier == "full"}
    skeleton = {f.path for w in packed.windows for f in w.files if f.tier == "skeleton"} - full
    omitted = set(texts) - full - skeleton
    return Coverage(full=tuple(sorted(full)), skeleton=tuple(sorted(skeleton)), omitted=tuple(sorted(omitted)))


def _read_completions(
    planted: list[tuple[Window, CanaryPlan]],
    completions: list[Completion],
    repository: RepositoryView,
    rules: Mapping[str, Rule],
    recall_threshold: float,
) -> tuple[list[WindowOutcome], list[ScanError], list[Finding], list[Rejected], list[ParsedAnswer]]:
    """Parse and ground each window's answer, score its canaries; record incomplete and
    recall-degraded windows as errors. Also returns each window's parsed answer as the model
    gave it (for the judging of the static candidates)."""
    windows: list[WindowOutcome] = []
    errors: list[ScanError] = []
    findings: list[Finding] = []
    rejected: list[Rejected] = []
    answers: list[ParsedAnswer] = []
    for (window, plan), completion in zip(planted, completions):
        parsed = parse_answer(completion.text)
        answers.append(parsed)
        canaries = read_canaries(plan, parsed.canary_answers, recall_threshold)
        claims = tuple(claim for claim in parsed.claims if not _cites_canary(claim, plan))
        rejected.extend(
            Rejected("cites a recall-probe identifier", claim, window.index)
            for claim in parsed.claims
            if _cites_canary(claim, plan)
        )
        parsed = replace(parsed, claims=claims)
        problem = None
        problem_is_parse = False
        if completion.error:
            problem = f"engine error: {completion.error}"
            errors.append(ScanError("engine", problem, window.index))
        elif completion.finish_reason == "length":
            problem = "answer cut off (finish_reason length): raise --output-tokens"
        elif completion.finish_reason and completion.finish_reason != "stop":
            problem = f"answer did not finish (finish_reason {completion.finish_reason})"
        elif not completion.text.strip():
            problem = "empty answer after reasoning"
        elif not parsed.complete:
            problem = "; ".join(parsed.errors) or "answer is not the JSON contract"
            problem_is_parse = True
        if problem and not completion.error:
            errors.append(ScanError("incomplete-window", f"window {window.index}: {problem}", window.index))
        # Parse errors already make up a parse problem; a failed or empty answer has nothing
        # to parse ("empty answer" would repeat the problem as a second error).
        if not problem_is_parse and not completion.error and completion.text.strip():
            for message in parsed.errors:
                errors.append(ScanError("parse", f"window {window.index}: {message}", window.index))
        recall = _window_recall(canaries)
        if recall is not None and recall.degraded and problem is None:
            errors.append(ScanError(
                "recall-degraded",
                f"window {window.index}: recall {recall.recall:.0%} on {recall.planted} canaries is below "
                f"{recall_threshold:.0%}; missed at depths {', '.join(f'{d:.0%}' for d, _, _ in recall.missed)}",
                window.index,
            ))
        window_findings, window_rejected = ground_answer(parsed, repository, rules, window.index)
        findings.extend(window_findings)
        rejected.extend(window_rejected)
        windows.append(
            WindowOutcome(
                index=window.index,
                prompt_tokens=completion.prompt_tokens or window.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                finish_reason=completion.finish_reason,
                complete=problem is None,
                files_full=tuple(sorted({f.path for f in window.files if f.tier == "full"})),
                files_skeleton=tuple(sorted({f.path for f in window.files if f.tier == "skeleton"})),
                reasoning=completion.reasoning,
                cached_prompt_tokens=completion.cached_prompt_tokens,
                error=problem,
                recall=recall,
            )
        )
    return windows, errors, findings, rejected, answers


def _cites_canary(claim: Claim, plan: CanaryPlan) -> bool:
    """Whether a claim names a canary's virtual file or identifiers at its sink or on its chain."""
    if not plan.canaries:
        return False
    steps = (claim.sink, *claim.chain)
    return any(cites_canary(step.path, step.function, plan.canaries) for step in steps)


def _window_recall(report: CanaryReport | None) -> WindowRecall | None:
    if report is None:
        return None
    summary = report.summary
    return WindowRecall(
        planted=summary.total,
        correct=summary.correct,
        abstained=summary.abstained,
        wrong=summary.wrong,
        recall=summary.recall or 0.0,
        degraded=summary.degraded,
        missed=report.missed,
    )
