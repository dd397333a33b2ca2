"""Fingerprints: a finding's identity from its structure, so edits that change nothing the
finding is about keep it.

A fingerprint hashes the rule, the sink's file and function, the entry point (path and
function) when the finding has a static chain, and the finding's write calls, each
normalised: comments, whitespace, quote style and trailing commas dropped, and every name
that is neither a called function, an attribute, a keyword argument nor ``self``/``this``
replaced by ``_`` (so renaming a local variable or the receiver of a write keeps it). A
call spread over several lines (black's formatting) normalises like the one-line form.
Line numbers never enter it, so moving a function keeps its findings' fingerprints; a
write added to or removed from the sequence changes them.

``SCHEME`` numbers this definition; a baseline records it (see ``findings.suppress``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

from auditor.findings.model import Finding

SCHEME = 2
"""The fingerprint definition's version: 2 is this structural one (1 hashed the raw sink line)."""

LENGTH = 32
"""Hex digits of a fingerprint, everywhere it is shown or stored."""

_CONTINUATION_REACH = 40
"""The most lines a normalised call may span (a long SQL literal, an exploded argument list)."""

_TOKEN = re.compile(
    r"""(?P<string>[rbuRBUfF]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`[^`]*`))"""
    r"""|(?P<comment>\#[^\n]*|//[^\n]*|/\*.*?\*/)"""
    r"""|(?P<name>[A-Za-z_$][A-Za-z0-9_$]*)"""
    r"""|(?P<space>\s+)"""
    r"""|(?P<other>.)""",
    re.DOTALL,
)
_KEPT_NAMES = frozenset({"self", "this", "cls", "super", "True", "False", "None", "null", "nil", "true", "false"})
_OPENING, _CLOSING = "([{", ")]}"


def fingerprint(rule: str, path: str, function: str, calls: Sequence[str], entry: str = "") -> str:
    """Stable identity of a finding: rule, sink path and function, entry (``path:function``,
    empty for a model-only finding) and its normalised write calls, in order."""
    material = "\x1f".join((rule, path, function, entry, "\x1e".join(calls)))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:LENGTH]


def finding_fingerprint(
    finding: Finding, lines_of: Callable[[str], Sequence[str]], rename: Callable[[str], str] = lambda path: path
) -> str:
    """The fingerprint of ``finding`` (its own ``fingerprint`` field aside), its calls read
    from ``lines_of(path)``; ``rename`` maps a path to the one the fingerprint names (a
    file a change renamed keeps its findings). A static finding hashes its entry point and
    every write of its sequence; a model's, which has neither, its sink call."""
    sites = [(site.path, site.line) for site in finding.sequence] or [(finding.path, finding.line)]
    calls = tuple(normalise_call(rename(path), lines_of(path), line) for path, line in sites)
    entry = f"{rename(finding.chain[0].path)}:{finding.chain[0].function}" if finding.sequence and finding.chain else ""
    return fingerprint(finding.rule, rename(finding.path), finding.function, calls, entry)


def normalise_call(path: str, lines: Sequence[str], line: int) -> str:
    """The statement starting at 1-based ``line`` of ``lines`` (through its closing bracket
    when it spans lines), normalised as the module docstring says ("" outside the file)."""
    if not 0 < line <= len(lines):
        return ""
    text = ""
    for number in range(line, min(line + _CONTINUATION_REACH, len(lines) + 1)):
        text += lines[number - 1] + "\n"
        if _complete(path, text):
            break
    return _normalised(path, text)


def _tokens(path: str, text: str) -> list[tuple[str, str]]:
    """(kind, text) of every token but comments and whitespace; a ``#`` starts a comment in
    Python only and ``//`` everywhere else (Python's ``//`` divides)."""
    python = path.endswith((".py", ".pyi"))
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        assert match is not None  # ``other`` matches any character
        kind, value = match.lastgroup or "other", match.group()
        position = match.end()
        if kind == "comment" and (value.startswith("#") != python):
            # Not a comment in this language: take the first character alone and go on.
            kind, value, position = "other", value[0], match.start() + 1
        if kind not in ("comment", "space"):
            tokens.append((kind, value))
    return tokens


def _complete(path: str, text: str) -> bool:
    """Whether every bracket ``text`` opens is closed (strings and comments aside)."""
    depth = 0
    for kind, value in _tokens(path, text):
        if kind == "other":
            depth += (value in _OPENING) - (value in _CLOSING)
    return depth <= 0 and not _open_string(text)


def _open_string(text: str) -> bool:
    """Whether ``text`` ends inside a triple-quoted string."""
    return text.count('"""') % 2 == 1 or text.count("'''") % 2 == 1


def _normalised(path: str, text: str) -> str:
    tokens = _tokens(path, text)
    parts: list[str] = []
    depth = 0
    for position, (kind, value) in enumerate(tokens):
        before = tokens[position - 1][1] if position else ""
        after = tokens[position + 1][1] if position + 1 < len(tokens) else ""
        if kind == "string":
            parts.append(_quoted(value))
        elif kind == "name":
            keyword = depth > 0 and after == "=" and (position + 2 >= len(tokens) or tokens[position + 2][1] != "=")
            kept = before == "." or after == "(" or keyword or value in _KEPT_NAMES
            parts.append(value if kept else "_")
        elif value == "," and after in tuple(_CLOSING):
            continue  # a trailing comma (black adds one when it explodes a call)
        else:
            depth += (value in _OPENING) - (value in _CLOSING)
            parts.append(value)
    return "".join(parts)


def _quoted(literal: str) -> str:
    """A string literal with its quotes as double quotes, its prefix and contents kept."""
    body = literal.lstrip("rbuRBUfF")
    prefix = literal[: len(literal) - len(body)].lower()
    for quote in ('"""', "'''", '"', "'", "`"):
        if body.startswith(quote) and body.endswith(quote) and len(body) >= 2 * len(quote):
            return f'{prefix}"{body[len(quote):len(body) - len(quote)]}"'
    return literal
