"""SARIF 2.1.0 report for GitHub code scanning and other SARIF viewers.

Input: a ``ScanResult``. Output: SARIF JSON text (sorted keys, trailing newline) that
validates against the OASIS 2.1.0 schema and carries what GitHub code scanning reads:
rule metadata with help and ``security-severity``, repo-relative locations with regions,
``partialFingerprints.primaryLocationLineHash``, call chains as ``codeFlows`` (entry point
first, sink last), and errors and incomplete windows as tool execution notifications. A
result's level follows its rule and severity, except that a disputed finding is a ``note``
and an unverified one at most a ``warning`` (unless ``--block-disputed``): they do not block.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import PurePosixPath
from typing import Final, Literal, NotRequired, TypedDict
from urllib.parse import quote

from auditor.findings.model import ChainStep, Finding
from auditor.report.model import (
    MAX_CHAIN_STEPS,
    MAX_TEXT_CHARS,
    ReviewedFinding,
    ScanResult,
    SuppressedFinding,
    bounded_result,
    error_text,
    window_problem,
)
from auditor.rules.loader import Rule
from auditor.rules.severity import Severity

SARIF_SCHEMA_URI: Final = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_VERSION: Final = "2.1.0"
SOURCE_ROOT: Final = "%SRCROOT%"
FINGERPRINT_KEY: Final = "auditor/v1"

Level = Literal["error", "warning", "note", "none"]

SEVERITY_LEVEL: Final[dict[str, Level]] = {
    Severity.CRITICAL: "error",
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "note",
    Severity.INFO: "note",
}
# Correctness rules (not vulnerabilities) carry no security-severity: GitHub would show them
# as "High" security alerts. Their level says how bad the partial state is instead.
CORRECTNESS_RULES: Final[frozenset[str]] = frozenset({"tx-outside-transaction"})
CORRECTNESS_LEVEL: Final[dict[str, Level]] = {Severity.CRITICAL: "error"}
# GitHub buckets security-severity: >= 9.0 critical, 7.0-8.9 high, 4.0-6.9 medium, 0.1-3.9 low.
SECURITY_SEVERITY: Final[dict[str, str]] = {
    Severity.CRITICAL: "9.5", Severity.HIGH: "8.0", Severity.MEDIUM: "5.5", Severity.LOW: "3.0",
}


class Message(TypedDict):
    """A SARIF message with plain text."""

    text: str


class MultiformatMessage(TypedDict):
    """A SARIF multiformatMessageString: text and optional Markdown."""

    text: str
    markdown: NotRequired[str]


class ArtifactLocation(TypedDict):
    """A SARIF artifactLocation: a repo-relative URI under %SRCROOT%."""

    uri: str
    uriBaseId: NotRequired[str]


class BaseLocation(TypedDict):
    """An entry of originalUriBaseIds: what a base stands for (usually no URI: the checkout's
    place differs from machine to machine, and GitHub resolves it itself)."""

    description: Message
    uri: NotRequired[str]  # only where the result names its root as an absolute path


class Region(TypedDict):
    """A SARIF region: the line, counted from 1."""

    startLine: int


class PhysicalLocation(TypedDict):
    """A SARIF physicalLocation: file and region."""

    artifactLocation: ArtifactLocation
    region: NotRequired[Region]


class LogicalLocation(TypedDict):
    """A SARIF logicalLocation: the function by qualified name."""

    fullyQualifiedName: str
    kind: str


class Location(TypedDict):
    """A SARIF location."""

    physicalLocation: PhysicalLocation
    logicalLocations: NotRequired[list[LogicalLocation]]
    message: NotRequired[Message]


class ThreadFlowLocation(TypedDict):
    """One step of a code flow: a call on the chain."""

    location: Location
    kinds: list[str]
    executionOrder: int


class ThreadFlow(TypedDict):
    """A SARIF threadFlow: the steps from entry point to sink."""

    locations: list[ThreadFlowLocation]


class CodeFlow(TypedDict):
    """A SARIF codeFlow: the finding's call chain."""

    message: Message
    threadFlows: list[ThreadFlow]


class ReportingConfiguration(TypedDict):
    """A SARIF reportingConfiguration: the rule's default level."""

    level: Level


class ReportingDescriptor(TypedDict):
    """A SARIF reportingDescriptor: one rule's metadata."""

    id: str
    name: str
    shortDescription: MultiformatMessage
    fullDescription: MultiformatMessage
    help: MultiformatMessage
    defaultConfiguration: ReportingConfiguration
    properties: dict[str, object]


