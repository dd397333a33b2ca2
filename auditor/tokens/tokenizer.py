"""Tokens: load the model's tokenizer and chat template, and count prompts exactly.

Counts are of the final prompt as the chat template renders it (system turn, user turn,
generation prompt with ``enable_thinking`` on or off), tokenized without adding special
tokens — the same ``len(prompt_token_ids)`` vLLM computes for ``LLM.chat``.

Sources, in order: ``--tokenizer DIR``; ``--model DIR_OR_ID`` (a checkpoint directory, or an
HF id resolved in the local Hugging Face cache); the Nemotron 3 Nano ids in the local cache;
a hub download of the tokenizer files only (when the network allows). With no tokenizer at
all, an estimate with a safety margin is used and labelled as such (``exact`` is False).

``tokenizers.Tokenizer`` plus a jinja2 rendering of the checkpoint's template gives the same
ids as ``transformers.AutoTokenizer`` without its 1.6 s import; tests check the equality.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from auditor.engine.base import ChatMessage
from auditor.errors import TokenizerError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from auditor.storage.digests import DigestStore

DEFAULT_MODEL_IDS = (
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")

# Estimate mode: bytes per token assumed when no tokenizer is available. Code under a
# 131K-id byte-level BPE runs at ~3.3-4 bytes/token, and auditor's line-number prefixes are
# denser (empty-file headers ~2.3 bytes/token on the stand-in); 2.0 bytes/token over-counts by a safety margin so an estimated window never
# overflows the real one.
ESTIMATE_BYTES_PER_TOKEN = 2.0


# One chat turn is one type everywhere: the prompt the packer counts is the request the engine sends.
Message = ChatMessage


@dataclass(frozen=True)
class TokenizerInfo:
    """Where the tokenizer came from and whether its counts are exact."""

    source: str
    exact: bool
    chat_template: str

    def describe(self) -> str:
        """A one-line description for reports ("exact (tokenizer-dir:/x)" or "ESTIMATE ...")."""
        if self.exact:
            return f"exact ({self.source})"
        return f"ESTIMATE ({self.source}): counts are approximate, over-counted by a safety margin"


class PromptTokenizer(Protocol):
    """What the packer needs from a tokenizer: counts and the chat-template rendering."""

    info: TokenizerInfo

    def count(self, text: str) -> int:
        """Tokens in ``text`` with no special tokens added (special-token text is recognised)."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``count`` for each text, possibly in parallel."""
        ...

    def render(self, messages: Sequence[Message], *, thinking: bool) -> str:
        """The prompt string the chat template produces, with the generation prompt."""
        ...

    def preload(self) -> None:
        """Prepare to count soon (e.g. load a vocabulary in the background); may do nothing."""
        ...

    def prompt_fingerprint(self) -> str:
        """A digest of everything the counts and the rendered prompts depend on (vocabulary,
        library version, chat template, special tokens, the source as reports name it)."""
        ...


def _raise_exception(message: str) -> None:
    raise TokenizerError(f"chat template error: {message}")


