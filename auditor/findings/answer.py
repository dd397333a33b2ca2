"""The answer contract: its JSON Schema (``ANSWER_SCHEMA``, ``answer_schema``) and
``parse_answer``, which recovers claims, canary answers and every parse problem from a model
answer (complete, truncated or malformed). The contract itself is documented in
docs/answer-contract.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from auditor.findings.model import CONFIRMED, REFUTED, CanaryAnswer, Claim, ClaimedStep, Verdict
from auditor.rules.severity import Severity


@dataclass(frozen=True)
class ParsedAnswer:
    """Everything recovered from one model answer.

    ``complete`` is True only when a whole JSON object of the contract was found and
    parsed and every finding and canary answer in it could be read (a malformed chain step is
    left out with an error and does not count against it). ``salvaged`` counts the complete findings recovered from a truncated or
    malformed answer. ``errors`` lists every problem met, including findings that were
    read but are invalid: nothing the model said is dropped without a trace here.
    """

    claims: tuple[Claim, ...]
    canary_answers: tuple[CanaryAnswer, ...]
    complete: bool
    salvaged: int
    errors: tuple[str, ...]
    # Verdicts on the static candidates listed in the prompt (see ``read_verdicts``).
    verdicts: tuple[Verdict, ...] = ()


def verdict_schema() -> dict[str, Any]:
    """The JSON Schema of one verdict on a static candidate (``verdicts[]``)."""
    return {
        "type": "object",
        "properties": {
            "candidate": {"type": "string"},
            "verdict": {"type": "string", "enum": [CONFIRMED, REFUTED]},
            "path": {"type": "string"},
            "line": {"type": "integer"},
            "reason": {"type": "string"},
        },
        "required": ["candidate", "verdict", "reason"],
        "additionalProperties": False,
    }


def answer_schema(rule_ids: Sequence[str] | None = None, candidate_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """The JSON Schema of the answer contract, fresh on every call.

    With ``rule_ids`` the ``rule`` field is restricted to those ids (useful as a
    structured-output constraint when the selected rules are known). With
    ``candidate_ids`` (the static candidates a window lists) ``verdicts`` is required and
    its ``candidate`` restricted to those ids; without, ``verdicts`` is optional.
    """
    step: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "line": {"type": "integer"},
            "function": {"type": "string"},
        },
        "required": ["path", "line", "function"],
        "additionalProperties": False,
    }
    rule: dict[str, Any] = {"type": "string"}
    if rule_ids:
        rule["enum"] = sorted(set(rule_ids))
    finding: dict[str, Any] = {
        "type": "object",
        "properties": {
            "rule": rule,
            "title": {"type": "string"},
            "severity": {"type": "string", "enum": list(Severity.names())},
            "sink": step,
            "chain": {"type": "array", "items": step},
            "explanation": {"type": "string"},
        },
        "required": ["rule", "title", "severity", "sink", "chain", "explanation"],
        "additionalProperties": False,
    }
    canary_answer: dict[str, Any] = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "answer": {"type": "string"}},
        "required": ["id", "answer"],
        "additionalProperties": False,
    }
    verdict = verdict_schema()
    required = ["findings", "probes"]
    if candidate_ids:
        verdict["properties"]["candidate"]["enum"] = sorted(set(candidate_ids))
        required.append("verdicts")
    return {
        "type": "object",
        "properties": {
            "findings": {"type": "array", "items": finding},
            "probes": {"type": "array", "items": canary_answer},
            "verdicts": {"type": "array", "items": verdict},
        },
        "required": required,
        "additionalProperties": False,
    }


# The contract's schema for every rule; pass ``answer_schema(rule_ids)`` to pin rule ids.
ANSWER_SCHEMA: Final[dict[str, Any]] = answer_schema()


def answer_schema_json(rule_ids: Sequence[str] | None = None, candidate_ids: Sequence[str] | None = None) -> str:
    """The answer schema as JSON text with sorted keys (stable across runs, cache-friendly)."""
    return json.dumps(answer_schema(rule_ids, candidate_ids), sort_keys=True, separators=(",", ":"))


_DECODER = json.JSONDecoder()


_THINK_END = "</think>"


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


_CODE_FENCE_END = re.compile(r"\s*`{3,}\s*$")


_LINE_TEXT = re.compile(r"^\s*[Ll]?(\d+)\b")


_ANSWER_KEYS = ("findings", "probes", "verdicts")


def parse_answer(text: str) -> ParsedAnswer:
    """Read the answer contract out of a model's answer text.

    Tolerates a reasoning trace ending in ``</think>`` (only what follows its first
    ``</think>`` outside a JSON object is read), code
    fences, prose before and after the JSON, trailing commas, and truncation: from a
    cut-off answer every complete finding object is salvaged and ``complete`` is False.
    Invalid findings are reported in ``errors`` rather than dropped.
    """
    answer = _after_trace(text)
    if not answer.strip():
        return ParsedAnswer(claims=(), canary_answers=(), complete=False, salvaged=0, errors=("empty answer",))

    document, saw_object, others = _find_answer_object(answer)
    if document is None:
        lenient = _TRAILING_COMMA.sub(r"\1", answer)
        if lenient != answer:
            document, _, others = _find_answer_object(lenient)
    if document is not None:
        claims, canary_answers, problems = _read_document(document)
        # An object that breaks the contract (a finding or probe that cannot be read, a
        # 'findings' that is not a list) may hide what the model meant: not a complete
        # answer. A malformed chain step only shortens a finding that was read.
        meets_contract = all(problem.endswith(_STEP_LEFT_OUT) for problem in problems)
        if others:
            # Only the first object is the answer (docs/answer-contract.md); say what was not read.
            ignored = f"answer holds {others + 1} different JSON objects with 'findings' or 'probes'; only the first was read"
            problems = (ignored, *problems)
        verdict_errors: list[str] = []
        verdicts = read_verdicts(document.get("verdicts"), verdict_errors)
        return ParsedAnswer(claims=claims, canary_answers=canary_answers, complete=meets_contract, salvaged=0,
                            errors=(*problems, *verdict_errors), verdicts=verdicts)

    raw_findings, findings_closed = _salvage_array(answer, "findings")
    raw_probes, _ = _salvage_array(answer, "probes")
    raw_verdicts, _ = _salvage_array(answer, "verdicts")
    if raw_findings is None and raw_probes is None and raw_verdicts is None:
        problem = (
            "JSON in answer has no 'findings' or 'probes' key" if saw_object else "no JSON object in answer"
        )
        return ParsedAnswer(claims=(), canary_answers=(), complete=False, salvaged=0, errors=(problem,))

    errors: list[str] = []
    claims = _read_claims(raw_findings or [], errors)
    canary_answers = _read_canary_answers(raw_probes or [], errors)
    verdicts = read_verdicts(raw_verdicts, errors)
    truncated = not _CODE_FENCE_END.sub("", answer).rstrip().endswith("}")
    how = "answer truncated" if truncated else "answer is not valid JSON"
    if raw_findings is not None and not findings_closed:
        summary = f"{how}: {len(claims)} complete findings salvaged"
    else:
        summary = f"{how}: {len(claims)} findings read before the break"
    return ParsedAnswer(
        claims=claims,
        canary_answers=canary_answers,
        complete=False,
        salvaged=len(claims),
        errors=(summary, *errors),
        verdicts=verdicts,
    )


_STEP_LEFT_OUT = "(step left out of the chain)"


def _after_trace(text: str) -> str:
    """The text after the reasoning trace: after the first ``</think>`` that is not quoted
    inside a JSON object starting before it (an answer may quote ``</think>``); the whole
    text when there is no such close."""
    position = text.find(_THINK_END)
    while position != -1:
        if not _inside_json_object(text, position):
            return text[position + len(_THINK_END):]
        position = text.find(_THINK_END, position + 1)
    return text


def _inside_json_object(text: str, position: int) -> bool:
    """Whether ``position`` falls inside a JSON object that decodes from a ``{`` before it."""
    start = text.find("{")
    while -1 < start < position:
        try:
            _, end = _DECODER.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if end > position:
            return True
        start = text.find("{", end)
    return False


def _find_answer_object(text: str) -> tuple[dict[str, Any] | None, bool, int]:
    """The first JSON object in ``text`` holding a contract key, whether any JSON object was
    seen, and how many later contract objects differ from the first (and so were not read)."""
    saw_object = False
    first: dict[str, Any] | None = None
    others = 0
    position = text.find("{")
    while position != -1:
        try:
            value, end = _DECODER.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError):
            # RecursionError: nesting deeper than the decoder allows (a degenerate answer).
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            saw_object = True
            if any(key in value for key in _ANSWER_KEYS):
                if first is None:
                    first = value
                elif value != first:
                    others += 1
        # A decoded object is skipped whole, nested objects included.
        position = text.find("{", end)
    return first, saw_object, others


def _salvage_array(text: str, key: str) -> tuple[list[Any] | None, bool]:
    """Decode the complete items of the array under ``"key": [`` in a broken answer.

    Returns the items (None when the key is absent) and whether the array was closed.
    """
    match = re.search(rf'"{key}"\s*:\s*\[', text)
    if match is None:
        return None, False
    items: list[Any] = []
    position = match.end()
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text):
            return items, False
        if text[position] == "]":
            return items, True
        try:
            value, position = _DECODER.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError):
            return items, False
        items.append(value)


def _read_document(document: dict[str, Any]) -> tuple[tuple[Claim, ...], tuple[CanaryAnswer, ...], tuple[str, ...]]:
    errors: list[str] = []
    raw_findings = document.get("findings", [])
    if raw_findings is None:
        raw_findings = []
    if not isinstance(raw_findings, list):
        errors.append("'findings' is not a list")
        raw_findings = []
    raw_probes = document.get("probes", [])
    if raw_probes is None:
        raw_probes = []
    if not isinstance(raw_probes, list):
        errors.append("'probes' is not a list")
        raw_probes = []
    claims = _read_claims(raw_findings, errors)
    canary_answers = _read_canary_answers(raw_probes, errors)
    return claims, canary_answers, tuple(errors)


def _read_claims(raw_findings: list[Any], errors: list[str]) -> tuple[Claim, ...]:
    claims: list[Claim] = []
    for number, raw in enumerate(raw_findings, start=1):
        claim = _claim_from(raw, f"finding {number}", errors)
        if isinstance(claim, Claim):
            claims.append(claim)
        else:
            errors.append(claim)
    return tuple(claims)


def _read_canary_answers(raw_probes: list[Any], errors: list[str]) -> tuple[CanaryAnswer, ...]:
    canary_answers: list[CanaryAnswer] = []
    for number, raw in enumerate(raw_probes, start=1):
        if not isinstance(raw, dict):
            errors.append(f"probe {number}: not an object")
            continue
        canary_id, answer = raw.get("id"), raw.get("answer")
        if isinstance(canary_id, bool) or not isinstance(canary_id, (str, int)) or str(canary_id).strip() == "":
            errors.append(f"probe {number}: 'id' is missing or not a string")
            continue
        if answer is None:
            answer = ""
        if isinstance(answer, (dict, list)):
            answer = json.dumps(answer, sort_keys=True)
        canary_answers.append(CanaryAnswer(id=str(canary_id).strip(), answer=str(answer).strip()))
    return tuple(canary_answers)


def _claim_from(raw: Any, where: str, errors: list[str]) -> Claim | str:
    """A Claim, or an error message saying why ``raw`` is not one."""
    if not isinstance(raw, dict):
        return f"{where}: not an object"
    rule = raw.get("rule")
    if not isinstance(rule, str) or not rule.strip():
        return f"{where}: 'rule' is missing or not a string"
    texts: dict[str, str] = {}
    for name in ("title", "severity", "explanation"):
        value = raw.get(name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            return f"{where}: '{name}' must be a string"
        texts[name] = value.strip()
    if "sink" not in raw or raw["sink"] is None:
        return f"{where}: 'sink' is missing"
    sink = _step_from(raw["sink"], f"{where}: sink")
    if isinstance(sink, str):
        return sink
    raw_chain = raw.get("chain")
    if raw_chain is None:
        raw_chain = []
    if not isinstance(raw_chain, list):
        return f"{where}: 'chain' must be a list"
    chain: list[ClaimedStep] = []
    for number, raw_step in enumerate(raw_chain, start=1):
        step = _step_from(raw_step, f"{where}: chain step {number}")
        if isinstance(step, str):
            errors.append(f"{step} {_STEP_LEFT_OUT}")
        else:
            chain.append(step)
    return Claim(
        rule=rule.strip(),
        title=texts["title"],
        severity=texts["severity"],
        sink=sink,
        chain=tuple(chain),
        explanation=texts["explanation"],
    )


def _step_from(raw: Any, where: str) -> ClaimedStep | str:
    """A ClaimedStep, or an error message saying why ``raw`` is not one."""
    if not isinstance(raw, dict):
        return f"{where} is not an object"
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip():
        return f"{where} has no path"
    line = _line_number(raw.get("line"))
    if isinstance(line, str):
        return f"{where}: {line}"
    function = raw.get("function")
    if function is None:
        function = ""
    if not isinstance(function, str):
        return f"{where}: 'function' must be a string"
    return ClaimedStep(path=path.strip(), line=line, function=function.strip())


def _line_number(value: Any) -> int | None | str:
    """A line number from an int, an integral float or a numeric string ("42", "L42");
    None when absent; an error message for anything else."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "'line' must be a number"
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        if not value.strip():
            return None
        match = _LINE_TEXT.match(value)
        if match:
            return int(match.group(1))
    return f"'line' must be a number, got {value!r}"


# Words a model uses for the two verdicts, mapped to the contract's.
_VERDICT_WORDS: Final[dict[str, str]] = {
    "confirmed": CONFIRMED, "confirm": CONFIRMED, "true positive": CONFIRMED, "true_positive": CONFIRMED,
    "refuted": REFUTED, "refute": REFUTED, "false positive": REFUTED, "false_positive": REFUTED,
}


def read_verdicts(raw_verdicts: Any, errors: list[str]) -> tuple[Verdict, ...]:
    """The verdicts of an answer's ``verdicts`` array; shape problems go to ``errors``.

    Only the shape is checked here (an object, a candidate id, a known verdict word, a line
    number): whether the id was listed and a refutation gives its reason is the judge's
    business (``auditor.runs.judge``), which knows the window.
    """
    if raw_verdicts is None:
        return ()
    if not isinstance(raw_verdicts, list):
        errors.append("'verdicts' is not a list")
        return ()
    verdicts: list[Verdict] = []
    for number, raw in enumerate(raw_verdicts, start=1):
        verdict = _verdict_from(raw, f"verdict {number}")
        if isinstance(verdict, Verdict):
            verdicts.append(verdict)
        else:
            errors.append(verdict)
    return tuple(verdicts)


def _verdict_from(raw: Any, where: str) -> Verdict | str:
    """A Verdict, or an error message saying why ``raw`` is not one."""
    if not isinstance(raw, dict):
        return f"{where}: not an object"
    candidate = raw.get("candidate", raw.get("id"))
    if isinstance(candidate, bool) or not isinstance(candidate, (str, int)) or not str(candidate).strip():
        return f"{where}: 'candidate' is missing or not a string"
    where = f"{where} ({str(candidate).strip()})"
    word = raw.get("verdict")
    verdict = _VERDICT_WORDS.get(word.strip().lower()) if isinstance(word, str) else None
    if verdict is None:
        return f"{where}: 'verdict' must be 'confirmed' or 'refuted', got {word!r}"
    reason = raw.get("reason")
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        return f"{where}: 'reason' must be a string"
    path = raw.get("path")
    if path is not None and not isinstance(path, str):
        return f"{where}: 'path' must be a string"
    line = _line_number(raw.get("line"))
    if isinstance(line, str):
        return f"{where}: {line}"
    return Verdict(
        candidate=str(candidate).strip(),
        verdict=verdict,
        reason=reason.strip(),
        path=(path.strip() or None) if path is not None else None,
        line=line,
    )
