"""The replay engine: recorded completions from JSONL files and directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.engine import (
    ChatMessage,
    ChatRequest,
    Completion,
    EngineSettings,
    create_engine,
)
from auditor.engine.replay import (
    ReplayEngine,
    ReplayRecord,
    load_recording,
    write_recording,
)
from auditor.errors import UsageError


def request(rid: str, *, thinking: bool = True, prompt_tokens: int = 77) -> ChatRequest:
    return ChatRequest(
        id=rid,
        messages=(ChatMessage("user", f"audit {rid}"),),
        prompt_tokens=prompt_tokens,
        max_tokens=512,
        thinking=thinking,
    )


def write_jsonl(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records) + "\n")
    return path


def replay(path: Path) -> ReplayEngine:
    return ReplayEngine.from_settings(EngineSettings(replay_path=str(path)))


def test_jsonl_matched_by_request_id(tmp_path: Path) -> None:
    recording = write_jsonl(
        tmp_path / "run.jsonl",
        {
            "request_id": "window-1",
            "text": 'second trace\n</think>\n\n{"findings": [1]}',
            "finish_reason": "stop",
            "prompt_tokens": 123,
            "completion_tokens": 456,
        },
        {
            "request_id": "window-0",
            "reasoning": "first trace",
            "content": '{"findings": []}',
            "finish_reason": "length",
            "cached_prompt_tokens": 64,
        },
    )
    first, second = replay(recording).generate([request("window-0"), request("window-1")])
    assert (first.request_id, first.reasoning, first.text, first.finish_reason) == (
        "window-0",
        "first trace",
        '{"findings": []}',
        "length",
    )
    assert (first.prompt_tokens, first.completion_tokens, first.cached_prompt_tokens) == (77, 0, 64)
    assert (second.request_id, second.reasoning, second.text) == (
        "window-1",
        "second trace",
        '{"findings": [1]}',
    )
    assert (second.prompt_tokens, second.completion_tokens, second.cached_prompt_tokens) == (123, 456, None)
    assert second.error is None


def test_records_without_id_answer_in_order(tmp_path: Path) -> None:
    recording = write_jsonl(
        tmp_path / "run.jsonl",
        {"text": "</think>one"},
        {"request_id": "named", "text": "</think>named answer"},
        {"text": "</think>two"},
    )
    engine = replay(recording)
    completions = engine.generate([request("x"), request("named"), request("y"), request("z")])
    assert [c.text for c in completions] == ["one", "named answer", "two", ""]
    assert completions[3].finish_reason == "error"
    assert completions[3].error == "no recorded completion for z"
    assert [r.id for r in engine.history] == ["x", "named", "y", "z"]


def test_missing_recording_is_an_error_completion(tmp_path: Path) -> None:
    recording = write_jsonl(tmp_path / "run.jsonl", {"request_id": "window-0", "text": "ok"})
    ok, missing = replay(recording).generate([request("window-0"), request("window-3")])
    assert ok.finish_reason == "stop" and ok.error is None
    assert missing.finish_reason == "error"
    assert missing.error == "no recorded completion for window-3"
    assert missing.prompt_tokens == 77


def test_directory_with_text_files_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "window-0.txt").write_text('reading orders.py\n</think>\n{"findings": []}')
    (tmp_path / "window-1.txt").write_text("a trace cut off by the budget")
    (tmp_path / "window-1.json").write_text(json.dumps({"finish_reason": "length", "completion_tokens": 512}))
    write_jsonl(tmp_path / "more.jsonl", {"request_id": "window-2", "text": "t</think>from jsonl"})
    (tmp_path / "notes.md").write_text("ignored")
    first, second, third = replay(tmp_path).generate(
        [request("window-0"), request("window-1"), request("window-2")]
    )
    assert (first.reasoning, first.text, first.finish_reason) == (
        "reading orders.py",
        '{"findings": []}',
        "stop",
    )
    # thinking was on and the budget ran out before </think>: the whole text is the trace
    assert (second.reasoning, second.text, second.finish_reason) == (
        "a trace cut off by the budget",
        "",
        "length",
    )
    assert second.completion_tokens == 512
    assert third.text == "from jsonl"


def test_finished_raw_text_without_close_tag_is_an_unclosed_trace_when_thinking(tmp_path: Path) -> None:
    # The model stopped without closing its trace: a draft in it must not pass as the answer.
    draft = 'maybe {"findings": [{"rule": "x"}]} then check views.py'
    recording = write_jsonl(tmp_path / "run.jsonl", {"request_id": "w", "text": draft, "finish_reason": "stop"})
    [completion] = replay(recording).generate([request("w")])
    assert (completion.reasoning, completion.text) == (draft, "")


def test_raw_text_without_thinking_is_the_answer(tmp_path: Path) -> None:
    recording = write_jsonl(
        tmp_path / "run.jsonl", {"request_id": "w", "text": '{"findings": [', "finish_reason": "length"}
    )
    [completion] = replay(recording).generate([request("w", thinking=False)])
    assert (completion.reasoning, completion.text) == ("", '{"findings": [')


def test_write_recording_round_trips(tmp_path: Path) -> None:
    requests = [request("window-0"), request("window-1")]
    completions = [
        Completion(
            "window-0",
            text='{"findings": []}',
            reasoning="trace",
            finish_reason="stop",
            prompt_tokens=10,
            completion_tokens=20,
            cached_prompt_tokens=8,
        ),
        Completion(
            "window-1",
            text="",
            reasoning="",
            finish_reason="error",
            prompt_tokens=77,
            completion_tokens=0,
            error="server down",
        ),
    ]
    path = write_recording(tmp_path / "out" / "recording.jsonl", requests, completions)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {
        "request_id": "window-0",
        "reasoning": "trace",
        "content": '{"findings": []}',
        "finish_reason": "stop",
        "prompt_tokens": 10,
        "completion_tokens": 20,
        "cached_prompt_tokens": 8,
    }
    assert list(json.loads(lines[0])) == sorted(json.loads(lines[0]))
    assert replay(path).generate(requests) == completions


def test_write_recording_checks_pairing(tmp_path: Path) -> None:
    completion = Completion(
        "other", text="", reasoning="", finish_reason="stop", prompt_tokens=0, completion_tokens=0
    )
    with pytest.raises(ValueError):
        write_recording(tmp_path / "r.jsonl", [request("window-0")], [completion])
    with pytest.raises(ValueError):
        write_recording(tmp_path / "r.jsonl", [request("window-0")], [])


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"request_id": "a", "text": "ok"}\n{not json\n')
    with pytest.raises(UsageError, match=r"bad\.jsonl:2"):
        load_recording(path)


def test_record_without_text_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", {"request_id": "a", "finish_reason": "stop"})
    with pytest.raises(UsageError, match='needs "text" or "content"'):
        load_recording(path)


def test_bad_token_count_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", {"request_id": "a", "text": "x", "prompt_tokens": "many"})
    with pytest.raises(UsageError, match="prompt_tokens"):
        load_recording(path)


def test_duplicate_request_ids_are_rejected(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "r.jsonl", {"request_id": "a", "text": "x"}, {"request_id": "a", "text": "y"}
    )
    with pytest.raises(UsageError, match="two recorded completions"):
        replay(path)


def test_missing_or_empty_recording(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        replay(tmp_path / "nope.jsonl")
    with pytest.raises(UsageError, match="no recorded completions"):
        replay(tmp_path)
    with pytest.raises(UsageError, match="--replay"):
        ReplayEngine.from_settings(EngineSettings())


def test_an_empty_jsonl_file_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(UsageError, match="no recorded completions"):
        replay(empty)


def test_undecodable_recordings_are_usage_errors(tmp_path: Path) -> None:
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'\xff\xfe{"text": "x"}\n')
    with pytest.raises(UsageError, match="cannot read"):
        replay(binary)
    directory = tmp_path / "dir"
    directory.mkdir()
    (directory / "window-0.txt").write_bytes(b"\xff answer")
    with pytest.raises(UsageError, match="cannot read"):
        replay(directory)


def test_created_through_the_registry(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", {"request_id": "w", "text": "</think>hello"})
    engine = create_engine("replay", EngineSettings(replay_path=str(path)))
    assert engine.generate([request("w")])[0].text == "hello"


def test_identity_follows_the_recording(tmp_path: Path) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", {"request_id": "w", "text": "hello"})
    two = write_jsonl(tmp_path / "two.jsonl", {"request_id": "w", "text": "goodbye"})
    assert replay(one).identity() == replay(one).identity()
    assert replay(one).identity() != replay(two).identity()


def test_enqueue_states_what_the_model_said() -> None:
    engine = ReplayEngine()
    engine.enqueue(ReplayRecord(request_id=None, text="t</think>first"))
    engine.enqueue(ReplayRecord(request_id=None, text="second", finish_reason="length"))
    first, second = engine.generate([request("a"), request("b", thinking=False)])
    assert (first.reasoning, first.text) == ("t", "first")
    assert (second.text, second.finish_reason) == ("second", "length")
    assert engine.history == [request("a"), request("b", thinking=False)]


def test_a_recording_nested_too_deeply_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    recording = tmp_path / "deep.jsonl"
    recording.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match="nested too deeply"):
        load_recording(recording)


def test_an_answer_quoting_the_close_tag_replays_whole(tmp_path: Path) -> None:
    answer = '{"findings": [], "probes": [{"id": "p", "answer": "</think>"}]}'
    recording = tmp_path / "r.jsonl"
    recording.write_text(json.dumps({"request_id": "window-0", "text": "trace</think>" + answer}) + "\n", encoding="utf-8")
    engine = ReplayEngine(load_recording(recording))
    [completion] = engine.generate([ChatRequest(id="window-0", messages=(), prompt_tokens=1, max_tokens=8)])
    assert completion.reasoning == "trace"
    assert completion.text == answer