class RelatedLocation(TypedDict):
    """A SARIF location with an id, listed under ``relatedLocations``."""

    id: int
    physicalLocation: PhysicalLocation
    logicalLocations: NotRequired[list[LogicalLocation]]
    message: NotRequired[Message]


class Suppression(TypedDict):
    """A SARIF suppression: an in-source ignore comment or an external baseline."""

    kind: Literal["inSource", "external"]
    status: Literal["accepted"]
    justification: str
    location: NotRequired[Location]


class Result(TypedDict):
    """A SARIF result: one finding."""

    ruleId: str
    ruleIndex: int
    level: Level
    message: Message
    locations: list[Location]
    partialFingerprints: dict[str, str]
    fingerprints: dict[str, str]
    codeFlows: NotRequired[list[CodeFlow]]
    relatedLocations: NotRequired[list[RelatedLocation]]
    baselineState: NotRequired[Literal["new", "unchanged"]]
    suppressions: NotRequired[list[Suppression]]
    properties: dict[str, object]


class DescriptorReference(TypedDict):
    """A SARIF reportingDescriptorReference by id."""

    id: str


class Notification(TypedDict):
    """A SARIF notification: an error, warning or note about the run."""

    level: Level
    message: Message
    descriptor: DescriptorReference
    locations: NotRequired[list[Location]]


class Invocation(TypedDict):
    """A SARIF invocation: whether the run succeeded and what went wrong."""

    executionSuccessful: bool
    toolExecutionNotifications: list[Notification]


class ToolComponent(TypedDict):
    """A SARIF toolComponent: auditor and its rules."""

    name: str
    version: str
    semanticVersion: str
    rules: list[ReportingDescriptor]
    informationUri: NotRequired[str]


class Tool(TypedDict):
    """A SARIF tool."""

    driver: ToolComponent


class AutomationDetails(TypedDict):
    """A SARIF runAutomationDetails: GitHub's analysis category."""

    id: str


class Run(TypedDict):
    """A SARIF run."""

    tool: Tool
    invocations: list[Invocation]
    results: list[Result]
    columnKind: str
    originalUriBaseIds: NotRequired[dict[str, BaseLocation]]
    automationDetails: NotRequired[AutomationDetails]
    properties: dict[str, object]


SarifLog = TypedDict("SarifLog", {"$schema": str, "version": str, "runs": list[Run]})


def information_uri() -> str | None:
    """The project's home page from the installed package metadata (``[project.urls]``), if any."""
    try:
        meta = metadata.metadata("auditor")
    except metadata.PackageNotFoundError:
        return None
    for entry in meta.get_all("Project-URL") or []:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() in {"homepage", "home", "repository", "source", "documentation"} and url.strip():
            return url.strip()
    homes = [home.strip() for home in meta.get_all("Home-page") or [] if str(home).strip()]
    return str(homes[0]) if homes else None


def primary_location_line_hash(finding: Finding, occurrence: int) -> str:
    """GitHub-style ``primaryLocationLineHash``: the finding's fingerprint (its structure,
    never line numbers; the same 32 hex digits every report shows) and the occurrence of
    that fingerprint in the file, as in "0123456789abcdef0123456789abcdef:1"."""
    return f"{finding.fingerprint}:{occurrence}"


def _level(rule_id: str, severity: str) -> Level:
    """A result's SARIF level: by severity; a correctness rule's is error only when critical."""
    if rule_id in CORRECTNESS_RULES:
        return CORRECTNESS_LEVEL.get(severity, "warning")
    return SEVERITY_LEVEL.get(severity, "warning")


def _finding_level(finding: Finding, block_disputed: bool) -> Level:
    """A finding's SARIF level: its rule's for its severity; a disputed finding's ``note``
    and an unverified one's at most ``warning`` (they do not block unless ``--block-disputed``)."""
    level = _level(finding.rule, finding.severity)
    if block_disputed or not finding.contested:
        return level
    if finding.disputed:
        return "note"
    return "warning" if level == "error" else level


def _rule_name(rule_id: str) -> str:
    return "".join(part.capitalize() for part in rule_id.split("-") if part)


def _descriptor(rule: Rule) -> ReportingDescriptor:
    correctness = rule.id in CORRECTNESS_RULES
    properties: dict[str, object] = {
        "tags": ["correctness" if correctness else "security", *sorted(set(rule.languages))],
        "precision": "medium",
    }
    if rule.severity in SECURITY_SEVERITY and not correctness:
        properties["security-severity"] = SECURITY_SEVERITY[rule.severity]
    return {
        "id": rule.id,
        "name": _rule_name(rule.id),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.description},
        "help": {"text": rule.body, "markdown": rule.body},
        "defaultConfiguration": {"level": _level(rule.id, rule.severity)},
        "properties": properties,
    }