def _tojson(value: object, ensure_ascii: bool = False, indent: int | None = None, separators=None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class ChatTemplate:
    """A checkpoint's jinja2 chat template, compiled (on first use) the way Hugging Face renders it.

    The template is untrusted text from a checkpoint, so it runs in jinja2's immutable
    sandbox, with the same options and helpers transformers provides (trim/lstrip blocks,
    loop controls, ``tojson``, ``raise_exception``, ``strftime_now``).
    """

    def __init__(self, source: str, special_tokens: dict[str, str]):
        self._source = source
        self._special_tokens = dict(special_tokens)
        self._compiled = None  # compiled on first render: a memoized pack renders nothing

    def _template(self):  # -> jinja2.Template
        if self._compiled is None:
            from jinja2.ext import loopcontrols
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
            environment.filters["tojson"] = _tojson
            environment.globals["raise_exception"] = _raise_exception
            environment.globals["strftime_now"] = _strftime_now
            try:
                self._compiled = environment.from_string(self._source)
            except Exception as exc:  # jinja2.TemplateSyntaxError and friends
                raise TokenizerError(f"chat template does not compile: {exc}") from exc
        return self._compiled

    def render(self, messages: Sequence[Message], *, thinking: bool) -> str:
        """Render with the generation prompt and ``enable_thinking`` set."""
        return self._template().render(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            tools=None,
            documents=None,
            add_generation_prompt=True,
            enable_thinking=thinking,
            **self._special_tokens,
        )


def render_chatml(messages: Sequence[Message], *, thinking: bool) -> str:
    """Nemotron 3 Nano's turn format, used only when no checkpoint template is available.

    A system turn is always emitted (empty when none is given); the generation prompt opens
    ``<think>`` (thinking on) or closes an empty one (thinking off), as the upstream template does.
    """
    parts: list[str] = []
    turns = list(messages)
    system = turns.pop(0).content if turns and turns[0].role == "system" else ""
    parts.append(f"<|im_start|>system\n{system}<|im_end|>\n")
    for message in turns:
        parts.append(f"<|im_start|>{message.role}\n{message.content}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n<think>\n" if thinking else "<|im_start|>assistant\n<think></think>")
    return "".join(parts)


def _fingerprint_of(tokenizer_json: bytes) -> str:
    """SHA-256 of a ``tokenizer.json``'s bytes and the installed ``tokenizers`` version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        library = version("tokenizers")
    except PackageNotFoundError:
        library = "unknown"
    digest = hashlib.sha256(tokenizer_json)
    digest.update(f"\0tokenizers {library}".encode())
    return digest.hexdigest()


COUNT_BATCH_CHARS = 1 << 16
"""Characters of text encoded in one batch when counting (see ``HFTokenizer.count_many``)."""


def _batches(texts: Sequence[str], limit: int) -> list[list[str]]:
    """``texts`` in order, cut into consecutive batches of at most ``limit`` characters (a
    longer text is a batch of its own)."""
    batches: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if batches[-1] and size + len(text) > limit:
            batches.append([])
            size = 0
        batches[-1].append(text)
        size += len(text)
    return batches


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` with the checkpoint's chat template: exact counts."""

    def __init__(self, directory: Path, source: str):
        tokenizer_file = directory / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise TokenizerError(f"{directory} has no tokenizer.json")
        self._tokenizer_file = tokenizer_file
        self._loaded: Tokenizer | None = None
        self._loading: threading.Thread | None = None
        self._load_error: TokenizerError | None = None
        self._lock = threading.Lock()  # one load, whichever thread asks first
        self._fingerprint: str | None = None
        config = _read_json(directory / "tokenizer_config.json")
        template_source = _chat_template_source(directory, config)
        special_tokens = _special_tokens(directory, config)
        if template_source is None:
            self._template: ChatTemplate | None = None
            template_label = "builtin Nemotron turn format (checkpoint has no chat template)"
        else:
            self._template = ChatTemplate(template_source, special_tokens)
            template_label = "checkpoint"
        self.info = TokenizerInfo(source=source, exact=True, chat_template=template_label)
        self._rendering = json.dumps([template_source, special_tokens, source, template_label], sort_keys=True)

    @property
    def _tokenizer(self) -> Tokenizer:
        """The vocabulary, loaded on first use: a run whose counts all come from the count
        cache never pays its load time (~0.3 s) or memory (~100 MB for 131K ids)."""
        loading = self._loading
        if loading is not None:
            loading.join()
        with self._lock:
            if self._loaded is None and self._load_error is None:
                self._load()
        if self._load_error is not None:
            raise self._load_error
        return self._loaded  # type: ignore[return-value]

    def _load(self) -> None:
        from tokenizers import Tokenizer

        try:
            data = self._tokenizer_file.read_bytes()
            loaded = Tokenizer.from_buffer(data)
        except Exception as exc:
            self._load_error = TokenizerError(f"cannot load {self._tokenizer_file}: {exc}")
            self._load_error.__cause__ = exc
            return
        # Counts are cached under the fingerprint taken when the run began; a vocabulary
        # replaced since (the load is lazy) must not count under it.
        if self._fingerprint is not None and _fingerprint_of(data) != self._fingerprint:
            self._load_error = TokenizerError(f"{self._tokenizer_file} changed during the run; run again")
            return
        self._loaded = loaded
        del data
        # Parsing tokenizer.json leaves ~45 MB of freed heap (of ~90 MB) resident until
        # trimmed; the load ends on its own thread, between the stages' trims.
        from auditor.storage.memory import return_free_memory

        return_free_memory()

    def preload(self) -> None:
        """Start loading the vocabulary in a background thread (``tokenizers`` releases the
        GIL while it parses), for a caller that knows counting is coming and has other work
        to do meanwhile. The next count waits for it; a load error surfaces there."""
        with self._lock:
            if self._loaded is None and self._loading is None and self._load_error is None:
                self._loading = threading.Thread(target=self._load_once, name="auditor-tokenizer-load", daemon=True)
                self._loading.start()

    def _load_once(self) -> None:
        with self._lock:
            if self._loaded is None and self._load_error is None:
                self._load()

    def fingerprint(self) -> str:
        """SHA-256 of ``tokenizer.json`` and the ``tokenizers`` library version: counts made
        under one fingerprint hold for any tokenizer with the same one (the chat template
        changes rendering, not counting; a library upgrade may change how a vocabulary
        splits text, so it starts afresh)."""
        if self._fingerprint is None:
            try:
                data = self._tokenizer_file.read_bytes()
            except OSError as exc:
                raise TokenizerError(f"cannot read {self._tokenizer_file}: {exc}") from exc
            self._fingerprint = _fingerprint_of(data)
        return self._fingerprint

    def prompt_fingerprint(self) -> str:
        """``fingerprint`` together with the chat template, the special tokens and the
        source: what a rendered prompt and its count depend on."""
        return hashlib.sha256(f"{self.fingerprint()}\0{self._rendering}".encode()).hexdigest()

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        tokenizer = self._tokenizer
        # encode_batch_fast (tokenizers >= 0.21) gives the same ids without char offsets, ~25% faster.
        encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        counts: list[int] = []
        # Batches of about COUNT_BATCH_CHARS: every encoding of a batch is held at once
        # (ids and token strings, ~50 bytes a token), so one batch of a whole repository
        # would cost hundreds of MB for counts that need none of it. 64K characters still
        # hold several files, which the batch encoder spreads over the cores; on saleor
        # the process peaks 17 MB lower than with 1M-character batches.
        for batch in _batches(texts, COUNT_BATCH_CHARS):
            counts.extend(len(encoding.ids) for encoding in encode(batch, add_special_tokens=False))
        return counts

    def render(self, messages: Sequence[Message], *, thinking: bool) -> str:
        if self._template is None:
            return render_chatml(messages, thinking=thinking)
        return self._template.render(messages, thinking=thinking)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)


