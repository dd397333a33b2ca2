"""Rules: Markdown files with YAML front matter that tell the model, the packer and the
static pass what to look for.

A rule file looks like::

    ---
    id: tx-outside-transaction
    title: Database writes outside a transaction
    severity: high
    languages: [python, go, java, javascript, typescript]
    description: One-paragraph summary (SARIF shortDescription/fullDescription).
    relevance:          # RE2 regexes (linear time) over file text; matching files rank first when packing
      - '\\.save\\('
    sinks:              # callee patterns (fnmatch over the call's attribute chain)
      - '*.objects.create'
    boundaries:         # callee / decorator / context-manager patterns opening a transaction
      - 'transaction.atomic'
    sql_write: '(?i)\\b(insert|update|delete)\\b'   # optional: SQL text that counts as a write
    pack_include: [migrations]   # optional: out-of-scope classes the rule wants packed
                                 # (tests, fixtures, migrations, generated, seed,
                                 #  translations, docs, data)
    ---
    Instruction body for the model (Markdown).

Built-in rules ship as package data in ``auditor/rules/builtin/``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from auditor.errors import RuleError
from auditor.rules.patterns import LinearPattern, PatternError, compile_linear
from auditor.rules.severity import Severity

# The file classes a rule's pack_include may name (auditor.pack.scope.SCOPE_CLASSES; kept
# here as literals so that loading a rule does not import the packer).
PACK_INCLUDE_CLASSES = ("tests", "fixtures", "migrations", "generated", "seed", "translations", "docs", "data")
_RULE_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Rule:
    """A parsed rule file."""

    id: str
    title: str
    severity: Severity
    languages: tuple[str, ...]
    description: str
    body: str
    source: str
    relevance: tuple[str, ...] = ()
    sinks: tuple[str, ...] = ()
    boundaries: tuple[str, ...] = ()
    entry_points: tuple[str, ...] = ()
    sql_write: str | None = None
    # Classes of files outside the default audit scope (tests, fixtures, migrations,
    # generated, seed, translations, docs, data: see auditor.pack.scope) that this rule
    # wants packed anyway.
    pack_include: tuple[str, ...] = ()

    def relevance_patterns(self) -> tuple[LinearPattern, ...]:
        """The relevance patterns, compiled for linear-time matching (auditor.rules.patterns),
        each searched on its own."""
        return tuple(compile_linear(pattern) for pattern in self.relevance)

    def sql_write_pattern(self) -> LinearPattern | None:
        """``sql_write`` compiled for linear-time matching, or None when the rule has none."""
        return compile_linear(self.sql_write) if self.sql_write else None


def parse_rule(text: str, source: str) -> Rule:
    """Parse a rule file's text. Raises RuleError naming the file and the field at fault."""
    if not text.startswith("---"):
        raise RuleError(f"{source}: a rule file must start with a '---' YAML front matter block")
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise RuleError(f"{source}: the front matter block is not closed with '---'")
    header, body = parts[0][3:], parts[1].lstrip("-").lstrip("\n")
    try:
        meta = yaml.safe_load(header) or {}
    except yaml.YAMLError as exc:
        raise RuleError(f"{source}: front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise RuleError(f"{source}: front matter must be a mapping")

    def text_field(name: str, required: bool = True) -> str:
        value = meta.get(name)
        if value is None:
            if required:
                raise RuleError(f"{source}: missing required field '{name}'")
            return ""
        if not isinstance(value, str) or not value.strip():
            raise RuleError(f"{source}: field '{name}' must be a non-empty string")
        return value.strip()

    def list_field(name: str) -> tuple[str, ...]:
        value = meta.get(name, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise RuleError(f"{source}: field '{name}' must be a list of strings")
        return tuple(value)

    rule_id = text_field("id")
    if not _RULE_ID.match(rule_id):
        raise RuleError(f"{source}: rule id '{rule_id}' must be lowercase letters, digits and '-'")
    severity_name = text_field("severity").lower()
    severity = Severity.parse(severity_name)
    if severity is None:
        raise RuleError(f"{source}: severity '{severity_name}' is not one of {', '.join(Severity.names())}")
    relevance = list_field("relevance")
    for pattern in relevance:
        try:
            compile_linear(pattern)
        except PatternError as exc:
            raise RuleError(f"{source}: relevance pattern {pattern!r} is not a valid regex: {exc}") from exc
    sql_write = text_field("sql_write", required=False) or None
    if sql_write:
        try:
            compile_linear(sql_write)
        except PatternError as exc:
            raise RuleError(f"{source}: sql_write {sql_write!r} is not a valid regex: {exc}") from exc
    pack_include = list_field("pack_include")
    unknown = sorted(set(pack_include) - set(PACK_INCLUDE_CLASSES))
    if unknown:
        raise RuleError(
            f"{source}: pack_include {', '.join(unknown)} is not one of {', '.join(PACK_INCLUDE_CLASSES)}"
        )
    if not body.strip():
        raise RuleError(f"{source}: the rule has no instruction body after the front matter")
    return Rule(
        id=rule_id,
        title=text_field("title"),
        severity=severity,
        languages=list_field("languages"),
        description=text_field("description"),
        body=body.strip() + "\n",
        source=source,
        relevance=relevance,
        sinks=list_field("sinks"),
        boundaries=list_field("boundaries"),
        entry_points=list_field("entry_points"),
        sql_write=sql_write,
        pack_include=tuple(dict.fromkeys(pack_include)),
    )


def builtin_rules() -> dict[str, Rule]:
    """All rules shipped with auditor, by id."""
    rules: dict[str, Rule] = {}
    for entry in sorted(resources.files("auditor.rules").joinpath("builtin").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".md"):
            rule = parse_rule(entry.read_text(encoding="utf-8"), f"builtin:{entry.name}")
            rules[rule.id] = rule
    return rules


def load_rule(spec: str) -> Rule:
    """Load a rule by built-in id or by path to a rule file."""
    candidate = Path(spec)
    if candidate.suffix == ".md" or candidate.exists():
        try:
            text = candidate.read_text(encoding="utf-8")
        except OSError as exc:
            raise RuleError(f"cannot read rule file {spec}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise RuleError(f"rule file {spec} is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
        rule = parse_rule(text, str(candidate))
        builtin = builtin_rules().get(rule.id)
        if builtin is not None:
            raise RuleError(
                f"{spec}: rule id '{rule.id}' is already the built-in rule's ({builtin.source}); give the rule its own id"
            )
        return rule
    rules = builtin_rules()
    if spec not in rules:
        known = ", ".join(sorted(rules))
        close = difflib.get_close_matches(spec, list(rules), n=1, cutoff=0.6)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise RuleError(f"unknown rule '{spec}'.{hint} Built-in rules: {known}; or pass a path to a rule file")
    return rules[spec]


def load_rules(specs: list[str] | tuple[str, ...]) -> tuple[Rule, ...]:
    """Load several rules in the order given. Naming one rule twice is harmless; two
    different rules with one id (a custom rule reusing a built-in's or another file's id)
    are an error, since one would silently shadow the other."""
    seen: dict[str, Rule] = {}
    for spec in specs:
        rule = load_rule(spec)
        earlier = seen.get(rule.id)
        if earlier is None:
            seen[rule.id] = rule
        elif earlier != rule:
            raise RuleError(f"two rules share the id '{rule.id}': {earlier.source} and {rule.source}")
    return tuple(seen.values())


def named_or_builtin(specs: list[str] | tuple[str, ...]) -> tuple[Rule, ...]:
    """The rules ``--rule`` names (``specs``), else every built-in rule: what a scan with a
    model audits."""
    return load_rules(specs) if specs else tuple(builtin_rules().values())
