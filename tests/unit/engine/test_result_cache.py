"""The result cache: a re-run on unchanged windows never reaches the engine."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from auditor.analysis.transactions import TxOptions
from auditor.engine.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    Engine,
    error_completion,
)
from auditor.engine.replay import ReplayEngine, ReplayRecord
from auditor.engine.result_cache import (
    RESULT_CACHE_VERSION,
    CachingEngine,
    default_result_cache_dir,
    request_key,
)
from auditor.pack.packer import PackOptions
from auditor.progress import ProgressCallback, no_progress
from auditor.runs.prepare import pack_prepared, prepare_repository, run_static_pass
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer
from tests.support import packing_rule

RULE = packing_rule()  # its windows do not move when the rule text is edited
ANSWER = json.dumps({"findings": [], "probes": []})


class ScriptedEngine:
    """Answers every request with an empty findings list, or an error when told to; counts calls."""

    name = "scripted"

    def __init__(self, identity: str = "scripted:model-a", fail: bool = False) -> None:
        self._identity = identity
        self.fail = fail
        self.calls: list[list[str]] = []

    def identity(self) -> str:
        return self._identity

    def generate(self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress) -> list[Completion]:
        self.calls.append([request.id for request in requests])
        if self.fail:
            return [error_completion(request, "server returned 503") for request in requests]
        return [
            Completion(request.id, ANSWER, "thought about it", "stop", request.prompt_tokens, 7, cached_prompt_tokens=3)
            for request in requests
        ]


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir):
    return load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))


def write_repository(root: Path) -> None:
    """Six views of different sizes, each writing twice outside a transaction: six chains,
    packed in several windows (windows are planned by chain cost, largest first)."""
    for number in range(6):
        body = "".join(f"        value_{line} = compute({line}, 'text')\n" for line in range(30 + 8 * number))
        (root / "app").mkdir(parents=True, exist_ok=True)
        (root / "app" / f"module_{number}.py").write_text(
            f"from django.views import View\n\n\nclass Handler{number}(View):\n    def post(self, request):\n{body}"
            "        order = Order.objects.create(total=1)\n        Payment.objects.create(order=order)\n",
            encoding="utf-8",
        )


def window_requests(root: Path, tokenizer) -> list[ChatRequest]:
    """The requests a scan sends for ``root``: one per packed window, as run_scan builds them."""
    prepared = prepare_repository(root, use_cache=False)
    options = PackOptions(max_model_len=8_000, output_tokens=300, probe_reserve_tokens=64, map_tokens=300)
    static = run_static_pass(prepared, (RULE,), TxOptions())
    packed = pack_prepared(prepared, rules=(RULE,), tokenizer=tokenizer, options=options, static=static)
    return [
        ChatRequest(
            id=f"window-{window.index}",
            messages=tuple(ChatMessage(m.role, m.content) for m in window.messages),
            prompt_tokens=window.prompt_tokens,
            max_tokens=options.output_tokens,
            thinking=options.thinking,
            json_schema='{"type":"object"}',
        )
        for window in packed.windows
    ]


def test_second_identical_run_is_answered_from_the_cache(tmp_path: Path, tokenizer):
    root = tmp_path / "repo"
    write_repository(root)
    requests = window_requests(root, tokenizer)
    assert len(requests) >= 2
    replay = ReplayEngine([ReplayRecord(request_id=r.id, text=f"trace\n</think>\n{ANSWER}") for r in requests])
    first = CachingEngine(replay, tmp_path / "cache").generate(requests)
    assert len(replay.history) == len(requests)

    engine = CachingEngine(replay, tmp_path / "cache")
    assert isinstance(engine, Engine)
    second = engine.generate(window_requests(root, tokenizer))
    assert len(replay.history) == len(requests)  # the engine was not called again
    assert second == first
    assert (engine.last_stats.hits, engine.last_stats.misses) == (len(requests), 0)


def test_a_one_line_change_in_a_packed_file_misses_only_its_window(tmp_path: Path, tokenizer):
    root = tmp_path / "repo"
    write_repository(root)
    engine = ScriptedEngine()
    cached = CachingEngine(engine, tmp_path / "cache")
    before = window_requests(root, tokenizer)
    cached.generate(before)

    target = root / "app" / "module_3.py"
    target.write_text(target.read_text(encoding="utf-8").replace("value_7 = compute(7,", "value_7 = compute(777,"), encoding="utf-8")
    after = window_requests(root, tokenizer)
    completions = cached.generate(after)

    # A miss is a window whose messages no earlier request had; the rest are hits.
    sent_before = {tuple(m.content for m in r.messages) for r in before}
    changed = [r.id for r in after if tuple(m.content for m in r.messages) not in sent_before]
    carrying = [r.id for r in after if any("compute(777," in m.content for m in r.messages)]
    assert carrying and set(carrying) <= set(changed) and len(changed) < len(after)
    assert engine.calls[1] == changed  # only the windows whose text changed went to the engine
    assert (cached.last_stats.hits, cached.last_stats.misses) == (len(after) - len(changed), len(changed))
    assert [c.request_id for c in completions] == [r.id for r in after]


def test_a_hit_answers_under_the_current_request_id(tmp_path: Path):
    engine = ScriptedEngine()
    cached = CachingEngine(engine, tmp_path)
    request = ChatRequest("window-3", (ChatMessage("user", "audit this"),), 10, 100)
    cached.generate([request])
    moved = ChatRequest("window-2", request.messages, 10, 100)
    [answer] = cached.generate([moved])
    assert answer.request_id == "window-2" and answer.text == ANSWER and len(engine.calls) == 1
    assert (answer.reasoning, answer.completion_tokens, answer.cached_prompt_tokens) == ("thought about it", 7, 3)


@pytest.mark.parametrize(
    "changed",
    [
        {"max_tokens": 200},
        {"thinking": False},
        {"json_schema": '{"type":"array"}'},
        {"messages": (ChatMessage("user", "audit this!"),)},
    ],
)
def test_every_output_changing_field_is_part_of_the_key(tmp_path: Path, changed):
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100, True, '{"type":"object"}')
    fields = {**request.__dict__, **changed}
    assert request_key("m", ChatRequest(**fields)) != request_key("m", request)
    assert request_key("other-model", request) != request_key("m", request)
    assert request_key("m", ChatRequest("other-id", request.messages, 99, 100, True, '{"type":"object"}')) == request_key("m", request)


def test_another_engine_identity_does_not_reuse_entries(tmp_path: Path):
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100)
    first, second = ScriptedEngine("scripted:model-a"), ScriptedEngine("scripted:model-b")
    CachingEngine(first, tmp_path).generate([request])
    CachingEngine(second, tmp_path).generate([request])
    assert len(first.calls) == len(second.calls) == 1


def test_corrupt_entry_is_ignored_and_rewritten(tmp_path: Path):
    engine = ScriptedEngine()
    cached = CachingEngine(engine, tmp_path)
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100)
    cached.generate([request])
    entry = cached.cache.entry_path(request_key(engine.identity(), request))
    entry.write_text('{"version": 1, "key": "trunc', encoding="utf-8")

    [answer] = cached.generate([request])
    assert answer.text == ANSWER and len(engine.calls) == 2
    assert cached.cache.get(request_key(engine.identity(), request), "w").text == ANSWER
    cached.generate([request])
    assert len(engine.calls) == 2
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".tmp-")]  # no temporary files left


def test_failed_completions_are_not_cached(tmp_path: Path):
    engine = ScriptedEngine(fail=True)
    cached = CachingEngine(engine, tmp_path)
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100)
    [first] = cached.generate([request])
    assert first.error == "server returned 503"
    engine.fail = False
    [second] = cached.generate([request])
    assert second.error is None and len(engine.calls) == 2


@pytest.mark.parametrize("finish_reason", ["length", "repetition", "abort", "", "unknown", "content_filter"])
def test_cut_off_answers_are_not_cached(tmp_path: Path, finish_reason: str):
    # A truncated answer is an incomplete window: a re-run must ask the engine again,
    # never replay the failure from the cache.
    class CutOff(ScriptedEngine):
        def generate(self, requests, progress=no_progress):  # type: ignore[no-untyped-def]
            self.calls.append([request.id for request in requests])
            return [Completion(r.id, '{"findings": [', "t", finish_reason, 10, 100) for r in requests]

    engine = CutOff()
    cached = CachingEngine(engine, tmp_path)
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100)
    cached.generate([request])
    [again] = cached.generate([request])
    assert again.finish_reason == finish_reason and len(engine.calls) == 2
    assert cached.last_stats.hits == 0


def test_default_directory_sits_next_to_the_index_cache(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path))
    assert default_result_cache_dir() == tmp_path / "results" / f"v{RESULT_CACHE_VERSION}"


def test_answers_returned_out_of_order_are_stored_under_their_own_requests(tmp_path: Path):
    class Reversing(ScriptedEngine):
        def generate(self, requests, progress=no_progress):
            return [
                Completion(request.id, json.dumps({"findings": [], "probes": [], "for": request.id}), "", "stop", 1, 1)
                for request in reversed(requests)
            ][:-1]  # answers backwards and drops the first request's answer

    requests = [ChatRequest(f"window-{i}", (ChatMessage("user", f"audit {i}"),), 10, 100) for i in range(3)]
    answers = CachingEngine(Reversing(), tmp_path).generate(requests)
    assert [json.loads(a.text)["for"] for a in answers[1:]] == ["window-1", "window-2"]
    assert answers[0].error and "no completion" in answers[0].error
    again = CachingEngine(ScriptedEngine(fail=True), tmp_path).generate(requests)  # hits come from the cache
    assert [json.loads(a.text)["for"] for a in again[1:]] == ["window-1", "window-2"]


class _Answering(ScriptedEngine):
    """Answers every request with ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def generate(self, requests, progress=no_progress):  # type: ignore[no-untyped-def]
        self.calls.append([request.id for request in requests])
        return [Completion(r.id, self.text, "", "stop", 10, 100) for r in requests]


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_answers_are_not_cached(tmp_path: Path, text: str):
    engine = _Answering(text)
    cached = CachingEngine(engine, tmp_path)
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100)
    cached.generate([request])
    cached.generate([request])
    assert len(engine.calls) == 2 and cached.last_stats.hits == 0