def _placeholder_descriptor(rule_id: str) -> ReportingDescriptor:
    """A descriptor for a finding whose rule is not among the scan's rules (never expected)."""
    return {
        "id": rule_id,
        "name": _rule_name(rule_id),
        "shortDescription": {"text": rule_id},
        "fullDescription": {"text": f"Findings of rule {rule_id}."},
        "help": {"text": f"Rule {rule_id} was not part of this scan's rule set."},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"tags": ["security"], "precision": "medium"},
    }


def _artifact(path: str) -> ArtifactLocation:
    return {"uri": quote(PurePosixPath(path).as_posix(), safe="/"), "uriBaseId": SOURCE_ROOT}


def _location(path: str, line: int, function: str | None = None, message: str | None = None) -> Location:
    physical: PhysicalLocation = {"artifactLocation": _artifact(path)}
    if line > 0:
        physical["region"] = {"startLine": line}
    location: Location = {"physicalLocation": physical}
    if function:
        location["logicalLocations"] = [{"fullyQualifiedName": function, "kind": "function"}]
    if message:
        location["message"] = {"text": message}
    return location


def _code_flows(finding: Finding) -> list[CodeFlow]:
    """One codeFlow per distinct entry chain reaching the sink, the primary chain first."""
    flows = (_code_flow(finding, chain.steps) for chain in finding.entry_chains())
    return [flow for flow in flows if flow is not None]


def _code_flow(finding: Finding, chain: tuple[ChainStep, ...] | None = None) -> CodeFlow | None:
    """One chain as a thread flow. Each step's location is where its function calls the
    next step (docs/answer-contract.md, "Chain lines"), so the message names that call; the
    last step's location is the sink. At most ``MAX_CHAIN_STEPS`` locations."""
    chain = finding.chain if chain is None else chain
    if not chain:
        return None
    flow: list[ThreadFlowLocation] = []
    last_index = len(chain) - 1
    for index, step in enumerate(chain):
        if index < last_index:
            text = f"{step.function} calls {chain[index + 1].function}"
        elif (step.path, step.line) == (finding.path, finding.line):
            text = f"sink in {step.function}: {finding.title}"
        else:
            text = step.function
        if index == 0:
            text = f"entry point {text}" if index < last_index else f"entry point {step.function}; {text}"
        if not step.verified:
            text += f" (unverified: {step.note})" if step.note else " (unverified)"
        elif "chain steps left out" in step.note:
            text += f" ({step.note})"
        flow.append({"location": _location(step.path, step.line, step.function, text), "kinds": ["call"], "executionOrder": 0})
    last = chain[-1]
    if (last.path, last.line) != (finding.path, finding.line):
        sink = _location(finding.path, finding.line, finding.function, f"sink in {finding.function}: {finding.title}")
        flow.append({"location": sink, "kinds": ["call"], "executionOrder": 0})
    if len(flow) > MAX_CHAIN_STEPS:
        flow = [*flow[: MAX_CHAIN_STEPS - 1], flow[-1]]
    for order, location in enumerate(flow, start=1):
        location["executionOrder"] = order
    entry = chain[0].function
    return {"message": {"text": f"{entry} reaches {finding.function}"}, "threadFlows": [{"locations": flow}]}


def _message(finding: Finding) -> str:
    entry = finding.chain[0] if finding.chain else None
    if entry is None or (entry.path, entry.function) == (finding.path, finding.function):
        route = "in an entry point"
    elif entry.function == finding.function:  # two functions of one name: say which
        route = f"reached from {entry.function} in {entry.path}"
    else:
        route = f"reached from {entry.function}"
    text = f"{finding.title} ({finding.function} at {finding.path}:{finding.line}, {route})."
    if finding.explanation:
        text += f"\n\n{finding.explanation}"
    text += _dispute_note(finding)
    return text


def _dispute_note(finding: Finding) -> str:
    """The model's refutation of a static candidate, for the message; empty when undisputed."""
    if not finding.disputed:
        return ""
    reasons = "; ".join(
        f"{v.reason}" + (f" ({v.path}:{v.line})" if v.path and v.line else "") for v in finding.verdicts
    )
    return f"\n\nDisputed: the model refuted this static candidate: {reasons}"


