"""The pack manifest: what went into each window and what was left out, as JSON or tables.

Input: a ``PackResult`` and the ``WalkResult`` it came from. Output: a JSON-ready dict with
sorted, repo-relative data, or rich tables for the terminal.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rich.console import Group
from rich.table import Table

from auditor.pack.guard import token_ratio
from auditor.pack.packer import PackedFile, PackResult
from auditor.walk.classify import FileKind, file_kind
from auditor.walk.walker import WalkResult


def kind_labels(walked: WalkResult) -> dict[str, str]:
    """Each walked file's kind as reported: its language for code (``python``,
    ``typescript``, ...), else the walk's kind (``translations``, ``docs``, ``data``, ``other``)."""
    labels: dict[str, str] = {}
    for entry in walked.files:
        kind = file_kind(entry.path, len(entry.text))
        labels[entry.path] = entry.language if kind is FileKind.CODE and entry.language else kind.value
    return labels


def _totals(files: list[PackedFile], key: dict[str, str] | None = None) -> dict[str, int]:
    """Tokens per reason (or, with ``key``, per the path's label), sorted by label."""
    totals: Counter[str] = Counter()
    for placed in files:
        totals[key.get(placed.path, FileKind.OTHER.value) if key is not None else placed.reason.value] += placed.tokens
    return dict(sorted(totals.items()))


def pack_manifest(result: PackResult, walked: WalkResult) -> dict[str, Any]:
    """The manifest of issue #2: tokenizer, budget, windows with their files, skipped files."""
    options = result.options
    kinds = kind_labels(walked)
    placed = [f for window in result.windows for f in window.files]
    ratio = token_ratio(result)
    return {
        "repository": result.repository,
        # File tokens by why they are in a window (auditor.pack.reasons) and by file kind,
        # over all windows (a file repeated for chains counts each time).
        "tokens_by_reason": _totals(placed),
        "tokens_by_kind": _totals(placed, kinds),
        "token_ratio": {
            "prompt_tokens": ratio.prompt_tokens,
            "audited_tokens": ratio.audited_tokens,
            "ratio": round(ratio.ratio, 3),
        },
        "tokenizer": {"source": result.tokenizer.source, "exact": result.tokenizer.exact, "chat_template": result.tokenizer.chat_template},
        "max_model_len": options.max_model_len,
        "output_tokens": options.output_tokens,
        "probe_reserve_tokens": options.probe_reserve_tokens,
        "prompt_budget": options.prompt_budget,
        "thinking": options.thinking,
        "rules": [rule.id for rule in result.rules],
        "map_detail": result.map_detail,
        "windows": [
            {
                "index": window.index,
                "prompt_tokens": window.prompt_tokens,
                # The static candidates the prompt lists for the model to judge (auditor scan's ids).
                "static_candidates": [candidate.id for candidate in window.candidates],
                "utilization": round(window.prompt_tokens / options.prompt_budget, 4),
                "tokens_by_reason": _totals(list(window.files)),
                "files": [
                    {
                        "path": f.path,
                        "tier": f.tier,
                        "tokens": f.tokens,
                        "lines": [f.start_line, f.end_line],
                        "total_lines": f.total_lines,
                        "truncated": f.truncated,
                        "reason": f.reason.value,
                        "kind": kinds.get(f.path, FileKind.OTHER.value),
                    }
                    for f in window.files
                ],
            }
            for window in result.windows
        ],
        "candidates": list(result.candidates),
        "chains": {
            "total": len(result.chains),
            "whole_in_one_window": result.chains_whole(),
            "out_of_scope": result.chains_out_of_scope,
        },
        "omitted": [{"path": o.path, "reason": o.reason} for o in result.omitted],
        "skipped": [{"path": s.path, "reason": s.reason.value, "detail": s.detail} for s in walked.skipped],
    }


