"""Persistent count and relevance caches: a re-pack reuses what was counted, never a wrong value."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from auditor.errors import TokenizerError
from auditor.pack.packer import PackOptions, pack
from auditor.pack.rank import PackInput, relevance_scores
from auditor.storage.digests import DigestStore, digest_of
from auditor.tokens.tokenizer import (
    CachedCountTokenizer,
    TokenizerRequest,
    load_tokenizer,
    with_count_cache,
)
from tests.support import TRAINING_TEXT, packing_rule

RULE = packing_rule()  # its windows do not move when the rule text is edited
TEXTS = [
    "def save_order(order):\n    order.save()\n",
    "naïve = 'ünïcödé ✓' # 日本語\n",
    "<|im_start|>user\nhello<|im_end|>\n",
    "",
    "x" * 5000,
]


def _exact(directory: Path):
    return load_tokenizer(TokenizerRequest(tokenizer=str(directory)))


def test_cached_counts_equal_the_tokenizers_counts(tiny_tokenizer_dir, tmp_path):
    exact = _exact(tiny_tokenizer_dir)
    cached = with_count_cache(_exact(tiny_tokenizer_dir), tmp_path)
    assert cached.count_many(TEXTS) == exact.count_many(TEXTS)
    assert cached.count_many(TEXTS) == exact.count_many(TEXTS)  # second time from memory
    again = with_count_cache(_exact(tiny_tokenizer_dir), tmp_path)
    assert [again.count(text) for text in TEXTS] == exact.count_many(TEXTS)  # from disk
    assert cached.info == exact.info


def test_a_fully_cached_run_never_loads_the_vocabulary(tiny_tokenizer_dir, tmp_path, monkeypatch):
    expected = with_count_cache(_exact(tiny_tokenizer_dir), tmp_path).count_many(TEXTS)
    import tokenizers

    def refuse(*args, **kwargs):
        raise AssertionError("the vocabulary was loaded although every count was cached")

    monkeypatch.setattr(tokenizers.Tokenizer, "from_file", refuse)
    monkeypatch.setattr(tokenizers.Tokenizer, "from_buffer", refuse)
    assert with_count_cache(_exact(tiny_tokenizer_dir), tmp_path).count_many(TEXTS) == expected


def test_counts_are_kept_apart_per_tokenizer(tiny_tokenizer_dir, tmp_path):
    other_dir = tmp_path / "other"
    shutil.copytree(tiny_tokenizer_dir, other_dir)
    import json

    # A different vocabulary: drop every merge, so texts split into many more tokens.
    data = json.loads((other_dir / "tokenizer.json").read_text())
    data["model"]["merges"] = []
    (other_dir / "tokenizer.json").write_text(json.dumps(data))
    cache = tmp_path / "cache"
    first = with_count_cache(_exact(tiny_tokenizer_dir), cache).count_many(TEXTS)
    second = with_count_cache(_exact(other_dir), cache).count_many(TEXTS)
    assert second == _exact(other_dir).count_many(TEXTS)
    assert second != first


def test_a_damaged_store_costs_recounting_not_wrong_counts(tiny_tokenizer_dir, tmp_path):
    exact = _exact(tiny_tokenizer_dir).count_many(TEXTS)
    cached = with_count_cache(_exact(tiny_tokenizer_dir), tmp_path)
    cached.count_many(TEXTS)
    [store] = list(tmp_path.rglob("*.bin"))
    data = bytearray(store.read_bytes())
    data[16] ^= 0xFF  # corrupt the first record's value
    store.write_bytes(bytes(data) + b"\x01\x02\x03")  # and leave a torn record at the end
    assert with_count_cache(_exact(tiny_tokenizer_dir), tmp_path).count_many(TEXTS) == exact


def test_a_vocabulary_replaced_during_the_run_never_counts_under_the_old_fingerprint(tiny_tokenizer_dir, tmp_path):
    import json

    directory = tmp_path / "tok"
    shutil.copytree(tiny_tokenizer_dir, directory)
    cache = tmp_path / "cache"
    cached = with_count_cache(_exact(directory), cache)  # fingerprint taken; the vocabulary loads lazily
    data = json.loads((directory / "tokenizer.json").read_text())
    data["model"]["merges"] = []  # another vocabulary at the same path, before the first count
    (directory / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(TokenizerError, match="changed during the run"):
        cached.count_many(TEXTS)
    assert not any(path.stat().st_size for path in cache.rglob("*.bin"))  # nothing stored under the old one
    shutil.copy(tiny_tokenizer_dir / "tokenizer.json", directory / "tokenizer.json")
    assert with_count_cache(_exact(directory), cache).count_many(TEXTS) == _exact(tiny_tokenizer_dir).count_many(TEXTS)


def test_records_appended_after_a_write_cut_short_are_still_found(tmp_path):
    path = tmp_path / "s.bin"
    DigestStore(path).put_many({digest_of("before"): 1})
    with path.open("ab") as handle:
        handle.write(b"\x00" * 10)  # a write cut short by a full disk: later records start mid-record
    DigestStore(path).put_many({digest_of(f"after {i}"): i for i in range(5)})
    reopened = DigestStore(path)
    assert reopened.get(digest_of("before")) == 1
    assert [reopened.get(digest_of(f"after {i}")) for i in range(5)] == list(range(5))
    assert len(reopened) == 6


def test_store_round_trip_and_unwritable_directory(tmp_path):
    store = DigestStore(tmp_path / "s.bin")
    store.put_many({digest_of("a"): 1, digest_of("b"): 2**32 - 1})
    reopened = DigestStore(tmp_path / "s.bin")
    assert (reopened.get(digest_of("a")), reopened.get(digest_of("b")), reopened.get(digest_of("c"))) == (1, 2**32 - 1, None)
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    unwritable = DigestStore(blocked / "s.bin")  # cannot be created: values still served from memory
    unwritable.put_many({digest_of("a"): 7})
    assert unwritable.get(digest_of("a")) == 7


def _repo(edit: str = "") -> list[PackInput]:
    files = []
    for i in range(30):
        text = "".join(TRAINING_TEXT[(i + j) % len(TRAINING_TEXT)] for j in range(i % 7 + 1)) + edit * (i == 3)
        files.append(PackInput(f"app/m{i:02}.py", text, "python", digest_of(text).hex()))
    return files


def test_pack_with_the_count_cache_is_identical_to_exact_counting(tiny_tokenizer_dir, tmp_path):
    options = PackOptions(max_model_len=5_000, output_tokens=300, probe_reserve_tokens=64, map_tokens=300)
    exact = _exact(tiny_tokenizer_dir)
    for edit in ("", "order.save()\n"):  # then with one file changed
        repo = _repo(edit)
        baseline = pack(repo, repository="demo", rules=[RULE], tokenizer=exact, options=options)
        store = DigestStore(tmp_path / "relevance.bin")
        for _ in range(2):  # cold, then warm
            cached = with_count_cache(_exact(tiny_tokenizer_dir), tmp_path / "counts")
            result = pack(repo, repository="demo", rules=[RULE], tokenizer=cached, options=options, relevance_cache=store)
            assert len(result.windows) > 1
            assert [w.files for w in result.windows] == [w.files for w in baseline.windows]
            assert [w.prompt for w in result.windows] == [w.prompt for w in baseline.windows]
            assert [w.prompt_tokens for w in result.windows] == [exact.count(w.prompt) for w in baseline.windows]


def test_relevance_cache_follows_content(tmp_path):
    store = DigestStore(tmp_path / "relevance.bin")
    before = _repo()
    after = _repo("order.save()\nsession.commit()\n")
    assert relevance_scores(before, [RULE], store) == relevance_scores(before, [RULE])
    assert relevance_scores(after, [RULE], DigestStore(tmp_path / "relevance.bin")) == relevance_scores(after, [RULE])
    assert relevance_scores(after, [RULE])["app/m03.py"] > relevance_scores(before, [RULE])["app/m03.py"]


def test_estimate_tokenizer_is_not_wrapped(tmp_path):
    estimate = load_tokenizer(TokenizerRequest(tokenizer=None, model=str(tmp_path / "missing"), allow_download=False))
    assert with_count_cache(estimate, tmp_path) is estimate
    assert not isinstance(estimate, CachedCountTokenizer)


def test_a_tokenizers_upgrade_starts_a_fresh_count_cache(tiny_tokenizer_dir, monkeypatch):
    import importlib.metadata

    before = _exact(tiny_tokenizer_dir).fingerprint()
    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "999.0" if name == "tokenizers" else real_version(name)
    )
    assert _exact(tiny_tokenizer_dir).fingerprint() != before


def test_preloading_in_the_background_gives_the_same_counts(tiny_tokenizer_dir, tmp_path):
    expected = _exact(tiny_tokenizer_dir).count_many(TEXTS)
    tokenizer = _exact(tiny_tokenizer_dir)
    tokenizer.preload()
    tokenizer.preload()  # a second call while loading is harmless
    assert tokenizer.count_many(TEXTS) == expected
    broken = tmp_path / "broken"
    shutil.copytree(tiny_tokenizer_dir, broken)
    (broken / "tokenizer.json").write_text("{ not json")
    failing = _exact(broken)  # the vocabulary is read lazily: no error yet
    failing.preload()
    with pytest.raises(TokenizerError, match="cannot load"):
        failing.count("x")
    with pytest.raises(TokenizerError, match="cannot load"):
        failing.count("x")  # and again, not a silent success the second time


def test_prepare_signals_a_change_before_resolving_the_graph(tmp_path):
    from auditor.runs.prepare import prepare_repository

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("def save(order):\n    order.save()\n")
    (repo / "views.py").write_text("from app import save\n\ndef view(o):\n    save(o)\n")
    calls: list[str] = []

    def prepare() -> None:
        prepare_repository(repo, cache_dir=tmp_path / "cache", on_change=lambda: calls.append("changed"))

    prepare()
    assert calls == ["changed"]  # nothing cached yet
    prepare()
    assert calls == ["changed"]  # unchanged: the graph comes from the cache
    (repo / "app.py").write_text("def save(order):\n    order.save()\n    return order\n")
    prepare()
    assert calls == ["changed", "changed"]


def test_store_size_is_bounded_and_values_in_use_survive(tmp_path):
    record = 24
    path = tmp_path / "s.bin"
    store = DigestStore(path, max_bytes=10 * record)
    kept, dropped = digest_of("kept"), digest_of("dropped")
    store.put_many({kept: 1, dropped: 2})
    store.put_many({digest_of(f"filler {i}"): i for i in range(9)})  # passes the limit: a new generation starts
    assert store.previous_path.is_file() and not path.exists()
    reopened = DigestStore(path, max_bytes=10 * record)
    assert reopened.get(kept) == 1  # found in the previous generation: carried into the current one
    reopened.put_many({digest_of(f"more {i}"): i for i in range(10)})  # the next turn drops the rest
    last = DigestStore(path, max_bytes=10 * record)
    assert (last.get(kept), last.get(dropped)) == (1, None)
    assert path.stat().st_size <= 11 * record or not path.exists()
    assert store.previous_path.stat().st_size <= 11 * record


def test_count_caches_are_kept_per_repository(tiny_tokenizer_dir, tmp_path):
    exact = _exact(tiny_tokenizer_dir).count_many(TEXTS)
    one = with_count_cache(_exact(tiny_tokenizer_dir), tmp_path, scope="/repos/one")
    two = with_count_cache(_exact(tiny_tokenizer_dir), tmp_path, scope="/repos/two")
    assert one.count_many(TEXTS) == exact
    assert two.count_many(TEXTS[:2]) == exact[:2]
    assert len(list(tmp_path.rglob("*.bin"))) == 2


def test_least_recently_used_stores_are_removed(tmp_path, monkeypatch):
    import os

    import auditor.storage.digests as digest_store

    monkeypatch.setattr(digest_store, "MAX_STORES", 2)
    for age, name in enumerate(("old", "used", "newer")):
        DigestStore(tmp_path / f"{name}.bin").put_many({digest_of(name): 1})
        os.utime(tmp_path / f"{name}.bin", (1_000_000 + age, 1_000_000 + age))
    DigestStore(tmp_path / "used.bin")  # opening marks it used
    DigestStore(tmp_path / "new.bin").put_many({digest_of("new"): 1})  # a new store prunes the rest
    assert sorted(path.name for path in tmp_path.glob("*.bin")) == ["new.bin", "used.bin"]


def test_threads_counting_at_once_load_the_vocabulary_once(tiny_tokenizer_dir, monkeypatch):
    import threading

    import tokenizers

    expected = _exact(tiny_tokenizer_dir).count_many(TEXTS)
    real_from_buffer = tokenizers.Tokenizer.from_buffer
    loads: list[int] = []

    def counting_from_buffer(data):
        loads.append(1)
        return real_from_buffer(data)

    monkeypatch.setattr(tokenizers.Tokenizer, "from_buffer", counting_from_buffer)
    tokenizer = _exact(tiny_tokenizer_dir)
    tokenizer.preload()
    results: list[list[int]] = []
    threads = [threading.Thread(target=lambda: results.append(tokenizer.count_many(TEXTS))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4
    assert loads == [1]


def test_a_generation_turned_over_by_another_process_is_not_a_write_failure(tmp_path, monkeypatch, caplog):
    import os

    import auditor.storage.digests as digest_store

    store = DigestStore(tmp_path / "s.bin", max_bytes=24)
    real_replace = os.replace

    def raced(source, target):
        real_replace(source, target)  # the other process got there first...
        real_replace(source, target)  # ...so this one finds nothing to move

    monkeypatch.setattr(digest_store.os, "replace", raced)
    with caplog.at_level("WARNING", logger="auditor.storage.digests"):
        store.put_many({digest_of("a"): 1, digest_of("b"): 2})
    monkeypatch.setattr(digest_store.os, "replace", real_replace)
    assert not caplog.records
    store.put_many({digest_of("c"): 3})  # still written
    assert DigestStore(tmp_path / "s.bin", max_bytes=24).get(digest_of("c")) == 3
