"""What the suite shares, in one place: where things are (the repository, its fixtures, the
test data, ../shared), the text the test tokenizer is trained on, a mock engine tests script
(llm's MockModel: say what the model answers, then assert what auditor did with it) and one
way to run git.

The tests mirror the package: ``tests/unit/<stage>/`` holds a stage's tests, ``tests/unit/``
the whole-package ones (architecture, exit codes), ``tests/hostile/`` the hostile-input
suite across stages, ``tests/real_vllm/`` the real-engine tests (run apart, see .ci/run)."""

from __future__ import annotations

import json
import shutil
import socket
import socketserver
import subprocess
import textwrap
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from auditor.analysis.transactions import StaticResult, TxOptions, analyze_tx_outside_transaction
from auditor.config.scan import ScanConfig
from auditor.engine.base import (
    ChatMessage,
    ChatRequest,
    Completion,
    EngineSettings,
    error_completion,
)
from auditor.findings.model import Finding
from auditor.index.extract import index_source
from auditor.index.model import FileIndex
from auditor.languages import language_for_path
from auditor.progress import ProgressCallback, no_progress
from auditor.report import render
from auditor.rules.loader import Rule, builtin_rules
from auditor.runs.scan import run_scan

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "fixtures"
SHOWN = frozenset({"critical", "high"})
"""The severities the CLI shows by default: a finding in one is not demoted (which of the two
is the impact's call, auditor.analysis.transactions.assessment.shown_severity)."""
TEST_DATA = REPO_ROOT / "tests" / "data"
SHARED = REPO_ROOT.parent / "shared"


class Failure(str):
    """An answer that is an engine error with this message (e.g. a lost GPU worker)."""


Answer = str | Callable[[ChatRequest], str]


class MockEngine:
    """An engine whose answers a test states: ``enqueue`` answers (text, or a function of the
    request) taken in order, else ``default``; ``fail`` makes every request an error
    completion (an answer of type ``Failure`` fails just its request); ``history`` keeps
    every request and ``calls`` the size of every batch."""

    def __init__(self, default: Answer = '{"findings": []}', *, name: str = "mock", identity: str = "mock:model",
                 fail: str | None = None, completion_tokens: int = 7) -> None:
        self.name = name
        self._identity = identity
        self.default = default
        self.fail = fail
        self.completion_tokens = completion_tokens
        self._queue: deque[Answer] = deque()
        self.history: list[ChatRequest] = []
        self.calls: list[int] = []

    def enqueue(self, *answers: Answer) -> MockEngine:
        """Answer the next requests with ``answers``, in order."""
        self._queue.extend(answers)
        return self

    def identity(self) -> str:
        return self._identity

    def generate(self, requests: Sequence[ChatRequest], progress: ProgressCallback = no_progress) -> list[Completion]:
        self.calls.append(len(requests))
        completions = []
        for request in requests:
            self.history.append(request)
            if self.fail is not None:
                completions.append(error_completion(request, self.fail))
                continue
            answer = self._queue.popleft() if self._queue else self.default
            text = answer(request) if callable(answer) else answer
            if isinstance(text, Failure):
                completions.append(error_completion(request, str(text)))
                continue
            completions.append(Completion(request.id, text, "", "stop", request.prompt_tokens, self.completion_tokens))
        return completions


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity and default branch; its stdout, stripped."""
    completed = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main",
         "-c", "commit.gpgsign=false", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    )
    return completed.stdout.strip()


def write_source(repo: Path, path: str, text: str) -> None:
    """Write ``text`` (dedented) to ``repo/path``, making its directories."""
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def commit_all(repo: Path, message: str) -> str:
    """Commit everything in ``repo``; the new commit's hash."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


# vllm.LLM keyword arguments auditor may pass (FACTS.md, vLLM 0.33.0 offline API).
VLLM_LLM_KWARGS = {
    "model",
    "trust_remote_code",
    "max_model_len",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "kv_cache_dtype",
    "mamba_ssm_cache_dtype",
    "enable_prefix_caching",
    "gpu_memory_utilization",
    "max_num_seqs",
    "tensor_parallel_size",
    "seed",
    "reasoning_parser",
    "structured_outputs_config",
}

# Nemotron 3 Nano's special-token layout: ids 0-13 as in the real vocabulary.
SPECIAL_TOKENS = [
    "<unk>", "<s>", "</s>", "<SPECIAL_3>", "<SPECIAL_4>", "<SPECIAL_5>", "<SPECIAL_6>", "<SPECIAL_7>",
    "<SPECIAL_8>", "[TOOL_CALLS]", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
]

