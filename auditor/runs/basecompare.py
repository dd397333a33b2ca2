"""New or existing, without a second full audit: what a diff-scoped review knows about the
base from its static pass and its code alone.

Inputs: the head's findings on the change, the base's prepared repository (walk, index,
graph) and static findings, the rename map. Outputs: the base fingerprints as the head
would read them (``base_fingerprints_after_renames``), whether a finding's chain existed
unchanged at the base (``unchanged_at_base``), and the base counterpart of the head's
scope (``base_scope``) for the one case left: a model's finding on changed code, which only
a base run over the same subgraph can place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from auditor.findings.fingerprints import finding_fingerprint
from auditor.findings.grounding import file_lines
from auditor.findings.model import Finding
from auditor.index.model import FileIndex
from auditor.pack.change import ChangeScope

_COMMENT_LINE = re.compile(r"^\s*(#|//|/\*|\*)")


def base_fingerprints_after_renames(
    findings: tuple[Finding, ...], texts: Mapping[str, str], renames: Mapping[str, str]
) -> frozenset[str]:
    """Fingerprints of the base's findings as they would read on the head.

    A finding in a file the change renamed gets the fingerprint it has under the new path
    (same rule, functions and write calls; the entry point's file renamed too), so a rename alone never makes a finding "new".
    ``texts`` are the base's file texts; ``renames`` maps new path -> old path.
    """
    new_path_of = {old: new for new, old in renames.items()}
    mapped: set[str] = set()
    for finding in findings:
        touched = {finding.path, *(site.path for site in finding.sequence), *(step.path for step in finding.chain[:1])}
        if not touched & new_path_of.keys():
            mapped.add(finding.fingerprint)
            continue
        lines = {path: file_lines(texts.get(path, "")) for path in {finding.path, *(site.path for site in finding.sequence)}}
        mapped.add(finding_fingerprint(finding, lines.__getitem__, lambda path: new_path_of.get(path, path)))
    return frozenset(mapped)


def found_statically(finding: Finding) -> bool:
    """Whether the static pass found ``finding`` (its fingerprint is then the static one,
    which the base's static pass alone decides)."""
    return "static" in finding.found_by


def unchanged_at_base(
    finding: Finding,
    head: tuple[Mapping[str, FileIndex], Mapping[str, str]],
    base: tuple[Mapping[str, FileIndex], Mapping[str, str]],
    renames: Mapping[str, str],
) -> bool:
    """Whether every function of the finding's sink and chain exists at the base (through the
    rename map) with the same code once comments, blank lines and indentation are dropped:
    then the base held the finding's whole chain as it is, and so the finding.

    ``head`` and ``base`` are (indexes, texts) of each tree; ``renames`` maps new -> old path.
    """
    steps = {(finding.path, finding.function), *((step.path, step.function) for step in finding.chain)}
    for path, function in steps:
        now = function_code(path, function, *head)
        before = function_code(renames.get(path, path), function, *base)
        if now is None or now != before:
            return False
    return True


def function_code(path: str, qualname: str, indexes: Mapping[str, FileIndex], texts: Mapping[str, str]) -> str | None:
    """The normalised text of function ``qualname`` in ``path`` (stripped lines, blank and
    comment-only lines dropped), or None when the tree has no such function."""
    index = indexes.get(path)
    if index is None or path not in texts:
        return None
    definition = next((item for item in index.definitions if item.qualname == qualname and item.kind != "class"), None)
    if definition is None:
        return None
    lines = texts[path].splitlines()[definition.start_line - 1 : definition.end_line]
    return "\n".join(line.strip() for line in lines if line.strip() and not _COMMENT_LINE.match(line))


def base_scope(head_scope: ChangeScope, renames: Mapping[str, str], base_texts: Mapping[str, str]) -> ChangeScope:
    """The head's subgraph as the base names it (renamed files under their old paths; files
    the change added left out), with no changed lines: the base run looks at the same code."""
    paths = {renames.get(path, path) for path in head_scope.paths}
    return ChangeScope(paths=tuple(sorted(path for path in paths if path in base_texts)))
