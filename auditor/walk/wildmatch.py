"""git's wildmatch, translated: one ignore pattern (gitignore syntax, its '!', leading and
trailing '/' already removed) to a matcher over '/'-separated paths.

Why this is hand-written rather than ``pathspec``'s gitignore translation
(``pathspec.patterns.gitignore.spec.GitIgnoreSpecPattern``, pathspec 1.1): that translation
answers otherwise than git on patterns real ignore files hold. Each case is pinned against
``git check-ignore`` by tests/test_walk_ignore_vs_git.py:

- POSIX classes: ``[[:upper:]]`` and ``[[:digit:]]`` reach Python's ``re`` as a set of
  ``[:uper`` followed by a literal ']', matching neither 'A' nor '1';
- a bracket may match '/' there: ``a[!x]b`` matches the path 'a/b', which git never does;
- a backslash in a bracket stays literal there: git reads ``[\\]]`` as the set {']'};
- trailing whitespace: pathspec strips tabs (git keeps them) and rejects ``z\\  `` and
  ``u\\ <tab>`` as invalid (git drops the unescaped trailing spaces only);
- git matches a pattern's literal prefix (everything before its first wildcard) on its
  own, so a '**' right after it spans directories ('b**/a' matches 'b/x/a' and 'ba');
  pathspec reads that '**' as two '*';
- a regex per pattern backtracks: ``*a`` ten times then ``b`` takes pathspec 0.4 s on a
  30-character name and grows as the tenth power of its length, where
  :class:`_GlobAutomaton` is linear in it.

pathspec also has no notion of per-directory ignore files (deepest file first, no
re-inclusion below an excluded directory): that is :mod:`auditor.walk.ignore`'s job.
``--include``/``--exclude`` globs, which are one root-level list, do use pathspec
(:mod:`auditor.walk.globs`).
"""

from __future__ import annotations

import re

__all__ = ["GlobMatcher", "NeverMatches", "compile_glob"]

_CHARACTER_CLASSES: dict[str, str] = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9a-fA-F",
}


class NeverMatches(Exception):
    """git's wildmatch aborts on this pattern (an unterminated bracket, a lone backslash)."""


def _translate_bracket(glob: str, start: int) -> tuple[str, int]:
    """Translate the bracket expression opening at ``glob[start]``; return (regex, next index).

    Mirrors git's wildmatch: '!' or '^' negates, ']' first is literal, ranges, backslash
    escapes, POSIX classes; a bracket never matches '/'.
    """
    index = start + 1
    negated = index < len(glob) and glob[index] in "!^"
    if negated:
        index += 1
    items: list[str] = []
    first = True
    while True:
        if index >= len(glob):
            raise NeverMatches
        char = glob[index]
        if char == "]" and not first:
            index += 1
            break
        first = False
        if char == "\\":
            index += 1
            if index >= len(glob):
                raise NeverMatches
            char = glob[index]
        elif char == "[" and glob.startswith(":", index + 1):
            close = glob.find("]", index + 2)
            if close < 0:
                raise NeverMatches
            if glob[close - 1] == ":" and close - 1 >= index + 2:
                name = glob[index + 2 : close - 1]
                if name not in _CHARACTER_CLASSES:
                    raise NeverMatches
                items.append(_CHARACTER_CLASSES[name])
                index = close + 1
                continue
        # A range needs a following character that does not close the bracket.
        if glob.startswith("-", index + 1) and index + 2 < len(glob) and glob[index + 2] != "]":
            high_index = index + 2
            high = glob[high_index]
            if high == "\\":
                high_index += 1
                if high_index >= len(glob):
                    raise NeverMatches
                high = glob[high_index]
            if char <= high:
                items.append(f"{re.escape(char)}-{re.escape(high)}")
            index = high_index + 1
            continue
        items.append(re.escape(char))
        index += 1
    members = "".join(items)
    if negated:
        return f"[^/{members}]", index
    if not members:
        return "(?!)", index
    return f"(?!/)[{members}]", index


_STAR = "[^/]*"
_DIRECTORIES = "(?:.*/)?"
_ANYTHING = ".*"
_UNBOUNDED = (_STAR, _DIRECTORIES, _ANYTHING)