def _result(
    finding: Finding,
    rule_index: int,
    occurrence: int,
    reviewed: ReviewedFinding | None = None,
    suppressed: SuppressedFinding | None = None,
    block_disputed: bool = False,
) -> Result:
    result: Result = {
        "ruleId": finding.rule,
        "ruleIndex": rule_index,
        "level": _finding_level(finding, block_disputed),
        "message": {"text": _message(finding)},
        "locations": [_location(finding.path, finding.line, finding.function)],
        "partialFingerprints": {"primaryLocationLineHash": primary_location_line_hash(finding, occurrence)},
        "fingerprints": {FINGERPRINT_KEY: finding.fingerprint},
        "properties": {
            "severity": finding.severity,
            "foundBy": list(finding.found_by),
            "chainVerified": all(step.verified for step in finding.chain),
        },
    }
    if finding.verdict is not None:
        result["properties"]["verdict"] = finding.verdict
        result["properties"]["disputed"] = finding.disputed
    flows = _code_flows(finding)
    if flows:
        result["codeFlows"] = flows
    related: list[Location] = []
    if reviewed is not None:
        # GitHub shows a pull-request alert only on a changed line: the primary location is
        # the changed line on the chain, and the sink stays in the code flow and related locations.
        result["baselineState"] = "new" if reviewed.status == "new" else "unchanged"
        result["properties"]["review"] = reviewed.status
        if (reviewed.path, reviewed.line) != (finding.path, finding.line):
            text = f"changed line on the chain to {finding.function} ({reviewed.touched_by})"
            result["locations"] = [_location(reviewed.path, reviewed.line, reviewed.function, text)]
            related.append(_location(finding.path, finding.line, finding.function, f"sink: {finding.title}"))
    # Each effect of the static sequence where it happens, so a viewer can step through them.
    related += [_location(site.path, site.line, site.function, f"{site.effect} in {site.function}") for site in finding.sequence]
    if related:
        result["relatedLocations"] = [{"id": number, **location} for number, location in enumerate(related, 1)]
    if suppressed is not None:
        suppression: Suppression = {
            "kind": "inSource" if suppressed.source == "inline" else "external",
            "status": "accepted",
            "justification": suppressed.reason,
        }
        result["suppressions"] = [suppression]
    return result


def _notifications(result: ScanResult) -> list[Notification]:
    notes: list[Notification] = []
    reported_windows = {error.window for error in result.errors if error.kind == "incomplete-window"}
    for window in result.incomplete_windows:
        if window.index not in reported_windows:
            notes.append(
                {"level": "error", "message": {"text": window_problem(window)}, "descriptor": {"id": "auditor/incomplete-window"}}
            )
    for error in result.errors:
        text = error_text(error)
        if error.kind == "incomplete-window" and "INCOMPLETE" not in text:
            text = f"INCOMPLETE {text}"
        notes.append({"level": "error", "message": {"text": text}, "descriptor": {"id": f"auditor/{error.kind}"}})
    for rejected in result.sorted_rejected():
        sink = rejected.claim.sink
        where = f"{sink.path}:{sink.line}" if sink.line is not None else sink.path
        notes.append(
            {
                "level": "warning",
                "message": {"text": f"rejected model claim ({rejected.claim.rule}, {where} {sink.function}): {rejected.reason}"},
                "descriptor": {"id": "auditor/rejected-claim"},
            }
        )
    for flag in sorted(result.injection_flags, key=lambda flag: (flag.path, flag.line)):
        notes.append(
            {
                "level": "warning",
                "message": {"text": f"text that looks like instructions to an AI reviewer: {flag.text}"},
                "descriptor": {"id": "auditor/possible-prompt-injection"},
                "locations": [_location(flag.path, flag.line)],
            }
        )
    for warning in result.warnings:
        notes.append({"level": "warning", "message": {"text": warning}, "descriptor": {"id": "auditor/warning"}})
    for notice in result.notices:
        notes.append({"level": "note", "message": {"text": notice}, "descriptor": {"id": "auditor/notice"}})
    return notes


