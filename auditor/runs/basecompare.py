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

from collections.abc import Iterable, Iterator, Mapping

from auditor.findings.fingerprints import finding_fingerprint
from auditor.findings.grounding import file_lines
from auditor.findings.model import Finding
from auditor.index.model import FileIndex
from auditor.languages import language_for_path
from auditor.pack.change import ChangeScope

# How a comment-only line starts, per language: Python's ``#``; the C-like languages' ``//``
# (their ``/* ... */`` blocks are followed line by line in ``code_lines``).
_LINE_COMMENT = {"python": "#", "javascript": "//", "typescript": "//", "tsx": "//", "go": "//", "java": "//"}
_BLOCK_COMMENTS = frozenset({"javascript", "typescript", "tsx", "go", "java"})


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
    rename map) with the same code once comment-only lines, blank lines and trailing
    whitespace are dropped (indentation stays: in Python it says what a ``with`` block
    covers): then the base held the finding's whole chain as it is, and so the finding.

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
    """The normalised text of function ``qualname`` in ``path`` (``code_lines`` of its span),
    or None when the tree has no such function."""
    index = indexes.get(path)
    if index is None or path not in texts:
        return None
    definition = next((item for item in index.definitions if item.qualname == qualname and item.kind != "class"), None)
    if definition is None:
        return None
    lines = texts[path].splitlines()[definition.start_line - 1 : definition.end_line]
    return "\n".join(code_lines(lines, language_for_path(path)))


def code_lines(lines: Iterable[str], language: str | None) -> Iterator[str]:
    """``lines`` of ``language`` without trailing whitespace, blank lines and comment-only
    lines. Leading whitespace is kept. A comment-only line is one that starts with the
    language's line comment, or, in the C-like languages, lies within a ``/* ... */`` block
    opened at the start of a line; a line is never dropped for starting with ``*`` alone
    (``*items``, ``**kwargs`` are code)."""
    marker = _LINE_COMMENT.get(language or "")
    blocks = language in _BLOCK_COMMENTS
    in_block = False
    for line in lines:
        text = line.rstrip()
        head = text.lstrip()
        if in_block:
            if "*/" not in head:
                continue
            in_block = False
            if not head.split("*/", 1)[1].strip():
                continue  # the block ends the line; code after it keeps the line
        elif blocks and head.startswith("/*"):
            _, closed, rest = head[2:].partition("*/")
            if not closed:
                in_block = True
                continue
            if not rest.strip():
                continue
        if not head or (marker is not None and head.startswith(marker)):
            continue
        yield text


def base_scope(head_scope: ChangeScope, renames: Mapping[str, str], base_texts: Mapping[str, str]) -> ChangeScope:
    """The head's subgraph as the base names it (renamed files under their old paths; files
    the change added left out), with no changed lines: the base run looks at the same code."""
    paths = {renames.get(path, path) for path in head_scope.paths}
    return ChangeScope(paths=tuple(sorted(path for path in paths if path in base_texts)))