class EstimateTokenizer:
    """No tokenizer available: a byte-based over-estimate, clearly labelled as one."""

    def __init__(self, reason: str):
        self.info = TokenizerInfo(source=f"estimate: {reason}", exact=False, chat_template="builtin Nemotron turn format")

    def count(self, text: str) -> int:
        return math.ceil(len(text.encode("utf-8")) / ESTIMATE_BYTES_PER_TOKEN)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(text) for text in texts]

    def render(self, messages: Sequence[Message], *, thinking: bool) -> str:
        return render_chatml(messages, thinking=thinking)

    def preload(self) -> None:
        """Nothing to load: estimates need no vocabulary."""

    def prompt_fingerprint(self) -> str:
        """The estimate's rate and its labels (the built-in turn format renders every prompt)."""
        return hashlib.sha256(f"estimate {ESTIMATE_BYTES_PER_TOKEN}\0{self.info}".encode()).hexdigest()


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _chat_template_source(directory: Path, config: dict) -> str | None:
    template_file = directory / "chat_template.jinja"
    if template_file.is_file():
        return template_file.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, str):
        return template
    if isinstance(template, list):  # named templates: [{"name": "default", "template": "..."}]
        for entry in template:
            if isinstance(entry, dict) and entry.get("name") == "default":
                return str(entry.get("template", ""))
    return None


def _special_tokens(directory: Path, config: dict) -> dict[str, str]:
    """bos/eos/unk/pad token strings, passed to the template as transformers does."""
    tokens: dict[str, str] = {}
    sources = [_read_json(directory / "special_tokens_map.json"), config]
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        for source in sources:
            value = source.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                tokens[key] = value
                break
    return tokens


def _from_hf_cache(model_id: str) -> Path | None:
    """The newest cached snapshot of ``model_id`` that has a tokenizer.json, without network."""
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(model_id, allow_patterns=list(TOKENIZER_FILES), local_files_only=True)
    except Exception:
        return None
    directory = Path(path)
    return directory if (directory / "tokenizer.json").is_file() else None