# Same turn format as the upstream template: a system turn always, and the thinking switch
# in the generation prompt.
CHAT_TEMPLATE = (
    "{%- set enable_thinking = enable_thinking if enable_thinking is defined else True %}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system = messages[0]['content'] %}"
    "{%- set rest = messages[1:] %}{%- else %}{%- set system = '' %}{%- set rest = messages %}{%- endif %}"
    "{{- '<|im_start|>system\\n' ~ system ~ '<|im_end|>\\n' }}"
    "{%- for m in rest %}{{- '<|im_start|>' ~ m['role'] ~ '\\n' ~ m['content'] ~ '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{%- if enable_thinking %}{{- '<|im_start|>assistant\\n<think>\\n' }}"
    "{%- else %}{{- '<|im_start|>assistant\\n<think></think>' }}{%- endif %}{%- endif %}"
)

TRAINING_TEXT = [
    "def save_order(order):\n    order.save()\n    return order\n",
    "from django.db import transaction\n\n@transaction.atomic\ndef checkout(request):\n    pass\n",
    "class OrderService:\n    def create(self, session, item):\n        session.add(item)\n        session.commit()\n",
    "function handler(req, res) { return db.query('INSERT INTO t VALUES (1)'); }\n",
    "func main() { db.Exec(\"UPDATE accounts SET balance = 0\") }\n",
    "public class A { @Transactional public void run() { repo.save(x); } }\n",
    "<<<FILE path=\"app/views.py\" view=full lines=1-10/10>>>\n1|import os\n2|\n<<<END FILE \"app/views.py\">>>\n",
    "You are auditor. Report only what you can trace. Repository map, findings, chain, sink.\n",
] * 20


def build_tiny_tokenizer(directory: Path) -> Path:
    """Train a byte-level BPE with Nemotron's special tokens and save it as an HF tokenizer dir."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="<|im_end|>", unk_token="<unk>", pad_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    directory.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(directory))
    return directory


# --- the static tx-outside-transaction pass on fixture apps and inline sources -------------


def load_app(root: Path) -> tuple[dict[str, FileIndex], dict[str, str]]:
    """Index every source file under ``root`` (paths relative to it) and read its text."""
    indexes: dict[str, FileIndex] = {}
    texts: dict[str, str] = {}
    for file in sorted(root.rglob("*")):
        language = language_for_path(file.name) if file.is_file() else None
        if language is None:
            continue
        path = file.relative_to(root).as_posix()
        texts[path] = file.read_text(encoding="utf-8")
        indexes[path] = index_source(path, texts[path], language)
    return indexes, texts


ALL_SEVERITIES = TxOptions(min_severity="low")


def packing_rule(rule_id: str = "tx-outside-transaction") -> Rule:
    """A built-in rule with its patterns and a body of fixed length: windows packed with it
    in a tight test budget do not move when the rule's text is edited, so a test of the
    packer or a cache asserts their behaviour, not the rule's byte count."""
    return replace(builtin_rules()[rule_id], body="Report each sequence of database writes an entry point reaches with no transaction around it.\n")


def analyze_app(app: str, rule: Rule, options: TxOptions = ALL_SEVERITIES) -> StaticResult:
    """The static pass on the bundled fixture app ``fixtures/<app>``."""
    indexes, texts = load_app(FIXTURES / app)
    return analyze_tx_outside_transaction(indexes, texts, rule, options=options)


def analyze_source(files: dict[str, str], rule: Rule, options: TxOptions = ALL_SEVERITIES) -> StaticResult:
    """The static pass on inline sources (``{path: text}``, dedented)."""
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    indexes = {path: index_source(path, text, language_for_path(path) or "") for path, text in texts.items()}
    return analyze_tx_outside_transaction(indexes, texts, rule, options=options)


def reported(result: StaticResult) -> dict[tuple[str, str], Finding]:
    """A result's findings by (path, function)."""
    return {(finding.path, finding.function): finding for finding in result.findings}


# --- moved from tests/hostile/test_hostile_engine.py (shared with other test modules) ---


Behaviour = Callable[[socket.socket, "Exchange"], None]


@dataclass
class Exchange:
    """One request as the hostile server read it, and how many it has answered so far."""

    path: str
    body: bytes
    attempt: int
    stop: threading.Event


def _read_request(conn: socket.socket) -> tuple[str, str, bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return method, path, body


def http_response(status: int, body: bytes, *, content_type: str = "application/json", headers: dict[str, str] | None = None, length: int | None = None) -> bytes:
    reason = {200: "OK", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}.get(status, "Status")
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}", f"Content-Length: {len(body) if length is None else length}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


MODELS = http_response(200, json.dumps({"object": "list", "data": [{"id": "hostile-model", "root": "/models/hostile"}]}).encode())


