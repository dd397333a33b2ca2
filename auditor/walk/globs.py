"""The user's ``--include`` / ``--exclude`` globs (gitignore syntax), compiled into one matcher.

``pathspec`` checks a path against each pattern in turn, in Python: 20,000 patterns cost
seconds per thousand files. Here the patterns are also compiled into one RE2 alternation
(linear time, one pass per path): a path no pattern matches is settled at once; for a set
without negations, any match selects the path. Only a path some pattern matches is asked
of ``pathspec`` (last match wins, ``!`` negates), to name the glob that decided it.
``pathspec``'s own backend is pinned to "simple" (pure Python), so its meaning does not
change with the libraries installed.
"""

from __future__ import annotations

import pathspec
import re2

from auditor.errors import UsageError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = 1 << 28  # a large alternation keeps its fast DFA; over this RE2 still runs, slower


class GlobSet:
    """Compiled globs: :meth:`selects` (any pattern decides for the path) and
    :meth:`matched` (the deciding glob's text)."""

    def __init__(self, patterns: tuple[str, ...], flag: str) -> None:
        try:
            self._spec = pathspec.GitIgnoreSpec.from_lines(patterns, backend="simple")
        except ValueError as error:
            raise UsageError(f"invalid {flag} pattern: {error}") from error
        regexes = [pattern for pattern in self._spec.patterns if pattern.include is not None]
        self._negations = any(pattern.include is False for pattern in regexes)
        self._any = _alternation([pattern.regex.pattern for pattern in regexes]) if regexes else None

    def matched(self, path: str) -> str | None:
        """The glob that selects ``path`` (last match wins, '!' negates), if any."""
        if self._any is not None and self._any.search(path) is None:
            return None
        result = self._spec.check_file(path)
        if result.include and result.index is not None:
            return str(self._spec.patterns[result.index].pattern)
        return None

    def selects(self, path: str) -> bool:
        """Whether some glob selects ``path``; one RE2 search when no glob negates."""
        if self._any is not None and not self._negations:
            return self._any.search(path) is not None
        return self.matched(path) is not None


def _alternation(regexes: list[str]) -> object | None:
    """One RE2 pattern matching where any of ``regexes`` (pathspec's, anchored) matches;
    None when RE2 cannot take them (pathspec alone then decides)."""
    # pathspec names a group in each pattern; one alternation needs them unnamed.
    branches = (regex.replace("(?P<ps_d>", "(?:") for regex in regexes)
    try:
        return re2.compile("|".join(f"(?:{branch})" for branch in branches), options=_OPTIONS)
    except re2.error:
        return None