def test_every_flipped_byte_of_an_entry_is_a_miss_never_a_changed_answer(tmp_path: Path):
    # One flipped byte in an unsealed JSON entry could turn `"line": 12` into `"line": 13`:
    # sealed entries make every single-byte change a miss, answered afresh.
    engine = _Answering(json.dumps({"findings": [{"line": 12}], "probes": []}))
    cached = CachingEngine(engine, tmp_path)
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100)
    cached.generate([request])
    key = request_key(engine.identity(), request)
    entry = cached.cache.entry_path(key)
    original = entry.read_bytes()
    for position in range(len(original)):
        damaged = bytearray(original)
        damaged[position] ^= 0x01
        entry.write_bytes(bytes(damaged))
        assert cached.cache.get(key, "w") is None, position
    entry.write_bytes(original[: len(original) // 2])
    assert cached.cache.get(key, "w") is None


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory", "dev-zero"])
def test_anything_but_a_regular_file_in_place_of_an_entry_is_a_miss(tmp_path: Path, kind: str):
    import os

    engine = ScriptedEngine()
    cached = CachingEngine(engine, tmp_path / "cache")
    request = ChatRequest("w", (ChatMessage("user", "audit this"),), 10, 100)
    key = request_key(engine.identity(), request)
    entry = cached.cache.entry_path(key)
    entry.parent.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("not a cache entry", encoding="utf-8")
    if kind == "symlink":
        entry.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(entry)
    elif kind == "directory":
        entry.mkdir()
    else:
        entry.symlink_to("/dev/zero")
    [answer] = cached.generate([request])
    assert answer.text == ANSWER and len(engine.calls) == 1
    assert outside.read_text(encoding="utf-8") == "not a cache entry"
