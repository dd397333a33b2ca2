"""Tests for the walk stage: git's candidate set, its emulation outside git, and every skip reason."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.errors import UsageError
from auditor.languages import language_for_path
from auditor.progress import ProgressEvent
from auditor.walk import reading as reading_module
from auditor.walk.files import FileEntry, SkippedFile, SkipReason
from auditor.walk.walker import WalkOptions, WalkResult, walk

requires_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(autouse=True, scope="module")
def isolated_git_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the user's global git config (e.g. core.excludesFile) out of every git call."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        patch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("GIT_AUTHOR_NAME", "Test")
        patch.setenv("GIT_AUTHOR_EMAIL", "test@example.com")
        patch.setenv("GIT_COMMITTER_NAME", "Test")
        patch.setenv("GIT_COMMITTER_EMAIL", "test@example.com")
        for variable in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
            patch.delenv(variable, raising=False)
        yield


def git(cwd: Path, *arguments: str) -> str:
    """Run git in ``cwd`` and return its stdout."""
    return subprocess.run(["git", *arguments], cwd=cwd, check=True, capture_output=True, text=True).stdout


def git_listing(cwd: Path) -> set[str]:
    """What ``git ls-files -co --exclude-standard`` lists in ``cwd`` (trailing '/' removed)."""
    output = git(cwd, "ls-files", "-z", "-co", "--exclude-standard")
    return {item.rstrip("/") for item in output.split("\0") if item}


def write(root: Path, path: str, content: str | bytes = "x\n") -> Path:
    """Create a file (and its directories) under ``root``."""
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_bytes(content.encode("utf-8"))
    return target


def reported(result: WalkResult) -> set[str]:
    """Every path the walk accounted for, audited or skipped."""
    paths = [entry.path for entry in result.files] + [item.path for item in result.skipped]
    assert len(paths) == len(set(paths)), "a candidate was reported twice"
    return set(paths)


def reasons(result: WalkResult) -> dict[str, SkipReason]:
    return {item.path: item.reason for item in result.skipped}


def entry(result: WalkResult, path: str) -> FileEntry:
    return next(file for file in result.files if file.path == path)


def copy_without_git(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    return destination


# A tree exercising nested, negated and anchored rules.
IGNORE_TREE: dict[str, str] = {
    ".gitignore": "*.log\n/build/\ndocs/*.md\n!docs/keep.md\ntmp\nfoo/**\n!foo/keep.txt\n#comment\n\\#hash\n",
    "app/.gitignore": "secret.py\n!important.log\n/local/\n",
    "app/deep/.gitignore": "!secret.py\n*.tmp\n",
    "app/main.py": "print('hi')\n",
    "app/secret.py": "KEY = 1\n",
    "app/important.log": "keep me\n",
    "app/other.log": "drop me\n",
    "app/local/x.py": "x = 1\n",
    "app/sub/local/y.py": "y = 2\n",
    "app/deep/secret.py": "KEY = 2\n",
    "app/deep/a.tmp": "t\n",
    "build/out.js": "var a;\n",
    "src/build/keep.js": "var b;\n",
    "docs/guide.md": "# guide\n",
    "docs/keep.md": "# keep\n",
    "docs/sub/nested.md": "# nested\n",
    "tmp/cache.txt": "c\n",
    "src/tmp": "file named tmp\n",
    "foo/keep.txt": "k\n",
    "foo/drop.txt": "d\n",
    "foo/bar/deep.txt": "d\n",
    "#hash": "h\n",
    "README.md": "# readme\n",
}


def make_repo(root: Path, tree: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    for path, content in tree.items():
        write(root, path, content)
    return root


# --------------------------------------------------------------------------------------
# The candidate set is git's view
# --------------------------------------------------------------------------------------


@requires_git
def test_inside_git_the_candidates_are_exactly_what_git_lists(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", IGNORE_TREE)
    write(repo, ".git/info/exclude", "README.md\n")
    git(repo, "add", "app/main.py", ".gitignore")
    git(repo, "add", "-f", "app/other.log")  # tracked despite *.log: git still lists it
    git(repo, "commit", "-qm", "init")
    write(repo, "untracked.py", "u = 1\n")

    result = walk(repo)

    expected = git_listing(repo)
    assert reported(result) == expected
    assert "app/other.log" in expected and "README.md" not in expected
    assert result.git_root == repo.resolve()
    assert result.root == repo.resolve()
    assert [file.path for file in result.files] == sorted(file.path for file in result.files)


@requires_git
def test_a_subdirectory_root_gets_git_view_relative_to_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", IGNORE_TREE)

    result = walk(repo / "app")

    assert reported(result) == git_listing(repo / "app")
    assert "main.py" in reported(result) and "secret.py" not in reported(result)
    assert result.git_root == repo.resolve()
    assert result.root == (repo / "app").resolve()


@requires_git
def test_a_subdirectory_root_honours_auditorignore_files_above_it(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            ".auditorignore": "*.snap\napp/fixtures/\n",
            "app/.auditorignore": "!keep.snap\n",
            "app/main.py": "x = 1\n",
            "app/drop.snap": "s\n",
            "app/keep.snap": "k\n",
            "app/fixtures/data.py": "d = 1\n",
        },
    )

    result = walk(repo / "app")

    assert reasons(result) == {"drop.snap": SkipReason.AUDITORIGNORE, "fixtures/data.py": SkipReason.AUDITORIGNORE}
    assert {file.path for file in result.files} == {".auditorignore", "keep.snap", "main.py"}
    # The same files are excluded as when the whole repository is walked.
    whole = walk(repo)
    assert {p for p, r in reasons(whole).items() if r is SkipReason.AUDITORIGNORE} == {"app/drop.snap", "app/fixtures/data.py"}


@requires_git
def test_deleted_tracked_file_is_reported_vanished(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "a = 1\n", "b.py": "b = 1\n"})
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    (repo / "b.py").unlink()

    result = walk(repo)

    assert reasons(result) == {"b.py": SkipReason.VANISHED}
    assert [file.path for file in result.files] == ["a.py"]


@requires_git
def test_outside_git_the_same_tree_gives_the_same_candidates(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", IGNORE_TREE)
    expected = git_listing(repo)
    plain = copy_without_git(repo, tmp_path / "plain")

    result = walk(plain)

    assert result.git_root is None
    assert reported(result) == expected


@requires_git
@pytest.mark.parametrize(
    "rules",
    [
        "*\n!*/\n!*.py\n",
        "a/**/b\n",
        "**/c\n",
        "a/**\n!a/b/\n",
        "[ab]\n",
        "[!a]*.py\n",
        "[[:upper:]]*\n",
        "[a-b]/c.py\n",
        "*.py \n",
        "*.py\\ \n",
        "\\!x\n",
        "a/*/\n",
        "/*/c\n",
        "**/b/**\n",
        "a\n!a/b\n",
        "b/\n!b/c.py\n",
        "?.py\n",
        "a/b/\n",
        "*/\n",
        "[\n",
        "x[\n*.md\n",
        "**.py\n",
        "c.py\r\n",
        "a**/c.py\n",
        "z**/d.py\n",
        "a?**/c\n",
    ],
)
def test_gitignore_emulation_matches_git_on_tricky_patterns(tmp_path: Path, rules: str) -> None:
    tree = {
        "a/b/c.py": "1\n",
        "a/c.py": "2\n",
        "a/x.md": "3\n",
        "b/c.py": "4\n",
        "b/a/c": "5\n",
        "c": "6\n",
        "C.py": "7\n",
        "x.py": "8\n",
        "!x": "9\n",
        "d.py ": "10\n",
        "z/a/b/d.py": "11\n",
    }
    repo = make_repo(tmp_path / "repo", tree)
    write(repo, ".gitignore", rules)
    expected = git_listing(repo)
    plain = copy_without_git(repo, tmp_path / "plain")

    assert reported(walk(plain)) == expected


DIRECTORY_NAMES = ("a", "b", "c")
FILE_NAMES = ("a", "c", "x.py", "y.txt", "b.py")
PATTERN_SEGMENTS = ("a", "b", "c", "*", "**", "*.py", "x.*", "?", "[ab]", "[!a]", "y.txt", "b**", "a*", "[[:alpha:]]")


@st.composite
def gitignore_patterns(draw: st.DrawFn) -> str:
    segments = draw(st.lists(st.sampled_from(PATTERN_SEGMENTS), min_size=1, max_size=3))
    pattern = "/".join(segments)
    if draw(st.booleans()):
        pattern = "/" + pattern
    if draw(st.booleans()):
        pattern += "/"
    if draw(st.integers(0, 3)) == 0:
        pattern = "!" + pattern
    return pattern


@st.composite
def ignore_trees(draw: st.DrawFn) -> tuple[list[str], dict[str, list[str]]]:
    directories = st.lists(st.sampled_from(DIRECTORY_NAMES), max_size=3)
    raw_paths = draw(
        st.lists(st.tuples(directories, st.sampled_from(FILE_NAMES)), min_size=1, max_size=12)
    )
    ignore_files = {
        directory: draw(st.lists(gitignore_patterns(), min_size=1, max_size=4))
        for directory in ("", "a", "a/b", "b")
        if draw(st.booleans())
    }
    paths = sorted({"/".join([*parents, name]) for parents, name in raw_paths})
    # A path cannot be both a file and a directory (holding files or an ignore file).
    occupied = [*paths, *(f"{directory}/.gitignore" for directory in ignore_files if directory)]
    files = [path for path in paths if not any(other.startswith(path + "/") for other in occupied)]
    return files, ignore_files


@requires_git
@settings(max_examples=25, deadline=None, derandomize=True)
@given(ignore_trees())
def test_gitignore_emulation_agrees_with_git_on_random_trees(tree: tuple[list[str], dict[str, list[str]]]) -> None:
    files, ignore_files = tree
    with tempfile.TemporaryDirectory() as scratch:
        repo = make_repo(Path(scratch) / "repo", {path: "x\n" for path in files})
        for directory, patterns in ignore_files.items():
            write(repo, f"{directory}/.gitignore" if directory else ".gitignore", "\n".join(patterns) + "\n")
        expected = git_listing(repo)
        plain = copy_without_git(repo, Path(scratch) / "plain")

        assert reported(walk(plain)) == expected


def test_use_gitignore_false_lists_ignored_files(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.log\n")
    write(tmp_path, "a.log", "log\n")

    kept = walk(tmp_path, WalkOptions(use_gitignore=False))
    ignored = walk(tmp_path)

    assert "a.log" in reported(kept)
    assert "a.log" not in reported(ignored)


@requires_git
def test_without_git_binary_the_rules_still_apply_and_the_user_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.log\n", "a.py": "a\n", "b.log": "b\n", "c.py": "c\n"})
    write(repo, ".git/info/exclude", "c.py\n")
    expected = git_listing(repo)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    events: list[ProgressEvent] = []

    result = walk(repo, progress=events.append)

    assert reported(result) == expected == {".gitignore", "a.py"}
    assert result.git_root is None
    assert any(event.message and "git" in event.message for event in events)


@requires_git
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to hand the repo to another owner")
def test_git_refusing_the_repository_falls_back_to_the_same_rules(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.log\n", "a.py": "a\n", "b.log": "b\n"})
    expected = git_listing(repo)
    os.chown(repo, 12345, 12345)  # git now refuses it: "detected dubious ownership"
    events: list[ProgressEvent] = []

    result = walk(repo, progress=events.append)

    assert reported(result) == expected == {".gitignore", "a.py"}
    assert any(event.message and "dubious ownership" in event.message for event in events)


# --------------------------------------------------------------------------------------
# Reading: encodings, binaries, links, errors
# --------------------------------------------------------------------------------------


def test_multibyte_character_straddling_the_probe_boundary_is_text(tmp_path: Path) -> None:
    text = "a" * 8191 + "日本語\n" * 10
    assert len(text[:8192].encode("utf-8")) > 8192  # the first CJK character straddles byte 8192
    write(tmp_path, "notes.md", text)

    result = walk(tmp_path)

    assert entry(result, "notes.md").text == text
    assert not result.skipped


def test_ts_file_with_japanese_text_is_typescript(tmp_path: Path) -> None:
    source = "// 日本語のコメント\nexport const greeting: string = 'こんにちは';\n"
    write(tmp_path, "x.ts", source)

    file = entry(walk(tmp_path), "x.ts")

    assert file.language == "typescript"
    assert file.text == source


def test_text_is_decoded_with_bom_stripped_and_newlines_kept(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbfdef f():\r\n    return 1\r\n"
    write(tmp_path, "m.py", raw)

    file = entry(walk(tmp_path), "m.py")

    assert file.text == "def f():\r\n    return 1\r\n"
    assert file.size == len(raw)
    assert file.language == "python"
    assert file.content_hash == hashlib.sha256(raw).hexdigest()


def test_binaries_and_damaged_utf8_are_skipped_with_reasons(tmp_path: Path) -> None:
    write(tmp_path, "logo.png", b"\x89PNG\r\n\x1a\n\0\0")
    write(tmp_path, "blob", b"abc\0def")
    write(tmp_path, "late-bad.py", "\u00e9".encode() + b"a" * 20000 + b"\xff\n")
    write(tmp_path, "controls.txt", b"\xe9\x01\x02\x03")
    write(tmp_path, "c1.txt", b"caf\x81")

    result = walk(tmp_path)

    assert reasons(result) == {
        "logo.png": SkipReason.BINARY,
        "blob": SkipReason.BINARY,
        "late-bad.py": SkipReason.NON_UTF8,
        "controls.txt": SkipReason.NON_UTF8,
        "c1.txt": SkipReason.NON_UTF8,
    }
    assert not result.files


@pytest.mark.parametrize(
    ("raw", "text", "encoding"),
    [
        ("caf\u00e9 = 1\n".encode("latin-1"), "caf\u00e9 = 1\n", "cp1252"),
        ("price = '\u20ac5'\n".encode("cp1252"), "price = '\u20ac5'\n", "cp1252"),
        ("def f():\n    return 1\n".encode("utf-16"), "def f():\n    return 1\n", "utf-16-le"),
        (b"\xfe\xff" + "x = '\u00e9'\n".encode("utf-16-be"), "x = '\u00e9'\n", "utf-16-be"),
        ("x = 1\n".encode("utf-32"), "x = 1\n", "utf-32-le"),
        ("x = '\u00e9'\n".encode("utf-8"), "x = '\u00e9'\n", "utf-8"),
    ],
)
def test_utf16_and_single_byte_source_is_decoded_with_the_encoding_noted(
    tmp_path: Path, raw: bytes, text: str, encoding: str
) -> None:
    write(tmp_path, "module.py", raw)

    result = walk(tmp_path)

    assert not result.skipped
    [entry] = result.files
    assert (entry.text, entry.encoding, entry.size) == (text, encoding, len(raw))
    assert entry.content_hash == hashlib.sha256(raw).hexdigest()


def test_file_name_that_is_not_utf8_is_reported_with_escaped_bytes(tmp_path: Path) -> None:
    try:
        (tmp_path / os.fsdecode(b"bad\xff.py")).write_text("x = 1\n")
    except (OSError, UnicodeError):
        pytest.skip("the file system refuses non-UTF-8 names")
    write(tmp_path, "good.py", "y = 2\n")

    result = walk(tmp_path)

    assert result.skipped == (SkippedFile("bad\\xff.py", SkipReason.NON_UTF8, "file name is not valid UTF-8"),)
    assert [file.path for file in result.files] == ["good.py"]


def test_files_over_the_size_limit_are_skipped_unread(tmp_path: Path) -> None:
    write(tmp_path, "big.py", "x" * 101)
    write(tmp_path, "small.py", "x" * 100)

    result = walk(tmp_path, WalkOptions(max_file_bytes=100))

    assert [file.path for file in result.files] == ["small.py"]
    assert result.skipped == (SkippedFile("big.py", SkipReason.TOO_LARGE, "101 bytes > 100"),)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")
def test_symlinks_are_read_inside_the_root_and_never_followed_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = write(tmp_path, "outside/secret.py", "SECRET = 1\n")
    write(root, "real.py", "r = 1\n")
    write(root, "pkg/mod.py", "m = 1\n")
    (root / "inside.py").symlink_to("real.py")
    (root / "out.py").symlink_to(outside)
    (root / "out-dir").symlink_to(outside.parent, target_is_directory=True)
    (root / "pkg-link").symlink_to("pkg", target_is_directory=True)
    (root / "broken.py").symlink_to("missing.py")
    (root / "loop-a").symlink_to("loop-b")
    (root / "loop-b").symlink_to("loop-a")

    result = walk(root)

    assert entry(result, "inside.py").text == "r = 1\n"
    assert reasons(result) == {
        "out.py": SkipReason.SYMLINK_OUTSIDE,
        "out-dir": SkipReason.SYMLINK_OUTSIDE,
        "pkg-link": SkipReason.NOT_A_FILE,
        "broken.py": SkipReason.SYMLINK_LOOP,
        "loop-a": SkipReason.SYMLINK_LOOP,
        "loop-b": SkipReason.SYMLINK_LOOP,
    }
    assert {file.path for file in result.files} == {"inside.py", "real.py", "pkg/mod.py"}


@requires_git
def test_symlinks_in_git_are_classified_the_same_way(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"real.py": "r = 1\n"})
    outside = write(tmp_path, "outside.py", "o = 1\n")
    (repo / "inside.py").symlink_to("real.py")
    (repo / "out.py").symlink_to(outside)

    result = walk(repo)

    assert reported(result) == git_listing(repo)
    assert reasons(result) == {"out.py": SkipReason.SYMLINK_OUTSIDE}


# Files of every kind the reader tells apart, with the outcome each one must get.
READ_CASES: dict[str, bytes] = {
    "plain.py": b"x = 1\n",
    "empty.py": b"",
    "bom.py": b"\xef\xbb\xbfy = 2\n",
    "double-bom.txt": b"\xef\xbb\xbf\xef\xbb\xbfz\n",
    "bom-then-bad.py": b"\xef\xbb\xbfab\xff\n",
    "bad.py": b"ab\xff\n",
    "truncated-bom.txt": b"\xef\xbb",
    "utf16.txt": "hi".encode("utf-16"),
    "nul.txt": b"text\0more",
    "late-nul.txt": b"a" * 8192 + b"\0",
    "at-limit.txt": b"a" * 10_000,
    "over-limit.txt": b"a" * 10_001,
}
READ_OUTCOMES: dict[str, tuple[SkipReason, str] | str] = {
    "plain.py": "x = 1\n",
    "empty.py": "",
    "bom.py": "y = 2\n",
    "double-bom.txt": "\ufeffz\n",
    "bom-then-bad.py": (SkipReason.NON_UTF8, "invalid UTF-8 at byte 2"),  # counted after the BOM
    "bad.py": "ab\u00ff\n",  # no UTF-8 sequence anywhere: Windows-1252 text
    "truncated-bom.txt": "\u00ef\u00bb",
    "utf16.txt": "hi",
    "nul.txt": (SkipReason.BINARY, "NUL byte in the first 8 KiB"),
    "late-nul.txt": "a" * 8192 + "\0",
    "at-limit.txt": "a" * 10_000,
    "over-limit.txt": (SkipReason.TOO_LARGE, "10,001 bytes > 10,000"),
}


@requires_git
def test_files_read_the_same_inside_and_outside_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {})
    for path, raw in READ_CASES.items():
        write(repo, path, raw)
    outside = write(tmp_path, "outside.py", "o = 1\n")
    (repo / "link.py").symlink_to("plain.py")
    (repo / "out.py").symlink_to(outside)
    (repo / "broken.py").symlink_to("missing.py")
    options = WalkOptions(max_file_bytes=10_000)

    in_git = walk(repo, options)
    plain = walk(copy_without_git(repo, tmp_path / "plain"), options)

    assert in_git.files == plain.files
    assert in_git.skipped == plain.skipped
    outcomes: dict[str, tuple[SkipReason, str] | str] = {file.path: file.text for file in in_git.files}
    outcomes.update({item.path: (item.reason, item.detail) for item in in_git.skipped})
    assert outcomes == {
        **READ_OUTCOMES,
        "link.py": "x = 1\n",
        "out.py": (SkipReason.SYMLINK_OUTSIDE, "symbolic link to a path outside the scan root"),
        "broken.py": (SkipReason.SYMLINK_LOOP, "broken or looping symbolic link"),
    }
    for file in in_git.files:
        raw = READ_CASES.get(file.path, READ_CASES["plain.py"])
        assert file.size == len(raw)
        assert file.content_hash == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize("name", ["a.py", "A.PY", "x.tar.ts", "b.Tsx", ".py", "c.", "Makefile", "d.pyi", "e.min.go"])
def test_languages_follow_the_extension_mapping(tmp_path: Path, name: str) -> None:
    write(tmp_path, f"dir.js/{name}", "x\n")

    (file,) = walk(tmp_path, WalkOptions(default_excludes=False)).files

    assert file.language == language_for_path(f"dir.js/{name}")


@pytest.mark.parametrize("in_git", [False, pytest.param(True, marks=requires_git)])
def test_unreadable_file_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_git: bool) -> None:
    if in_git:
        make_repo(tmp_path, {})
    locked = write(tmp_path, "locked.py", "x = 1\n")
    write(tmp_path, "ok.py", "y = 2\n")
    if os.geteuid() == 0:
        # root reads through any mode bits; make opening this one file fail instead.
        real_open = os.open

        def refusing_open(file: str, *args: int, **kwargs: object) -> int:
            if str(file) == str(locked):
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(reading_module.os, "open", refusing_open)
    else:
        locked.chmod(0)

    result = walk(tmp_path)

    assert result.skipped == (SkippedFile("locked.py", SkipReason.UNREADABLE, "Permission denied"),)
    assert [file.path for file in result.files] == ["ok.py"]


def test_file_vanishing_after_listing_is_reported(tmp_path: Path) -> None:
    doomed = write(tmp_path, "doomed.py", "x = 1\n")
    write(tmp_path, "stays.py", "y = 2\n")

    def delete_once_listed(event: ProgressEvent) -> None:
        if event.total is not None and event.completed == 0 and doomed.exists():
            doomed.unlink()

    result = walk(tmp_path, progress=delete_once_listed)

    assert reasons(result) == {"doomed.py": SkipReason.VANISHED}
    assert [file.path for file in result.files] == ["stays.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_named_pipe_is_not_a_file_and_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    write(tmp_path, "a.py", "a = 1\n")

    result = walk(tmp_path)

    assert reasons(result) == {"pipe": SkipReason.NOT_A_FILE}


@requires_git
def test_a_nested_repository_is_named_not_audited(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "a\n"})
    make_repo(repo / "nested", {"n.py": "n\n"})

    result = walk(repo)

    assert reported(result) == git_listing(repo) == {"a.py", "nested"}
    [nested] = result.skipped
    assert (nested.path, nested.reason) == ("nested", SkipReason.NESTED_REPOSITORY)
    assert "auditor scan nested" in nested.detail


# --------------------------------------------------------------------------------------
# Default exclusions and user filters
# --------------------------------------------------------------------------------------


def test_token_sinks_are_skipped_with_their_reasons(tmp_path: Path) -> None:
    minified_bundle = "var a=function(){return 1};" * 200  # one long line
    write(tmp_path, "package-lock.json", "{}\n")
    write(tmp_path, "sub/poetry.lock", "x\n")
    write(tmp_path, "static/app.min.js", "var a;\n")
    write(tmp_path, "static/bundle.js", minified_bundle)
    write(tmp_path, "node_modules/left-pad/index.js", "module.exports = 1;\n")
    write(tmp_path, "vendor/github.com/x/y.go", "package y\n")
    write(tmp_path, ".venv/lib/site.py", "s = 1\n")
    write(tmp_path, "api/service_pb2.py", "x = 1\n")
    write(tmp_path, "api/service.pb.go", "package api\n")
    write(tmp_path, "gen/models.go", "// Code generated by sqlc. DO NOT EDIT.\npackage gen\n")
    write(tmp_path, "gen/schema.js", "/**\n * @generated\n */\nexport const x = 1;\n")
    write(tmp_path, "shop/migrations/0001_initial.py", "# Generated by Django 4.2 on 2024-01-01\nfrom django.db import migrations\n")
    write(tmp_path, "static/readable.js", "function f() {\n  return 1;\n}\n")

    result = walk(tmp_path)

    assert reasons(result) == {
        "package-lock.json": SkipReason.LOCKFILE,
        "sub/poetry.lock": SkipReason.LOCKFILE,
        "static/app.min.js": SkipReason.MINIFIED,
        "static/bundle.js": SkipReason.MINIFIED,
        "node_modules/left-pad/index.js": SkipReason.VENDORED,
        "vendor/github.com/x/y.go": SkipReason.VENDORED,
        ".venv/lib/site.py": SkipReason.VENDORED,
        "api/service_pb2.py": SkipReason.GENERATED,
        "api/service.pb.go": SkipReason.GENERATED,
        "gen/models.go": SkipReason.GENERATED,
        "gen/schema.js": SkipReason.GENERATED,
    }
    assert {file.path for file in result.files} == {"shop/migrations/0001_initial.py", "static/readable.js"}


def test_default_excludes_can_be_turned_off(tmp_path: Path) -> None:
    write(tmp_path, "yarn.lock", "x\n")
    write(tmp_path, "node_modules/a/index.js", "a\n")
    write(tmp_path, "gen.pb.go", "// Code generated by protoc. DO NOT EDIT.\n")
    write(tmp_path, "blob", b"\0binary")

    result = walk(tmp_path, WalkOptions(default_excludes=False))

    assert {file.path for file in result.files} == {"yarn.lock", "node_modules/a/index.js", "gen.pb.go"}
    # A NUL byte still means binary: such content is never audited as text.
    assert reasons(result) == {"blob": SkipReason.BINARY}


def test_include_exclude_and_auditorignore_are_reported(tmp_path: Path) -> None:
    write(tmp_path, ".auditorignore", "fixtures/\n*.snap\n")
    write(tmp_path, "pkg/.auditorignore", "generated_*.py\n!generated_keep.py\n")
    write(tmp_path, "fixtures/data.py", "d\n")
    write(tmp_path, "a.snap", "s\n")
    write(tmp_path, "pkg/generated_x.py", "x\n")
    write(tmp_path, "pkg/generated_keep.py", "k\n")
    write(tmp_path, "dist/out.py", "o\n")
    write(tmp_path, "src/app.py", "a\n")
    write(tmp_path, "src/notes.txt", "n\n")

    result = walk(tmp_path, WalkOptions(include=("*.py", "/.auditorignore"), exclude=("dist/",)))

    assert reasons(result) == {
        "fixtures/data.py": SkipReason.AUDITORIGNORE,
        "a.snap": SkipReason.AUDITORIGNORE,
        "pkg/generated_x.py": SkipReason.AUDITORIGNORE,
        "dist/out.py": SkipReason.EXCLUDED,
        "src/notes.txt": SkipReason.NOT_INCLUDED,
        "pkg/.auditorignore": SkipReason.NOT_INCLUDED,
    }
    assert {file.path for file in result.files} == {".auditorignore", "pkg/generated_keep.py", "src/app.py"}
    details = {item.path: item.detail for item in result.skipped}
    assert details["dist/out.py"] == "matched pattern 'dist/'"
    assert details["pkg/generated_x.py"] == "matched pattern 'generated_*.py' in pkg/.auditorignore"


@requires_git
def test_every_git_candidate_is_either_audited_or_skipped(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", IGNORE_TREE)
    write(repo, ".auditorignore", "docs/\n")
    write(repo, "node_modules/x/i.js", "i\n")
    write(repo, "Cargo.lock", "c\n")
    write(repo, "img.png", b"\x89PNG\0")

    result = walk(repo, WalkOptions(exclude=("app/deep/**",)))

    assert reported(result) == git_listing(repo)
    assert reasons(result)["docs/keep.md"] == SkipReason.AUDITORIGNORE
    assert reasons(result)["app/deep/secret.py"] == SkipReason.EXCLUDED
    assert reasons(result)["node_modules/x/i.js"] == SkipReason.VENDORED
    assert reasons(result)["Cargo.lock"] == SkipReason.LOCKFILE
    assert reasons(result)["img.png"] == SkipReason.BINARY


# --------------------------------------------------------------------------------------
# Usage errors and progress
# --------------------------------------------------------------------------------------


def test_missing_root_or_file_root_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        walk(tmp_path / "missing")
    with pytest.raises(UsageError, match="not a directory"):
        walk(write(tmp_path, "file.py"))


def test_invalid_glob_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--exclude"):
        walk(tmp_path, WalkOptions(exclude=("trailing\\",)))


def test_progress_reports_the_walk_to_completion(tmp_path: Path) -> None:
    for index in range(450):
        write(tmp_path, f"f{index:03}.py", "x\n")
    events: list[ProgressEvent] = []

    walk(tmp_path, progress=events.append)

    counts = [(event.completed, event.total) for event in events if event.message is None]
    assert counts == [(0, 450), (200, 450), (400, 450), (450, 450)]
    assert all(event.stage == "walk" for event in events)


@pytest.mark.parametrize("repetitions", [10, 2_000])
def test_repeated_double_star_patterns_match_in_linear_time(tmp_path: Path, repetitions: int) -> None:
    # Issue 15: ten '**/' took ~58 s on one path (exponential backtracking); git collapses
    # consecutive '**/' and takes 0.01 s.
    deep = tmp_path.joinpath(*(["a"] * 30))
    deep.mkdir(parents=True)
    write(deep, "x.py", "x = 1\n")
    write(tmp_path, "y.py", "y = 1\n")
    write(tmp_path, ".gitignore", "**/" * repetitions + "x.py\n" + "**/" * repetitions + "b*/c*/d*/e\n")

    started = time.monotonic()
    result = walk(tmp_path)

    assert time.monotonic() - started < 3
    assert [entry.path for entry in result.files] == [".gitignore", "y.py"]


def test_patterns_with_many_wildcards_match_like_git(tmp_path: Path) -> None:
    for path in ("a/b/a.log", "a/x/b/c.log", "ab/b/c.txt", "b.log", "a/aab"):
        write(tmp_path, path, "x\n")
    write(tmp_path, ".gitignore", "a/**/b/*.log\n*a*a*b\n")

    result = walk(tmp_path)

    assert {entry.path for entry in result.files} == {".gitignore", "ab/b/c.txt", "b.log"}