def sarif_log(result: ScanResult, category: str | None = None, source_prefix: str = "") -> SarifLog:
    """The SARIF log as typed dictionaries (what ``render_sarif`` serialises), model text and
    chains within the output limits.

    Every location is relative to ``%SRCROOT%``, the repository's top directory (GitHub
    resolves it to the checkout): ``source_prefix`` is the scanned directory's path from
    there ("" or ending in "/"), put before each path of the result."""
    result = bounded_result(result)
    rules = sorted(result.rules, key=lambda rule: rule.id)
    descriptors = [_descriptor(rule) for rule in rules]
    known = {rule.id for rule in rules}
    reported_rules = {finding.rule for finding in result.findings} | {item.finding.rule for item in result.suppressed}
    for rule_id in sorted(reported_rules - known):
        descriptors.append(_placeholder_descriptor(rule_id))
    rule_index = {descriptor["id"]: index for index, descriptor in enumerate(descriptors)}

    results: list[Result] = []
    occurrences: dict[tuple[str, str, str], int] = {}
    review = result.review
    entries: list[tuple[Finding, SuppressedFinding | None]] = [(finding, None) for finding in result.sorted_findings()]
    entries += [(item.finding, item) for item in result.sorted_suppressed()]
    for finding, suppression in entries:
        key = (finding.rule, finding.path, finding.fingerprint)
        occurrences[key] = occurrences.get(key, 0) + 1
        reviewed = review.reviewed(finding.fingerprint) if review is not None else None
        results.append(_result(finding, rule_index[finding.rule], occurrences[key], reviewed, suppression, result.block_disputed))

    driver: ToolComponent = {
        "name": "auditor",
        "version": result.tool_version,
        "semanticVersion": result.tool_version,
        "rules": descriptors,
    }
    uri = information_uri()
    if uri:
        driver["informationUri"] = uri
    run: Run = {
        "tool": {"driver": driver},
        "invocations": [
            {"executionSuccessful": result.complete and not result.partial, "toolExecutionNotifications": _notifications(result)}
        ],
        "results": results,
        "columnKind": "utf16CodeUnits",
        "properties": {
            "complete": result.complete,
            "engine": result.engine,
            "model": result.model,
            "promptTokensSent": result.prompt_tokens_sent,
            "windows": len(result.windows),
            "windowsIncomplete": len(result.incomplete_windows),
            "rejectedClaims": len(result.rejected),
            "suppressed": len(result.suppressed),
            "coverage": {
                "full": len(result.coverage.full),
                "skeleton": len(result.coverage.skeleton),
                "omitted": len(result.coverage.omitted),
            },
        },
    }
    if review is not None:
        run["properties"]["review"] = {
            "base": review.base,
            "head": review.head,
            "new": review.new_count,
            "existing": review.existing_count,
            "outsideDiff": review.outside_diff,
        }
    base: BaseLocation = {"description": {"text": "The top directory of the repository (the checkout)."}}
    root = PurePosixPath(result.root)
    if root.is_absolute() and not source_prefix:
        base["uri"] = root.as_uri().rstrip("/") + "/"
    run["originalUriBaseIds"] = {SOURCE_ROOT: base}
    if source_prefix:
        _rebase(run, quote(source_prefix, safe="/"))
    if category:
        run["automationDetails"] = {"id": category if category.endswith("/") else f"{category}/"}
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def _rebase(node: object, prefix: str) -> None:
    """Put ``prefix`` before the URI of every ``%SRCROOT%``-relative artifact location in ``node``."""
    if isinstance(node, dict):
        if node.get("uriBaseId") == SOURCE_ROOT and isinstance(node.get("uri"), str):
            node["uri"] = prefix + node["uri"]
        for value in node.values():
            _rebase(value, prefix)
    elif isinstance(node, list):
        for value in node:
            _rebase(value, prefix)


# GitHub code scanning refuses an upload over 10 MB (gzip); staying under it uncompressed is safe.
MAX_SARIF_BYTES = 10 * 1024 * 1024
# Tighter (explanation characters, chain steps) limits tried in turn while the log is too big.
_SHRINK_STEPS = ((MAX_TEXT_CHARS, MAX_CHAIN_STEPS), (2_000, 1_000), (200, 50))


def render_sarif(result: ScanResult, category: str | None = None, source_prefix: str = "") -> str:
    """The SARIF 2.1.0 report; ``category`` becomes ``automationDetails.id`` (GitHub's category),
    ``source_prefix`` as in ``sarif_log``.

    A log over ``MAX_SARIF_BYTES`` is rendered again with shorter explanations and chains
    (each cut marked), so it stays uploadable.
    """
    text = ""
    for text_limit, chain_limit in _SHRINK_STEPS:
        log = sarif_log(bounded_result(result, text_limit, chain_limit), category, source_prefix)
        text = json.dumps(log, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        if len(text.encode("utf-8")) <= MAX_SARIF_BYTES:
            break
    return text
