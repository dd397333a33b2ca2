"""``--include``/``--exclude`` globs: the compiled matcher answers as pathspec's reference
GitIgnoreSpec does, pattern for pattern, and in time that long literal lists do not grow."""

from __future__ import annotations

import time

import pathspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.errors import UsageError
from auditor.walk.globs import GlobList

SEGMENTS = ("a", "b", "c.py", "*", "**", "*.py", "?", "[ab]", "[!a]", "b*", "a\\*", "x y")
NAMES = ("a", "b", "c.py", "d.py", "*", "x y", "ab")


@st.composite
def glob_patterns(draw: st.DrawFn) -> str:
    pattern = "/".join(draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3)))
    if draw(st.booleans()):
        pattern = "/" + pattern
    if draw(st.booleans()):
        pattern += "/"
    if draw(st.integers(0, 3)) == 0:
        pattern = "!" + pattern
    return pattern


paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("/".join)


def reference(patterns: list[str], path: str) -> str | None:
    """What pathspec's pure-Python GitIgnoreSpec says selects ``path``."""
    spec = pathspec.GitIgnoreSpec.from_lines(patterns, backend="simple")
    result = spec.check_file(path)
    if result.include and result.index is not None:
        return str(spec.patterns[result.index].pattern)
    return None


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(glob_patterns(), min_size=1, max_size=6), st.lists(paths, min_size=1, max_size=8))
def test_compiled_globs_answer_as_pathspec_does(patterns: list[str], candidates: list[str]) -> None:
    globs = GlobList(tuple(patterns), "--include")

    for path in candidates:
        assert globs.matched(path) == reference(patterns, path), path


@pytest.mark.parametrize(
    ("patterns", "path", "expected"),
    [
        (["src/"], "src/a.py", "src/"),
        (["*.py", "tests/"], "tests/a.py", "*.py"),  # a file match outranks a later directory one
        (["!*.py", "src/"], "src/a.py", None),
        (["src/", "!*.py"], "src/a.py", None),
        (["src", "!src/a.py"], "src/a.py", None),
        (["src/**"], "src/a/b.py", "src/**"),
        (["*"], "a\nb", "*"),
        (["a/**/b"], "a/x/y/b", "a/**/b"),
        (["b.py"], "a/b.py", "b.py"),
        (["/b.py"], "a/b.py", None),
    ],
)
def test_last_file_match_wins_over_directory_matches(patterns: list[str], path: str, expected: str | None) -> None:
    assert GlobList(tuple(patterns), "--exclude").matched(path) == expected
    assert reference(patterns, path) == expected


def test_twenty_thousand_literal_patterns_cost_little_per_path() -> None:
    patterns = tuple(f"src/pkg{index % 300}/module{index * 7}.py" for index in range(20_000))
    candidates = [f"src/pkg{index % 300}/module{index}.py" for index in range(50_000)]
    globs = GlobList((*patterns, "docs/", "*.md"), "--include")

    started = time.monotonic()
    selected = [path for path in candidates if globs.matched(path) is not None]
    elapsed = time.monotonic() - started

    wanted = set(patterns)
    assert selected == [path for path in candidates if path in wanted]
    assert elapsed < 5  # pathspec's pattern-by-pattern loop takes ~100 s here


def test_an_invalid_glob_is_a_usage_error_naming_the_flag() -> None:
    with pytest.raises(UsageError, match="invalid --exclude pattern"):
        GlobList(("trailing\\",), "--exclude")
