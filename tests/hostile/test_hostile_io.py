"""Hostile inputs for the walk, index and cache stages, from a seeded generator.

Every case asserts a bounded outcome: it finishes within a time limit, writes nothing
outside the cache directory, and ends in a named skip or a recovered (recomputed) cache
entry, never a traceback. The variants are not the ones issue 15 reported (those have their
own regression tests next to the code): other pattern shapes, other special files, nested
encodings, deep nesting, odd file names, huge lines, and every store's entries truncated,
bit-flipped or replaced by something that is not a regular file.

Issue 22's classes, in variants the issue did not report: placeholder formats (LFS pointers
with CRLF, BOM, extensions or the legacy spec URL; git-annex pointers and links; git-crypt
files) next to look-alikes that must stay audited (an empty stub, a quoted pointer line, a
large file starting like one); submodules deep, missing or under a subdirectory root and a
nested repository with a ``.git`` file; rule pattern shapes that backtrack exponentially,
and ones only a backtracking engine runs (a rule error); output paths planted as links,
dangling links, links to directories, FIFOs and link chains, for pack, review and baselines.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from auditor.engine.base import Completion
from auditor.engine.result_cache import ResultCache
from auditor.index.indexer import PARENT_POLL_S, index_sources
from auditor.runs.prepare import prepare_repository
from auditor.storage.digests import DigestStore, digest_of
from auditor.walk.files import SkippedFile, SkipReason
from auditor.walk.walker import WalkOptions, walk

SEED = 20261201


class _TimeLimit(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail the case (instead of hanging the suite) when the block runs past ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise _TimeLimit(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def snapshot(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    """(size, mtime, bytes) of every regular file below ``directory``."""
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            status = path.stat()
            files[str(path.relative_to(directory))] = (status.st_size, status.st_mtime_ns, path.read_bytes())
    return files


# --------------------------------------------------------------------------------------
# Cache states: every store, every kind of damage
# --------------------------------------------------------------------------------------

DAMAGES = (
    "truncated",
    "bit-flipped",
    "empty",
    "symlink-outside",
    "symlink-dev-zero",
    "fifo",
    "directory",
    "sparse-oversize",
    "dangling-symlink",
)


def damage(path: Path, kind: str, outside: Path, rng: random.Random) -> None:
    """Replace the cache file ``path`` by one kind of damage."""
    data = path.read_bytes()
    path.unlink()
    if kind == "truncated":
        path.write_bytes(data[: rng.randrange(len(data))])
    elif kind == "bit-flipped":
        flipped = bytearray(data)
        flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(flipped))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "symlink-outside":
        path.symlink_to(outside)
    elif kind == "symlink-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
        (path / "inner").write_bytes(data)
    elif kind == "sparse-oversize":
        with path.open("wb") as handle:
            handle.write(data)
            handle.truncate(1 << 40)  # 1 TiB, sparse: reading it whole would never end
    elif kind == "dangling-symlink":
        path.symlink_to(path.with_name("missing-target"))
    else:
        raise AssertionError(kind)


def small_repository(root: Path) -> None:
    (root / "app").mkdir(parents=True)
    (root / "app" / "views.py").write_text(
        "from app.models import save_order\n\n"
        "def checkout(request):\n    save_order(request.order)\n    request.user.save()\n",
        encoding="utf-8",
    )
    (root / "app" / "models.py").write_text(
        "def save_order(order):\n    order.save()\n    order.items.update(done=True)\n", encoding="utf-8"
    )


@dataclass(frozen=True)
class Store:
    """One cache: how to fill it, which files are its entries, and what reading it gives."""

    name: str
    pattern: str
    fill: Callable[[Path, Path], object]
    """(cache directory, scratch directory) -> the value a clean read gives."""
    read: Callable[[Path, Path], object]
    """The value read (and rewritten) after damage: must equal the clean value."""


def _prepared(cache: Path, scratch: Path) -> object:
    prepared = prepare_repository(scratch / "repo", cache_dir=cache)
    return (sorted(prepared.indexes.items()), prepared.graph._rows)


def _fill_prepared(cache: Path, scratch: Path) -> object:
    small_repository(scratch / "repo")
    return _prepared(cache, scratch)


_DIGEST_VALUES = {digest_of(f"text {number}"): number * 7 for number in range(50)}


def _fill_digests(cache: Path, scratch: Path) -> object:
    DigestStore(cache / "counts" / "store.bin").put_many(_DIGEST_VALUES)
    return _read_digests(cache, scratch)


def _read_digests(cache: Path, scratch: Path) -> object:
    store = DigestStore(cache / "counts" / "store.bin")
    found = store.get_many(list(_DIGEST_VALUES))
    # A damaged record is recomputed: never a different value, only a miss.
    assert all(value is None or value == _DIGEST_VALUES[key] for key, value in zip(_DIGEST_VALUES, found))
    store.put_many({key: value for (key, value), was in zip(_DIGEST_VALUES.items(), found) if was is None})
    return DigestStore(cache / "counts" / "store.bin").get_many(list(_DIGEST_VALUES)) if store.path.is_file() else [
        _DIGEST_VALUES[key] for key in _DIGEST_VALUES
    ]


_ANSWER = Completion("w", '{"findings": [{"line": 12}], "probes": []}', "trace", "stop", 100, 20)


def _fill_results(cache: Path, scratch: Path) -> object:
    ResultCache(cache).put("ab" * 32, _ANSWER)
    return _read_results(cache, scratch)


def _read_results(cache: Path, scratch: Path) -> object:
    results = ResultCache(cache)
    found = results.get("ab" * 32, "w")
    if found is None:  # a miss: the run asks the engine again and stores the answer
        results.put("ab" * 32, _ANSWER)
        return _ANSWER
    return found


STORES = (
    Store("index-entry", "*.index", _fill_prepared, _prepared),
    Store("index-pack", "*.pack", _fill_prepared, _prepared),
    Store("call-graph", "*.graph", _fill_prepared, _prepared),
    Store("digest-store", "*.bin", _fill_digests, _read_digests),
    Store("result-cache", "*.entry", _fill_results, _read_results),
)


@pytest.mark.parametrize("kind", DAMAGES)
@pytest.mark.parametrize("store", STORES, ids=[store.name for store in STORES])
def test_a_damaged_entry_of_any_store_is_recomputed_never_trusted_or_written_through(
    tmp_path: Path, store: Store, kind: str
) -> None:
    rng = random.Random(f"{SEED}-{store.name}-{kind}")
    cache, scratch = tmp_path / "cache", tmp_path / "scratch"
    scratch.mkdir()
    outside = tmp_path / "outside" / "precious.txt"
    outside.parent.mkdir()
    outside.write_bytes(b"not a cache file\n" * 10)
    clean = store.fill(cache, scratch)
    entries = sorted(path for path in cache.rglob(store.pattern) if path.is_file())
    assert entries, f"{store.name} wrote no {store.pattern} file"
    damage(rng.choice(entries), kind, outside, rng)
    before = snapshot(outside.parent)

    with time_limit(20):
        again = store.read(cache, scratch)

    assert again == clean
    assert snapshot(outside.parent) == before


def test_a_store_directory_replaced_by_a_link_is_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "cache"
    (cache / "counts").parent.mkdir(parents=True)
    (cache / "counts").symlink_to(outside, target_is_directory=True)
    (cache / "results" / "ab").mkdir(parents=True)
    (cache / "results" / "ab").rmdir()
    (cache / "results" / "ab").symlink_to(outside, target_is_directory=True)

    with time_limit(10):
        DigestStore(cache / "counts" / "store.bin").put_many(_DIGEST_VALUES)
        ResultCache(cache / "results").put("ab" * 32, _ANSWER)

    assert not list(outside.iterdir())


# --------------------------------------------------------------------------------------
# Hostile trees: gitignore shapes, special files, names, encodings, nesting
# --------------------------------------------------------------------------------------


def git_available() -> bool:
    return shutil.which("git") is not None


def git_listing(root: Path) -> set[str]:
    """What git lists as untracked-but-not-ignored below ``root`` (a fresh repository)."""
    environment = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=environment)
    output = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--others", "--exclude-standard"],
        check=True, capture_output=True, env=environment,
    ).stdout
    shutil.rmtree(root / ".git")
    return {os.fsdecode(item) for item in output.split(b"\0") if item}


_PATTERN_ATOMS = ("a", "b", "*", "**", "/", "?", "[ab]", "[!a]", "**/", "/**", "\\*", ".")


def random_pattern(rng: random.Random) -> str:
    pattern = "".join(rng.choice(_PATTERN_ATOMS) for _ in range(rng.randint(1, 7)))
    if rng.random() < 0.2:
        pattern = "!" + pattern
    return pattern


def random_tree(root: Path, rng: random.Random) -> None:
    for _ in range(25):
        parts = [rng.choice(("a", "b", "ab", "ba", "aa", "b.a", "x")) for _ in range(rng.randint(1, 4))]
        path = root.joinpath(*parts)
        if path.exists() or any(parent.is_file() for parent in path.parents):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n", encoding="utf-8")


@pytest.mark.skipif(not git_available(), reason="needs git")
@pytest.mark.parametrize("case", range(30))
def test_random_gitignore_patterns_select_what_git_selects(tmp_path: Path, case: int) -> None:
    rng = random.Random(f"{SEED}-gitignore-{case}")
    root = tmp_path / "tree"
    random_tree(root, rng)
    patterns = [random_pattern(rng) for _ in range(rng.randint(1, 4))]
    (root / ".gitignore").write_text("\n".join(patterns) + "\n", encoding="utf-8")
    expected = git_listing(root)

    with time_limit(10):
        result = walk(root, WalkOptions(default_excludes=False))

    listed = {entry.path for entry in result.files} | {item.path for item in result.skipped}
    assert listed == expected, patterns


HOSTILE_PATTERNS = {
    "star-letter-alternation": "*a" * 40 + "*b",
    "question-star-runs": "?*" * 60 + "z",
    "negated-brackets": "[!a]*" * 50 + "q",
    "mixed-double-stars": "**/a*/" * 200 + "**/x*y*z",
    "escaped-stars": "\\*" * 3000 + "*",
    "bracket-ranges": "[a-z]*" * 300,
    "slash-star-ladders": "/".join(["*"] * 400) + "/**",
    "double-star-suffixes": "a**" * 500 + "/b",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_PATTERNS))
def test_hostile_gitignore_patterns_never_stall_the_walk(tmp_path: Path, name: str) -> None:
    root = tmp_path / "tree"
    deep = root.joinpath(*(["aaaaaaaaaa"] * 40))
    deep.mkdir(parents=True)
    (deep / ("a" * 200 + ".py")).write_text("x = 1\n", encoding="utf-8")
    (root / ("ab" * 100)).write_text("y = 2\n", encoding="utf-8")
    (root / "keep.py").write_text("z = 3\n", encoding="utf-8")
    (root / ".gitignore").write_text(HOSTILE_PATTERNS[name] + "\n" + HOSTILE_PATTERNS[name] + "/\n", encoding="utf-8")

    with time_limit(10):
        started = time.monotonic()
        result = walk(root)
        elapsed = time.monotonic() - started

    assert elapsed < 5, f"{name}: {elapsed:.1f} s"
    assert "keep.py" in {entry.path for entry in result.files}  # no hostile pattern matches it


def special_files(root: Path) -> dict[str, SkipReason]:
    """Files no audit can read, each with the skip it must get."""
    root.mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / "pipe.py")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "sock.py"))
    finally:
        server.close()
    (root / "zero.py").symlink_to("/dev/zero")
    (root / "loop.py").symlink_to(root / "loop.py")
    (root / "dir-link").symlink_to("/", target_is_directory=True)
    (root / "dangling.py").symlink_to(root / "nowhere.py")
    return {
        "pipe.py": SkipReason.NOT_A_FILE,
        "sock.py": SkipReason.NOT_A_FILE,
        "zero.py": SkipReason.SYMLINK_OUTSIDE,
        "loop.py": SkipReason.SYMLINK_LOOP,
        "dir-link": SkipReason.SYMLINK_OUTSIDE,
        "dangling.py": SkipReason.SYMLINK_LOOP,
    }


def test_special_files_are_named_skips(tmp_path: Path) -> None:
    expected = special_files(tmp_path / "tree")
    (tmp_path / "tree" / "ok.py").write_text("x = 1\n", encoding="utf-8")

    with time_limit(10):
        result = walk(tmp_path / "tree")

    assert {entry.path for entry in result.files} == {"ok.py"}
    assert {item.path: item.reason for item in result.skipped} == expected


ENCODED = {
    # name: (bytes, what the walk must make of them: (text, encoding) or a skip reason)
    "utf16-odd-length.py": ("x = 1\n".encode("utf-16") + b"\x00", SkipReason.NON_UTF8),
    "utf16-lone-surrogate.py": (b"\xff\xfe" + b"\x00\xd8x\x00", SkipReason.NON_UTF8),
    "utf8-bom-then-utf16-bom.py": (b"\xef\xbb\xbf\xff\xfex\x00", SkipReason.BINARY),
    "utf16-holding-a-utf8-bom.py": (b"\xff\xfe" + "\ufeffy = 1\n".encode("utf-16-le"), ("\ufeffy = 1\n", "utf-16-le")),
    "utf32-be.py": (b"\x00\x00\xfe\xff" + "z = 'é'\n".encode("utf-32-be"), ("z = 'é'\n", "utf-32-be")),
    "cp1252-smart-quotes.py": ("s = “quoted” – ok\n".encode("cp1252"), ("s = “quoted” – ok\n", "cp1252")),
    "cp1252-ellipsis.py": (b"caf\xe9 \x85\n", ("caf\u00e9 \u2026\n", "cp1252")),
    "latin1-c1-control.py": (b"caf\xe9 \x81\n", SkipReason.NON_UTF8),
    "mostly-utf8-one-bad-byte.py": ("é = 1\n".encode() + b"\xff", SkipReason.NON_UTF8),
    "control-bytes.py": (b"\xe9\x00" + b"a" * 10, SkipReason.BINARY),
    "bell-and-backspace.txt": (b"\xe9\x07\x08", SkipReason.NON_UTF8),
}


def test_nested_and_broken_encodings_decode_or_skip_by_name(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    for name, (raw, _) in ENCODED.items():
        (root / name).write_bytes(raw)

    with time_limit(10):
        result = walk(root)

    outcomes: dict[str, object] = {entry.path: (entry.text, entry.encoding) for entry in result.files}
    outcomes.update({item.path: item.reason for item in result.skipped})
    assert outcomes == {name: outcome for name, (_, outcome) in ENCODED.items()}


def test_odd_names_deep_nesting_and_huge_lines_stay_bounded(tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-names")
    root = tmp_path / "tree"
    deep = root.joinpath(*[f"d{level}" for level in range(150)])
    deep.mkdir(parents=True)
    (deep / "leaf.py").write_text("def leaf():\n    return 1\n", encoding="utf-8")
    odd = ["-rf.py", " lead.py", "trail .py", "new\nline.py", "tab\tname.py", "ctrl\x01.py", "ü-ß.py", "#hash.py"]
    for name in odd:
        (root / name).write_text("x = 1\n", encoding="utf-8")
    raw_name = os.fsencode(root) + b"/bad-\xff\xfe-" + bytes([rng.randrange(0x80, 0xC0)]) + b".py"
    try:
        with open(raw_name, "wb") as handle:
            handle.write(b"y = 2\n")
    except OSError:
        pass
    (root / "huge-line.py").write_text("x = [" + "1, " * 300_000 + "]\n", encoding="utf-8")
    (root / "huge-string.js").write_text("const s = '" + "a" * 900_000 + "';\n", encoding="utf-8")

    with time_limit(30):
        result = walk(root)
        outcome = index_sources(
            [(entry.path, entry.text, entry.language, entry.content_hash) for entry in result.files if entry.language],
            parse_budget_s=20,
        )

    paths = {entry.path for entry in result.files}
    assert "/".join(f"d{level}" for level in range(150)) + "/leaf.py" in paths
    assert set(odd) <= paths
    assert {"huge-line.py", "huge-string.js"} <= paths | {item.path for item in result.skipped}
    assert all(isinstance(item, SkippedFile) and item.reason for item in result.skipped)
    assert set(outcome.indexes) | {skip.path for skip in outcome.skipped} == {
        entry.path for entry in result.files if entry.language
    }


# --------------------------------------------------------------------------------------
# Hostile sources for the index: linear time, or a named per-file skip
# --------------------------------------------------------------------------------------

HOSTILE_SOURCES = {
    "python-chain-of-50k-calls.py": ("python", "x = a" + ".b()" * 50_000 + "\n"),
    "python-50k-decorators.py": ("python", "@d\n" * 50_000 + "def f():\n    pass\n"),
    "python-nested-calls.py": ("python", "x = " + "f(" * 3_000 + ")" * 3_000 + "\n"),
    "python-chain-with-arguments.py": ("python", "q = db" + ".filter(a=1, b=[2, 3])" * 10_000 + "\n"),
    "python-long-argument-lists.py": ("python", "".join(f"f{n}(" + "x, " * 5_000 + ")\n" for n in range(10))),
    "go-chain.go": ("go", "package p\nfunc f() {\n\tx" + ".B()" * 8_000 + "\n}\n"),
    "javascript-chain.js": ("javascript", "a" + ".b()" * 8_000 + ";\n"),
    # Java stays quadratic in the chain length (the name follows the object): 2,000 calls.
    "java-chain.java": ("java", "class C { void f() { a" + ".b()" * 2_000 + "; } }\n"),
    "javascript-decorated-class.js": ("javascript", "@d\n" * 2_000 + "class C {}\n"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SOURCES))
def test_hostile_sources_index_in_linear_time_or_are_named_skips(name: str) -> None:
    language, text = HOSTILE_SOURCES[name]
    with time_limit(20):
        started = time.monotonic()
        outcome = index_sources([(name, text, language, f"hash-{name}")], parse_budget_s=10)
        elapsed = time.monotonic() - started

    assert elapsed < 6, f"{name}: {elapsed:.1f} s"
    assert set(outcome.indexes) | {skip.path for skip in outcome.skipped} == {name}
    for skip in outcome.skipped:
        assert skip.reason == "parse-budget" and "budget" in skip.detail


def test_an_index_over_its_parse_budget_is_a_named_skip_and_not_cached(tmp_path: Path) -> None:
    from auditor.index.cache import IndexCache

    slow = ("slow.py", "x = a" + ".b()" * 30_000 + "\n", "python", "hash-slow")
    fine = ("fine.py", "def f():\n    return 1\n", "python", "hash-fine")
    cache = IndexCache(tmp_path)

    outcome = index_sources([slow, fine], cache=cache, parse_budget_s=0.0)

    assert [skip.path for skip in outcome.skipped] == ["fine.py", "slow.py"] or [
        skip.path for skip in outcome.skipped
    ] == ["slow.py"]
    assert "slow.py" not in outcome.indexes
    assert cache.get("hash-slow", "python", "slow.py") is None
    again = index_sources([slow, fine], cache=cache, parse_budget_s=None)
    assert set(again.indexes) == {"slow.py", "fine.py"} and not again.skipped


# --------------------------------------------------------------------------------------
# Processes: workers never outlive a killed parent
# --------------------------------------------------------------------------------------


def _children_of(pid: int) -> set[int]:
    children = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.add(int(entry.name))
    return children


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_index_workers_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(
            """
            import auditor.index.indexer as indexer

            if __name__ == "__main__":
                indexer.PARALLEL_PARSE_THRESHOLD = 1
                indexer._available_cpus = lambda: 2
                text = "x = a" + ".b()" * 30000 + "\\n"  # about a second each, 8 or more per chunk
                sources = [(f"f{n}.py", text + f"y{n} = 1\\n", "python", f"h{n}") for n in range(64)]
                indexer.index_sources(sources)
            """
        ),
        encoding="utf-8",
    )
    parent = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(workers) < 3:  # 2 workers + the resource tracker
            time.sleep(0.2)
            workers |= _children_of(parent.pid)
        assert len(workers) >= 2, "the pool never started"
        time.sleep(4.0)  # the workers are busy with their first chunk (several seconds each)
        workers |= _children_of(parent.pid)
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 3 * PARENT_POLL_S + 2
        while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
            time.sleep(0.2)
        survivors = [pid for pid in workers if _alive(pid)]
        assert not survivors, f"still running after the parent's SIGKILL: {survivors}"
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in workers | _children_of(parent.pid):
            if not _alive(pid):
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass



# --------------------------------------------------------------------------------------
# Issue 22: placeholders and trees that are not here, rule pattern shapes, outputs.
# The variants are not the issue's own (those are in test_stand_ins.py/test_outputs.py).
# --------------------------------------------------------------------------------------

_LFS_OID = "oid sha256:" + "ab" * 32


def _placeholder_cases(rng: random.Random) -> dict[str, tuple[bytes | str, str | None]]:
    """path -> (content, or "link:TARGET"; the skip reason expected, None for audited)."""
    size = rng.randrange(1, 10**9)
    return {
        "crlf/lfs.go": (f"version https://git-lfs.github.com/spec/v1\r\n{_LFS_OID}\r\nsize {size}\r\n".encode(), "placeholder"),
        "legacy/hawser.java": (f"version https://hawser.github.com/spec/v1\n{_LFS_OID}\nsize {size}\n".encode(), "placeholder"),
        "ext/lfs_ext.ts": (f"version https://git-lfs.github.com/spec/v1\next-0-foo sha256:{'cd' * 32}\n{_LFS_OID}\nsize {size}\n".encode(), "placeholder"),
        "bom/lfs.py": (b"\xef\xbb\xbfversion https://git-lfs.github.com/spec/v1\n" + f"{_LFS_OID}\nsize {size}\n".encode(), "placeholder"),
        "annex/unlocked.js": (f"/annex/objects/SHA256E-s{size}--{'ef' * 32}.js\n".encode(), "placeholder"),
        "annex/locked.java": (f"link:../.git/annex/objects/Xx/Yy/SHA256E-s{size}--{'01' * 32}.java/SHA256E-s{size}--{'01' * 32}.java", "placeholder"),
        "crypt/secret.go": (b"\x00GITCRYPT\x00" + rng.randbytes(64), "placeholder"),
        # Not placeholders: an empty stub, a file that quotes the pointer line, a real file
        # over the pointer size limit that starts like one, a long annex-looking path list.
        "stub/__init__.py": (b"", None),
        "docs/quoting.py": (b"# version https://git-lfs.github.com/spec/v1\nx = 1\n", None),
        "big/starts_like_a_pointer.py": (b"version https://git-lfs.github.com/spec/v1\n" + b"x = 1\n" * 300, None),
        "notes/annex.py": (b"paths = ['/annex/objects/a', '/annex/objects/b']\n", None),
    }


def test_placeholder_variants_are_named_and_real_files_are_audited(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    cases = _placeholder_cases(random.Random(f"{SEED}-placeholders"))
    for path, (content, _) in cases.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            target.symlink_to(content.removeprefix("link:"))
        else:
            target.write_bytes(content)
    with time_limit(10):
        result = walk(root)
    skipped = {item.path: item.reason.value for item in result.skipped}
    audited = {entry.path for entry in result.files}
    for path, (_, expected) in cases.items():
        if expected is None:
            assert path in audited, (path, skipped.get(path))
        else:
            assert skipped.get(path) == expected, (path, skipped.get(path))


@pytest.mark.skipif(not git_available(), reason="needs git")
def test_tree_variants_submodule_deep_missing_and_nested_gitfile(tmp_path: Path) -> None:
    from tests.support import git

    library = tmp_path / "library"
    library.mkdir()
    (library / "lib.py").write_text("def f(order):\n    order.save()\n")
    git(library, "init", "-q")
    git(library, "add", "-A")
    git(library, "commit", "-qm", "lib")
    outer = tmp_path / "outer"
    (outer / "src").mkdir(parents=True)
    (outer / "src" / "app.py").write_text("x = 1\n")
    git(outer, "init", "-q")
    for where in ("src/deep/er/lib", "src/gone"):
        git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), where)
    git(outer, "commit", "-qm", "two submodules")
    shutil.rmtree(outer / "src" / "gone")  # the submodule's directory deleted
    nested = outer / "src" / "linked"
    nested.mkdir()
    (nested / "x.py").write_text("y = 2\n")
    (nested / ".git").write_text(f"gitdir: {library / '.git'}\n")  # a .git file, as worktrees have
    with time_limit(20):
        result = walk(outer / "src")  # a subdirectory root: paths are relative to it
    skipped = {item.path: item.reason.value for item in result.skipped}
    assert skipped["deep/er/lib"] == "submodule"
    assert skipped["gone"] == "submodule"
    assert skipped["linked"] == "nested-repository"


# Pattern shapes that backtrack exponentially or quadratically in a backtracking engine,
# each with the one long line that triggers it.
HOSTILE_RULE_PATTERNS = {
    "nested-plus": (r"(a+)+$", "a" * 200_000 + "!"),
    "overlapping-alternation": (r"(a|aa)*c", "a" * 200_000),
    "counted-dot-star": (r"(.*,){12}x", "," * 200_000),
    "word-space-star": (r"(\w+\s?)*$", "ab " * 100_000 + "!"),
    "email-shape": (r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$", "a" * 100_000 + "!"),
    "case-folded-keywords": (r"(?i:\b(insert|update)\b.*\b(where)\b.*(\+|%))", "UPDATE " * 100_000),
    "dot-star-pairs": (r".*.*=.*;", "=" * 200_000),
}


def _custom_rule(pattern: str, field: str = "relevance") -> str:
    quoted = pattern.replace("'", "''")
    value = f"\n  - '{quoted}'" if field == "relevance" else f" '{quoted}'"
    return (f"---\nid: hostile-shape\ntitle: t\nseverity: low\nlanguages: [python]\ndescription: d\n"
            f"{field}:{value}\n---\nLook.\n")


@pytest.mark.parametrize("name", sorted(HOSTILE_RULE_PATTERNS))
def test_hostile_rule_pattern_shapes_match_in_linear_time(name: str) -> None:
    from auditor.pack.rank import relevance_scores
    from auditor.rules.loader import parse_rule

    pattern, line = HOSTILE_RULE_PATTERNS[name]
    rule = parse_rule(_custom_rule(pattern), f"{name}.md")
    entry = type("Entry", (), {"path": "long.py", "text": "# " + line + "\n", "content_hash": ""})()
    with time_limit(10):
        started = time.monotonic()
        relevance_scores([entry], [rule])
        sql = parse_rule(_custom_rule(pattern, "sql_write"), f"{name}.md").sql_write_pattern()
        assert sql is not None
        sql.search(line)
        elapsed = time.monotonic() - started
    assert elapsed < 2, f"{name}: {elapsed:.1f} s"


@pytest.mark.parametrize("pattern", [r"(?<=select)\s", r"(['\"]).*\1", r"a++b", r"(?>a+)b", r"x\Z", r"(?=.*select)"])
def test_a_pattern_only_a_backtracking_engine_runs_is_a_rule_error_naming_it(tmp_path: Path, pattern: str) -> None:
    from typer.testing import CliRunner

    from auditor.cli.app import app

    rule = tmp_path / "shape.md"
    rule.write_text(_custom_rule(pattern), encoding="utf-8")
    small_repository(tmp_path / "repo")
    result = CliRunner().invoke(app, ["scan", str(tmp_path / "repo"), "--engine", "static", "--rule", str(rule)])
    assert result.exit_code == 3
    assert "linear time" in " ".join(result.output.split())


def test_a_long_line_under_the_size_limit_scans_in_seconds(tmp_path: Path) -> None:
    import subprocess as sp

    small_repository(tmp_path / "repo")
    # Every built-in rule's relevance patterns over ~0.9 MB lines of several shapes.
    (tmp_path / "repo" / "app" / "long_select.py").write_text("# " + "select " * 130_000 + "\n")
    (tmp_path / "repo" / "app" / "long_quotes.py").write_text("s = '" + "select '" * 110_000 + "\n")
    (tmp_path / "repo" / "app" / "long_calls.py").write_text("x = " + "a.save(" * 120_000 + "\n")
    env = {**os.environ, "AUDITOR_CACHE_DIR": str(tmp_path / "cache")}
    started = time.monotonic()
    completed = sp.run([sys.executable, "-m", "auditor", "scan", str(tmp_path / "repo"), "--engine", "static", "-f", "json"],
                       capture_output=True, text=True, env=env, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    assert time.monotonic() - started < 60


# Output paths a repository can plant, for every command that writes one. Git commits
# links, never pipes or devices: a pipe at the output path is the user's own, and is
# written in place (tests/unit/storage/test_outputs.py).
OUTPUT_PLANTS = ("link-to-victim", "dangling-link", "link-to-directory", "link-chain", "link-to-fifo")


def _plant(path: Path, kind: str, victim: Path) -> None:
    if kind == "link-to-victim":
        path.symlink_to(victim)
    elif kind == "dangling-link":
        path.symlink_to(path.parent / "nowhere" / "file")
    elif kind == "link-to-directory":
        path.symlink_to(victim.parent)
    elif kind == "link-to-fifo":
        pipe = victim.parent / "pipe"
        os.mkfifo(pipe)
        path.symlink_to(pipe)
    elif kind == "link-chain":
        hop = path.with_name("hop")
        hop.symlink_to(victim)
        path.symlink_to(hop)


@pytest.mark.parametrize("command", ["pack", "review", "baseline"])
@pytest.mark.parametrize("kind", OUTPUT_PLANTS)
def test_a_planted_output_path_is_replaced_never_written_through(tmp_path: Path, command: str, kind: str) -> None:
    from typer.testing import CliRunner

    from auditor.cli.app import app
    from tests.support import git

    victim = tmp_path / "victim" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    repo = tmp_path / "repo"
    small_repository(repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    output = repo / "out.json"
    _plant(output, kind, victim)
    args = {
        "pack": ["pack", str(repo), "-f", "json", "-o", str(output)],
        "review": ["review", str(repo), "--base", "HEAD", "--engine", "static", "-f", "json", "-o", str(output)],
        "baseline": ["scan", str(repo), "--engine", "static", "--write-baseline", str(output)],
    }[command]
    with time_limit(60):
        result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 5), result.output
    assert victim.read_text() == "precious\n"
    assert sorted(path.name for path in victim.parent.iterdir() if path.name != "pipe") == ["victim.txt"]
    assert output.is_file() and not output.is_symlink()


@pytest.mark.parametrize("case", range(20))
def test_compiled_globs_decide_as_pathspec_does(case: int) -> None:
    import pathspec

    from auditor.walk.globs import GlobList

    rng = random.Random(f"{SEED}-globs-{case}")
    patterns = tuple(random_pattern(rng) for _ in range(rng.randint(1, 6)))
    try:
        reference = pathspec.GitIgnoreSpec.from_lines(patterns, backend="simple")
    except ValueError:
        return
    globs = GlobList(patterns, "--include")
    names = ("a", "b", "ab", "ba", "aa", "b.a", "x", "*", "a b")
    for _ in range(300):
        path = "/".join(rng.choice(names) for _ in range(rng.randint(1, 4)))
        result = reference.check_file(path)
        expected = str(reference.patterns[result.index].pattern) if result.include and result.index is not None else None
        assert globs.matched(path) == expected, (patterns, path)


def test_twenty_thousand_include_patterns_are_one_matcher(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for number in range(400):
        directory = root / f"dir{number * 37}" / "sub"
        directory.mkdir(parents=True)
        (directory / f"file{number}.py").write_text("x = 1\n")
    include = tuple(f"dir{number}/**/*.py" for number in range(20_000))
    # A stall guard, not a speed target (those live in benchmarks/): pattern by pattern the
    # walk took minutes; one compiled matcher takes seconds even on a loaded machine.
    with time_limit(120):
        result = walk(root, WalkOptions(include=include))
    assert len(result.files) == sum(number * 37 < 20_000 for number in range(400))