def manifest_json(result: PackResult, walked: WalkResult) -> str:
    """The manifest as deterministic JSON text (sorted keys, trailing newline)."""
    return json.dumps(pack_manifest(result, walked), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def pack_tables(result: PackResult, walked: WalkResult, largest: int = 10) -> Group:
    """Rich tables: windows and token use, largest files and directories, skipped files by reason."""
    options = result.options
    windows = Table(title=f"Windows ({result.tokenizer.describe()})")
    for column in ("window", "prompt tokens", "budget used", "full files", "skeletons"):
        windows.add_column(column, justify="right" if column != "window" else "left")
    for window in result.windows:
        full = sum(1 for f in window.files if f.tier == "full")
        windows.add_row(
            str(window.index),
            f"{window.prompt_tokens:,}",
            f"{window.prompt_tokens / options.prompt_budget:.1%}",
            str(full),
            str(len(window.files) - full),
        )
    windows.caption = (
        f"max_model_len {options.max_model_len:,} = prompt budget {options.prompt_budget:,} "
        f"+ output reserve {options.output_tokens:,} + probe reserve {options.probe_reserve_tokens:,}"
        f"\nchains whole in one window: {result.chains_whole():,} / {len(result.chains):,}"
        + (f" ({result.chains_out_of_scope:,} more pass through out-of-scope files)" if result.chains_out_of_scope else "")
        + f"; prompt tokens in all: {sum(window.prompt_tokens for window in result.windows):,}"
    )

    file_tokens: Counter[str] = Counter()
    for window in result.windows:
        for f in window.files:
            if f.tier == "full":
                file_tokens[f.path] += f.tokens
    files = Table(title="Largest files (tokens in full)")
    files.add_column("path")
    files.add_column("tokens", justify="right")
    for path, tokens in sorted(file_tokens.items(), key=lambda kv: (-kv[1], kv[0]))[:largest]:
        files.add_row(path, f"{tokens:,}")

    directory_tokens: Counter[str] = Counter()
    for path, tokens in file_tokens.items():
        directory_tokens[path.rsplit("/", 1)[0] + "/" if "/" in path else "./"] += tokens
    directories = Table(title="Largest directories (tokens in full)")
    directories.add_column("directory")
    directories.add_column("tokens", justify="right")
    for directory, tokens in sorted(directory_tokens.items(), key=lambda kv: (-kv[1], kv[0]))[:largest]:
        directories.add_row(directory, f"{tokens:,}")

    reasons: Counter[str] = Counter(s.reason.value for s in walked.skipped)
    reasons.update(f"omitted: {o.reason}" for o in result.omitted)
    truncated = {f.path for window in result.windows for f in window.files if f.truncated}
    reasons.update("truncated: a line longer than a window was cut" for _ in truncated)
    skipped = Table(title="Skipped and omitted files by reason")
    skipped.add_column("reason")
    skipped.add_column("files", justify="right")
    for reason, count in sorted(reasons.items()):
        skipped.add_row(reason, str(count))
    return Group(windows, _held_table(result, walked), files, directories, skipped)


def _held_table(result: PackResult, walked: WalkResult) -> Table:
    """Tokens the windows hold by reason and by file kind, with the token-ratio guard's figures."""
    placed = [f for window in result.windows for f in window.files]
    held = Table(title="What the windows hold (file tokens, all windows)")
    for column in ("by reason", "tokens", "by kind", "tokens "):
        held.add_column(column, justify="right" if column.startswith("tokens") else "left")
    by_reason = list(_totals(placed).items())
    by_kind = sorted(_totals(placed, kind_labels(walked)).items(), key=lambda kv: (-kv[1], kv[0]))
    for row in range(max(len(by_reason), len(by_kind))):
        reason, reason_tokens = by_reason[row] if row < len(by_reason) else ("", None)
        kind, kind_tokens = by_kind[row] if row < len(by_kind) else ("", None)
        held.add_row(
            reason, "" if reason_tokens is None else f"{reason_tokens:,}", kind, "" if kind_tokens is None else f"{kind_tokens:,}"
        )
    ratio = token_ratio(result)
    held.caption = (
        f"prompt tokens {ratio.prompt_tokens:,} for {ratio.audited_tokens:,} tokens of distinct code in full: "
        f"{ratio.ratio:.2f}x"
    )
    return held