def _from_hub(model_id: str) -> Path | None:
    """Download only the tokenizer files of ``model_id``; None when offline or refused."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return None
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(model_id, allow_patterns=list(TOKENIZER_FILES))
    except Exception:
        return None
    directory = Path(path)
    return directory if (directory / "tokenizer.json").is_file() else None


@dataclass(frozen=True)
class TokenizerRequest:
    """What the user asked for: an explicit tokenizer dir, a model dir or id, or neither."""

    tokenizer: str | None = None
    model: str | None = None
    allow_download: bool = True


def load_tokenizer(request: TokenizerRequest) -> HFTokenizer | EstimateTokenizer:
    """Resolve and load the tokenizer per the documented order.

    An explicit ``--tokenizer`` that cannot be loaded is an error (the user named it). A
    ``--model`` that resolves to nothing falls through to the default ids and finally to the
    estimate, whose ``info.source`` says why.
    """
    if request.tokenizer:
        directory = Path(request.tokenizer).expanduser()
        if not directory.is_dir():
            raise TokenizerError(f"--tokenizer {request.tokenizer}: not a directory")
        return HFTokenizer(directory, f"tokenizer-dir:{directory}")
    tried: list[str] = []
    if request.model:
        directory = Path(request.model).expanduser()
        if directory.is_dir():
            if (directory / "tokenizer.json").is_file():
                return HFTokenizer(directory, f"model-dir:{directory}")
            tried.append(f"{directory} has no tokenizer.json")
        else:
            cached = _from_hf_cache(request.model)
            if cached is not None:
                return HFTokenizer(cached, f"hf-cache:{request.model}")
            tried.append(f"{request.model} not in the local Hugging Face cache")
    for model_id in DEFAULT_MODEL_IDS:
        cached = _from_hf_cache(model_id)
        if cached is not None:
            return HFTokenizer(cached, f"hf-cache:{model_id}")
    if request.allow_download:
        hub_id = request.model if request.model and not Path(request.model).expanduser().is_dir() else DEFAULT_MODEL_IDS[0]
        downloaded = _from_hub(hub_id)
        if downloaded is not None:
            return HFTokenizer(downloaded, f"hub:{hub_id}")
        tried.append(f"hub download of {hub_id} not possible (offline?)")
    else:
        tried.append("hub download disabled")
    tried.append("no Nemotron tokenizer in the local Hugging Face cache")
    return EstimateTokenizer("; ".join(tried))


COUNT_CACHE_VERSION = 1
"""Version of the count cache's key material; part of its directory name."""


class CachedCountTokenizer:
    """An exact tokenizer whose counts are remembered on disk, keyed by the text's digest
    under the tokenizer's fingerprint: re-packing a repository counts only what changed,
    and a run whose counts are all known never loads the vocabulary.

    Counts are kept per ``scope`` (a repository), so a run loads only what that repository
    used lately rather than everything ever counted on the machine. Rendering and ``info``
    are the wrapped tokenizer's; counts are identical to it.
    """

    def __init__(self, tokenizer: HFTokenizer, cache_dir: Path, scope: str = ""):
        from auditor.storage.digests import digest_of

        self._inner = tokenizer
        self.info = tokenizer.info
        name = digest_of(scope).hex()
        self._store_path = cache_dir / f"v{COUNT_CACHE_VERSION}" / tokenizer.fingerprint() / f"{name}.bin"
        self._loaded_store: DigestStore | None = None

    @property
    def _store(self) -> DigestStore:
        """The counts, read on first use: a memoized pack counts nothing."""
        if self._loaded_store is None:
            from auditor.storage.digests import DigestStore

            self._loaded_store = DigestStore(self._store_path)
        return self._loaded_store

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        from auditor.storage.digests import digest_of

        keys = [digest_of(text) for text in texts]
        found = self._store.get_many(keys)
        missing = {key: text for key, text, value in zip(keys, texts, found) if value is None}
        if missing:
            counted = dict(zip(missing, self._inner.count_many(list(missing.values()))))
            self._store.put_many(counted)
            found = [counted[key] if value is None else value for key, value in zip(keys, found)]
        return found  # type: ignore[return-value]

    def render(self, messages: Sequence[Message], *, thinking: bool) -> str:
        return self._inner.render(messages, thinking=thinking)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added), from the wrapped tokenizer."""
        return self._inner.encode(text)

    def preload(self) -> None:
        """Start loading the vocabulary in the background (see ``HFTokenizer.preload``)."""
        self._inner.preload()

    def prompt_fingerprint(self) -> str:
        """The wrapped tokenizer's (the cache changes no count)."""
        return self._inner.prompt_fingerprint()


def default_count_cache_dir() -> Path:
    """The token-count cache next to the index cache (``~/.cache/auditor/counts`` or under
    ``$AUDITOR_CACHE_DIR`` / ``$XDG_CACHE_HOME`` when set)."""
    from auditor.storage.dirs import cache_dir

    return cache_dir("counts")


def with_count_cache(
    tokenizer: HFTokenizer | EstimateTokenizer, cache_dir: Path | None = None, *, scope: str = ""
) -> PromptTokenizer:
    """``tokenizer`` with a persistent count cache for ``scope`` (e.g. the repository's
    resolved path) when its counts are exact (an estimate is already instant and is
    returned as it is)."""
    if isinstance(tokenizer, EstimateTokenizer):
        return tokenizer
    return CachedCountTokenizer(tokenizer, cache_dir or default_count_cache_dir(), scope)
