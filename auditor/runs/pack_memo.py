"""Pack memo: the whole output of one ``auditor pack`` (the text written and the notices
printed), remembered under a key that covers every input, so that re-packing an unchanged
tree with the same options costs a walk and a lookup instead of the index, the call graph,
the static pass and the packer.

The key (``pack_memo_key``) is a SHA-256 of:

- ``MEMO_VERSION``, auditor's version and a digest of auditor's own source and packaged
  data (``package_digest``: a development checkout changes them without a new version);
- the scan configuration, every field (``ScanConfig``: the rules named, window, pack and
  walk options, severity, tests, canaries and their seed, the model...), and the resolved root;
- every walked file's path, the SHA-256 of its bytes (the walk reads and hashes each file
  anyway), its size, encoding and language, and every skipped file with its reason;
- each selected rule's full definition (the rule texts as parsed: id, patterns, body...);
- the bytes of the project's transaction-model files (``--tx-models``), read as the static
  pass reads them (through a symbolic link); one that cannot be read makes no key at all:
  the pack is planned, not memoized;
- the tokenizer's prompt fingerprint (``PromptTokenizer.prompt_fingerprint``: vocabulary
  file, ``tokenizers`` version, chat template, special tokens, source);
- the output variant (format, window shown, width).

A plan that skipped files on a timing budget (``parse-budget``, ``file-deadline``: another
run on the same tree may not) is not memoized.

Entries live under ``auditor.storage.dirs.cache_dir("packs") / f"v{MEMO_VERSION}"``, sealed
and replaced atomically (``auditor.storage.sealed``); an unreadable or foreign entry is a
miss, and the ``MAX_MEMOS`` most recently used are kept.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from auditor import __version__
from auditor.config.scan import ScanConfig
from auditor.progress import ProgressCallback, no_progress
from auditor.rules.loader import Rule, named_or_builtin
from auditor.storage.dirs import cache_dir
from auditor.storage.package import package_digest
from auditor.storage.sealed import prune_least_recent, read_regular_file, seal, unseal, write_atomically
from auditor.tokens.tokenizer import PromptTokenizer
from auditor.walk.files import SkipReason
from auditor.walk.walker import WalkResult, walk

if TYPE_CHECKING:
    from auditor.runs.prepare import WindowPlan

logger = logging.getLogger(__name__)

MEMO_VERSION = 1
"""Version of the memo's format and key material; part of its directory name."""
MAX_MEMOS = 16
"""Entries kept (most recently used first)."""
_MAGIC = b"auditor-pack-memo\x00"


@dataclass(frozen=True)
class PackOutput:
    """What one ``auditor pack`` produces: the text it writes and the notices it prints."""

    text: str
    notices: tuple[str, ...]


_TIMED_SKIPS = frozenset({"parse-budget", SkipReason.FILE_DEADLINE.value})
"""Skip reasons that depend on how fast this run was: a plan with one is not memoized."""


def pack_memo_key(
    config: ScanConfig, walked: WalkResult, rules: Sequence[Rule], tokenizer: PromptTokenizer, variant: str
) -> str | None:
    """The memo key of one pack output (see the module docstring for what it covers); None
    when an input cannot be read (a transaction-model file), so the pack is not memoized."""
    digest = hashlib.sha256()

    def add(part: object) -> None:
        text = repr(part).encode("utf-8", "surrogatepass")
        digest.update(len(text).to_bytes(8, "little"))
        digest.update(text)

    try:
        # The bytes ``load_facts`` reads: a link is followed; a FIFO or a device is not read.
        if not all(path.is_file() for path in config.tx_model_paths):
            return None
        models = tuple((str(path), hashlib.sha256(path.read_bytes()).hexdigest()) for path in config.tx_model_paths)
        package = package_digest()
    except OSError as error:
        logger.debug("pack not memoized: an input cannot be read: %s", error)
        return None
    add((MEMO_VERSION, __version__, package, config, str(walked.root), str(walked.git_root), variant))
    add(tokenizer.prompt_fingerprint())
    add(tuple(rules))
    add(models)
    for entry in walked.files:
        add((entry.path, entry.content_hash, entry.size, entry.encoding, entry.language))
    for skipped in walked.skipped:
        add((skipped.path, skipped.reason.value, skipped.detail))
    return digest.hexdigest()


def timed_skips(plan: WindowPlan) -> bool:
    """Whether ``plan`` left a file out on a timing budget (the walk's or the pack's per-file
    deadline, the index's parse budget): another run on the same inputs may not."""
    prepared = plan.inputs.repository
    walked = (skipped.reason.value for skipped in prepared.walk.skipped)
    indexed = (skipped.reason for skipped in prepared.index_skipped)
    return bool(plan.sent.overran) or any(reason in _TIMED_SKIPS for reason in (*walked, *indexed))


class PackMemo:
    """On-disk pack outputs by ``pack_memo_key``."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = (directory or cache_dir("packs")) / f"v{MEMO_VERSION}"

    def _entry(self, key: str) -> Path:
        return self.directory / f"{key}.pack"

    def get(self, key: str) -> PackOutput | None:
        """The output stored under ``key``, or None."""
        target = self._entry(key)
        try:
            stored = unseal(_MAGIC, read_regular_file(target))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable pack memo %s: %s", target, error)
            return None
        if not (
            isinstance(stored, tuple) and len(stored) == 3 and stored[0] == key
            and isinstance(stored[1], str) and isinstance(stored[2], tuple)
            and all(isinstance(notice, str) for notice in stored[2])
        ):
            return None
        try:
            target.touch()  # in use: pruning keeps the most recently used
        except OSError:
            pass
        return PackOutput(stored[1], stored[2])

    def put(self, key: str, output: PackOutput) -> None:
        """Store ``output`` under ``key`` (a failed write is logged, never raised)."""
        target = self._entry(key)
        if write_atomically(target, seal(_MAGIC, (key, output.text, output.notices))):
            prune_least_recent(self.directory, "*.pack", MAX_MEMOS, spare=target)


def memoized_pack(
    config: ScanConfig,
    tokenizer: PromptTokenizer,
    render: Callable[[WindowPlan], str],
    *,
    variant: str,
    memo: PackMemo | None,
    progress: ProgressCallback = no_progress,
) -> PackOutput:
    """``render`` of ``plan_windows(config, tokenizer)`` with its notices, from ``memo`` when it
    holds this output (``variant`` names the rendering: format, window, width); without a
    memo, always planned. A hit imports none of the stages after the walk."""
    walked = walk(config.root, config.walk, progress)
    key = None
    if memo is not None:
        key = pack_memo_key(config, walked, named_or_builtin(config.rules), tokenizer, variant)
        found = memo.get(key) if key is not None else None
        if found is not None:
            return found
    from auditor.runs.prepare import plan_windows

    plan = plan_windows(config, tokenizer, walked=walked, progress=progress)
    output = PackOutput(render(plan), plan.notices)
    if memo is not None and key is not None and not timed_skips(plan):
        memo.put(key, output)
    return output