class HostileServer:
    """A TCP server answering GET /models normally and each chat request with ``behaviour``."""

    def __init__(self) -> None:
        self.behaviour: Behaviour = lambda conn, exchange: conn.sendall(http_response(200, chat(ANSWER)))
        self.attempts = 0
        self.stop = threading.Event()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn: socket.socket = self.request
                try:
                    request = _read_request(conn)
                    if request is None:
                        return
                    _, path, body = request
                    if path.endswith("/models"):
                        conn.sendall(MODELS)
                        return
                    owner.attempts += 1
                    owner.behaviour(conn, Exchange(path, body, owner.attempts, owner.stop))
                except OSError:
                    pass  # the client gave up (deadline, cancel): that is the point

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


ANSWER = '{"findings": [], "probes": []}'


def chat(content: Any, *, finish_reason: Any = "stop", message: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {
        "id": "x",
        "choices": [{"index": 0, "message": message if message is not None else {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    body.update(extra or {})
    return json.dumps(body).encode()


def request(thinking: bool = False) -> ChatRequest:
    return ChatRequest(id="window-0", messages=(ChatMessage("user", "audit"),), prompt_tokens=5, max_tokens=64, thinking=thinking)


def drip(data: bytes, interval_s: float) -> Behaviour:
    def behave(conn: socket.socket, exchange: Exchange) -> None:
        for byte in data:
            if exchange.stop.is_set():
                return
            conn.sendall(bytes([byte]))
            time.sleep(interval_s)

    return behave


# --- moved from tests/unit/runs/test_many.py (shared with other test modules) ---


MANY_FIXTURES = ("django_shop", "flask_ledger", "go_inventory")


FORMATS = {"json": "report.json", "sarif": "report.sarif", "markdown": "report.md"}


EMPTY_ANSWER = '</think>\n{"findings": [], "probes": []}'


def django_answer() -> str:
    return (REPO_ROOT / "fixtures/recorded/django_shop/trace_answer/window-0.txt").read_text(encoding="utf-8")


def copy_fixtures(root: Path, names: Sequence[str] = MANY_FIXTURES) -> Path:
    """Copies of the fixture repositories under ``root/repos``."""
    repos = root / "repos"
    for name in names:
        shutil.copytree(REPO_ROOT / "fixtures" / name, repos / name)
    return repos


def answers() -> dict[str, str]:
    """What the model 'said' for window 0 of each fixture."""
    return {"django_shop": django_answer(), "flask_ledger": EMPTY_ANSWER, "go_inventory": EMPTY_ANSWER}


def write_recording(path: Path, ids: dict[str, str]) -> Path:
    """A replay JSONL: request id -> raw model output."""
    lines = [json.dumps({"request_id": rid, "text": text, "completion_tokens": 11}) for rid, text in sorted(ids.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def template(tokenizer_dir: Path, engine: str = "replay", replay: Path | None = None) -> ScanConfig:
    return ScanConfig(
        root=Path("."),
        engine=engine,
        engine_settings=EngineSettings(replay_path=str(replay) if replay else None),
        tokenizer=str(tokenizer_dir),
        use_cache=False,
        rules=("tx-outside-transaction",),
        probes=0,  # the recordings answer no canaries (fixtures/recorded/README.md)
    )


def single_scan_reports(repo: Path, tokenizer_dir: Path, recording: Path) -> dict[str, str]:
    """What three separate `auditor scan` runs give: run_scan + render per format."""
    config = ScanConfig(
        root=repo,
        engine="replay",
        engine_settings=EngineSettings(replay_path=str(recording)),
        tokenizer=str(tokenizer_dir),
        use_cache=False,
        rules=("tx-outside-transaction",),
        probes=0,  # the recordings answer no canaries (fixtures/recorded/README.md)
    )
    result = run_scan(config)
    return {name: render(result, fmt) for fmt, name in FORMATS.items()}


def many_reports(out: Path, key: str) -> dict[str, str]:
    return {name: (out / "repos" / key / name).read_text(encoding="utf-8") for name in FORMATS.values()}


def expected_single_reports(tmp_path: Path, repos: Path, tokenizer_dir: Path) -> dict[str, dict[str, str]]:
    expected = {}
    for name, text in answers().items():
        recording = write_recording(tmp_path / f"single-{name}.jsonl", {"window-0": text})
        expected[name] = single_scan_reports(repos / name, tokenizer_dir, recording)
    return expected


def many_recording(tmp_path: Path) -> Path:
    return write_recording(tmp_path / "many.jsonl", {f"{key}/window-0": text for key, text in answers().items()})


def index(out: Path) -> dict:
    return json.loads((out / "index.json").read_text(encoding="utf-8"))


def stepping_clock(durations):
    """A fake clock for per-file deadlines: each timed step (a start read, then an end read)
    takes the next of ``durations`` seconds, 0 once they run out."""
    now = [0.0]
    starts = [True]

    def tick() -> float:
        if not starts[0]:
            now[0] += next(durations, 0.0)
        starts[0] = not starts[0]
        return now[0]

    return tick
