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

from auditor.pack.packer import PackResult
from auditor.walk.walker import WalkResult


def pack_manifest(result: PackResult, walked: WalkResult) -> dict[str, Any]:
    """The manifest of issue #2: tokenizer, budget, windows with their files, skipped files."""
    options = result.options
    return {
        "repository": result.repository,
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
                "files": [
                    {
                        "path": f.path,
                        "tier": f.tier,
                        "tokens": f.tokens,
                        "lines": [f.start_line, f.end_line],
                        "total_lines": f.total_lines,
                        "truncated": f.truncated,
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
    return Group(windows, files, directories, skipped)
