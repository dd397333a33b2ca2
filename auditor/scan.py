"""Scan: the audit run — pack the repository, ask the engine, ground the answers, merge
with the static pass, and assemble a ``ScanResult`` for the reporters.

Inputs: a frozen ``ScanConfig``. Output: ``ScanResult``. Every failure that leaves part of
the repository unread (an incomplete window, an engine error) is recorded in the result,
never dropped: the CLI turns it into an exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from auditor import __version__
from auditor.callgraph import CallGraph
from auditor.engine.base import ChatMessage, ChatRequest, Completion, EngineSettings
from auditor.engine.registry import create_engine, resolve_auto
from auditor.findings import Finding, Rejected, RepositoryView, answer_schema_json, ground_answer, merge_findings, parse_answer
from auditor.index import FileIndex
from auditor.injection import detect_injections
from auditor.pack import PackOptions, PackResult
from auditor.plan import estimate_time
from auditor.pipeline import PreparedRepository, pack_prepared, prepare_repository
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.report.model import Coverage, ScanError, ScanResult, WindowOutcome
from auditor.rules import Rule, builtin_rules, load_rules
from auditor.static import StaticResult, analyze_tx_outside_transaction
from auditor.tokens import TokenizerRequest, load_tokenizer
from auditor.walk import WalkOptions

# Rules with a static analysis, by id. Rules without one need a model.
STATIC_ANALYSES: dict[str, Callable[[Mapping[str, FileIndex], Mapping[str, str], Rule, CallGraph], StaticResult]] = {
    "tx-outside-transaction": analyze_tx_outside_transaction,
}


@dataclass(frozen=True)
class ScanConfig:
    """Everything one scan needs, resolved from flags and configuration."""

    root: Path
    rules: tuple[str, ...] = ()
    engine: str = "auto"
    engine_settings: EngineSettings = field(default_factory=EngineSettings)
    tokenizer: TokenizerRequest = field(default_factory=TokenizerRequest)
    pack: PackOptions = field(default_factory=PackOptions)
    walk: WalkOptions = field(default_factory=WalkOptions)
    use_cache: bool = True
    static: bool = True


def selected_rules(specs: tuple[str, ...]) -> tuple[Rule, ...]:
    """The rules named by ``--rule``; all built-in rules when none is named."""
    return load_rules(specs) if specs else tuple(builtin_rules().values())


class IndexLocator:
    """FunctionLocator over the tree-sitter index: which function holds a line, and where a function is."""

    def __init__(self, indexes: Mapping[str, FileIndex]):
        self._indexes = indexes

    def enclosing_function(self, path: str, line: int) -> str | None:
        index = self._indexes.get(path)
        definition = index.enclosing_definition(line) if index else None
        return definition.qualname if definition else None

    def function_lines(self, path: str, function: str) -> tuple[int, int] | None:
        index = self._indexes.get(path)
        if index is None:
            return None
        exact = [d for d in index.definitions if d.qualname == function and d.kind != "class"]
        named = exact or [d for d in index.definitions if d.name == function.rsplit(".", 1)[-1] and d.kind != "class"]
        if len(named) != 1:
            return None
        return named[0].start_line, named[0].end_line


def run_scan(config: ScanConfig, progress: ProgressCallback = no_progress) -> ScanResult:
    """Run one scan. Raises AuditorError subclasses only for setup failures (bad rule, engine unavailable)."""
    rules = selected_rules(config.rules)
    engine_name, notices = config.engine, []
    if engine_name == "auto":
        engine_name, reason = resolve_auto(config.engine_settings)
        notices.append(f"engine auto -> {engine_name}: {reason}")
    engine = None if engine_name == "static" else create_engine(engine_name, config.engine_settings)
    prepared = prepare_repository(config.root, config.walk, use_cache=config.use_cache, progress=progress)
    texts = prepared.texts

    static_findings: list[Finding] = []
    if config.static or engine is None:
        for rule in rules:
            analysis = STATIC_ANALYSES.get(rule.id)
            if analysis is None:
                if engine is None:
                    notices.append(f"rule {rule.id} has no static analysis: it needs a model engine (not run)")
                continue
            progress(ProgressEvent(stage="static", message=f"static pass for {rule.id}"))
            static_findings.extend(analysis(prepared.indexes, texts, rule, prepared.graph).findings)

    if engine is None:
        notices.append("no model ran: findings come from the static pass only")
        return _result(
            config, prepared, rules,
            engine="static", model=None, tokenizer_source="none (static pass)", tokenizer_exact=False,
            findings=merge_findings([static_findings]), notices=tuple(notices),
            coverage=Coverage(full=tuple(sorted(prepared.indexes)), skeleton=(), omitted=tuple(sorted(set(texts) - set(prepared.indexes)))),
        )

    tokenizer = load_tokenizer(config.tokenizer)
    if not tokenizer.info.exact:
        notices.append(tokenizer.info.describe())
    packed = pack_prepared(prepared, rules=rules, tokenizer=tokenizer, options=config.pack, progress=progress)
    schema = answer_schema_json([rule.id for rule in rules])
    requests = [
        ChatRequest(
            id=f"window-{window.index}",
            messages=tuple(ChatMessage(m.role, m.content) for m in window.messages),
            prompt_tokens=window.prompt_tokens,
            max_tokens=config.pack.output_tokens,
            thinking=config.pack.thinking,
            json_schema=schema,
        )
        for window in packed.windows
    ]
    progress(ProgressEvent(stage="engine", message=_time_estimate(packed, config.pack.output_tokens, engine_name)))
    completions = engine.generate(requests, progress)
    repository = RepositoryView(
        files={path: texts[path] for path in _carried(packed)},
        locator=IndexLocator(prepared.indexes),
        edges=prepared.graph,
    )
    rules_by_id = {rule.id: rule for rule in rules}
    windows, errors, model_findings, rejected = _read_completions(packed, completions, repository, rules_by_id)
    coverage = _coverage(packed, texts)
    return _result(
        config, prepared, rules,
        engine=engine_name, model=config.engine_settings.model,
        tokenizer_source=tokenizer.info.source, tokenizer_exact=tokenizer.info.exact,
        findings=merge_findings([model_findings, static_findings]), rejected=tuple(rejected),
        windows=tuple(windows), errors=tuple(errors), notices=tuple(notices), coverage=coverage,
        prompt_tokens_sent=sum(c.prompt_tokens or r.prompt_tokens for c, r in zip(completions, requests)),
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
    packed: PackResult,
    completions: list[Completion],
    repository: RepositoryView,
    rules: Mapping[str, Rule],
) -> tuple[list[WindowOutcome], list[ScanError], list[Finding], list[Rejected]]:
    """Parse and ground each window's answer; record incomplete windows as errors."""
    windows: list[WindowOutcome] = []
    errors: list[ScanError] = []
    findings: list[Finding] = []
    rejected: list[Rejected] = []
    for window, completion in zip(packed.windows, completions):
        parsed = parse_answer(completion.text)
        problem = None
        if completion.error:
            problem = f"engine error: {completion.error}"
            errors.append(ScanError("engine", problem, window.index))
        elif completion.finish_reason == "length":
            problem = "answer cut off (finish_reason length): raise --output-tokens"
        elif not completion.text.strip():
            problem = "empty answer after reasoning"
        elif not parsed.complete:
            problem = "; ".join(parsed.errors) or "answer is not the JSON contract"
        if problem and not completion.error:
            errors.append(ScanError("incomplete-window", f"window {window.index}: {problem}", window.index))
        for message in parsed.errors:
            if parsed.complete:
                errors.append(ScanError("parse", f"window {window.index}: {message}", window.index))
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
            )
        )
    return windows, errors, findings, rejected


def _result(
    config: ScanConfig,
    prepared: PreparedRepository,
    rules: tuple[Rule, ...],
    *,
    engine: str,
    model: str | None,
    tokenizer_source: str,
    tokenizer_exact: bool,
    findings: tuple[Finding, ...],
    notices: tuple[str, ...],
    coverage: Coverage,
    rejected: tuple[Rejected, ...] = (),
    windows: tuple[WindowOutcome, ...] = (),
    errors: tuple[ScanError, ...] = (),
    prompt_tokens_sent: int = 0,
) -> ScanResult:
    """Assemble the result; files the model saw (or the static pass indexed) are checked for injected instructions."""
    seen = set(coverage.full) | set(coverage.skeleton)
    injection_flags = detect_injections({p: t for p, t in prepared.texts.items() if p in seen})
    return ScanResult(
        tool_version=__version__,
        root=config.root.name or str(config.root),
        engine=engine,
        model=model,
        tokenizer_source=tokenizer_source,
        tokenizer_exact=tokenizer_exact,
        rules=rules,
        findings=findings,
        rejected=rejected,
        windows=windows,
        errors=errors,
        notices=notices,
        coverage=coverage,
        injection_flags=injection_flags,
        prompt_tokens_sent=prompt_tokens_sent,
    )