def _glob_atoms(glob: str) -> list[str]:
    """Translate a git wildmatch pattern (with WM_PATHNAME) into regex atoms: each matches
    one character, or is one of the unbounded ``_STAR`` ('*', never '/'), ``_DIRECTORIES``
    ('**/': nothing or anything ending in '/') and ``_ANYTHING`` (a final '**').

    '**' spans directories when it starts a segment and ends the pattern or precedes '/'.
    git compares the literal prefix (everything before the first special character)
    separately and hands wildmatch only the rest, so a '**' right after that prefix also
    counts as starting a segment ('b**/a' matches 'b/x/a' and 'ba'). Consecutive '**/'
    collapse into one, as they match the same paths. Raises :class:`NeverMatches` when
    git's wildmatch would abort on the pattern.
    """
    first_special = next((index for index, char in enumerate(glob) if char in "*?[\\"), -1)
    parts: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if char == "*":
            end = index
            while end < len(glob) and glob[end] == "*":
                end += 1
            at_segment_start = index in (0, first_special) or glob[index - 1] == "/"
            if end - index >= 2 and at_segment_start and (end == len(glob) or glob[end] == "/"):
                if end == len(glob):
                    atom = _ANYTHING
                else:
                    atom = _DIRECTORIES
                    end += 1
                if parts and parts[-1] == _DIRECTORIES:
                    parts.pop()  # '**/**/' is '**/', '**/**' is '**'
                parts.append(atom)
            else:
                parts.append(_STAR)
            index = end
        elif char == "?":
            parts.append("[^/]")
            index += 1
        elif char == "[":
            regex, index = _translate_bracket(glob, index)
            parts.append(regex)
        elif char == "\\":
            if index + 1 >= len(glob):
                raise NeverMatches
            parts.append(re.escape(glob[index + 1]))
            index += 2
        else:
            parts.append(re.escape(char))
            index += 1
    return parts


class _GlobAutomaton:
    """A wildmatch pattern matched by simulating its automaton: time proportional to the
    subject's length times the pattern's, whatever the pattern (a backtracking regex takes
    exponential time on '*a*a*a…b' or repeated '**/' shapes).

    State ``i`` waits for atom ``i``; ``-i - 1`` is inside a ``_DIRECTORIES`` atom ``i``
    after at least one character, which it may leave only after a '/'.
    """

    __slots__ = ("_atoms", "_singles", "_end")

    def __init__(self, atoms: list[str]) -> None:
        self._atoms = atoms
        self._singles = [None if atom in _UNBOUNDED else re.compile(atom, re.DOTALL) for atom in atoms]
        self._end = len(atoms)

    def _closure(self, states: set[int]) -> set[int]:
        pending = [state for state in states if state >= 0]
        while pending:
            state = pending.pop()
            if state < self._end and self._atoms[state] in _UNBOUNDED and state + 1 not in states:
                states.add(state + 1)
                pending.append(state + 1)
        return states

    def fullmatch(self, subject: str) -> bool:
        """Whether the whole of ``subject`` matches the pattern."""
        atoms, singles, end = self._atoms, self._singles, self._end
        states = self._closure({0})
        for char in subject:
            following: set[int] = set()
            for state in states:
                if state < 0:
                    inside = -state - 1
                    following.add(state)
                    if char == "/":
                        following.add(inside + 1)
                    continue
                if state == end:
                    continue
                atom = atoms[state]
                if atom == _STAR:
                    if char != "/":
                        following.add(state)
                elif atom == _ANYTHING:
                    following.add(state)
                elif atom == _DIRECTORIES:
                    following.add(-state - 1)
                    if char == "/":
                        following.add(state + 1)
                elif singles[state].fullmatch(char):  # type: ignore[union-attr]
                    following.add(state + 1)
            if not following:
                return False
            states = self._closure(following)
        return end in states


GlobMatcher = re.Pattern[str] | _GlobAutomaton
"""A compiled pattern: ``fullmatch(path)`` says whether the whole path matches."""


def compile_glob(glob: str) -> GlobMatcher:
    """A matcher for a wildmatch pattern, linear in the subject's length: a regex when it
    has at most one unbounded atom that can backtrack (a final '**' never does), else an
    automaton."""
    atoms = _glob_atoms(glob)
    backtracking = sum(1 for atom in atoms[:-1] if atom in _UNBOUNDED)
    if atoms and atoms[-1] in (_STAR, _DIRECTORIES):
        backtracking += 1
    if backtracking <= 1:
        return re.compile("".join(atoms), re.DOTALL)
    return _GlobAutomaton(atoms)

