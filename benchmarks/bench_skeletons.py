"""Skeleton benchmark: how much of a file its skeleton costs, per language, against repomix.

For every indexed source file of each repository, the ratio skeleton tokens / full tokens
is taken on the blocks the packer renders (numbered lines, delimiters); a file without a
skeleton (nothing to elide, or a parse error) counts as 1.0, since the packer then carries
it in full. With ``--repomix``, repomix is run on the same repository with and without
``--compress`` and the same ratio is taken per file on its output, counted with the same
tokenizer, over the files both tools report. Prints a Markdown table of medians, and how
many files repomix reduced to (almost) nothing.

    python benchmarks/bench_skeletons.py REPO [REPO...] --tokenizer DIR \\
        [--repomix benchmarks/work/node_modules/.bin/repomix]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

from auditor.pack.prompt import render_full_block, render_skeleton_block, split_lines
from auditor.pack.scope import scope_class
from auditor.pack.skeleton import build_skeleton
from auditor.runs.prepare import prepare_repository
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer

LANGUAGE_FAMILY = {"tsx": "typescript", "javascript": "javascript", "typescript": "typescript"}
EMPTIED = 0.02
"""A compressed/full ratio under this counts as a file emptied (a few tokens left)."""
_REPOMIX_FILE = re.compile(r'<file path="([^"]+)">\n(.*?)\n</file>', re.DOTALL)


def auditor_ratios(repo: Path, tokenizer) -> dict[str, tuple[str, float]]:
    """Path -> (language family, skeleton/full tokens) for every indexed production file."""
    prepared = prepare_repository(repo, use_cache=False)
    texts = prepared.texts
    paths = sorted(path for path in prepared.indexes if scope_class(path, texts[path]) is None)
    full, skeletons = [], []
    for path in paths:
        lines = split_lines(texts[path])
        full.append(render_full_block(path, lines))
        skeleton = build_skeleton(texts[path], prepared.indexes[path])
        elisions = [(e.start_line, e.end_line) for e in skeleton.elisions] if skeleton else []
        skeletons.append(render_skeleton_block(path, lines, elisions) if elisions else full[-1])
    full_counts = tokenizer.count_many(full)
    skeleton_counts = tokenizer.count_many(skeletons)
    return {
        path: (LANGUAGE_FAMILY.get(prepared.indexes[path].language, prepared.indexes[path].language), s / max(f, 1))
        for path, f, s in zip(paths, full_counts, skeleton_counts)
    }


def repomix_files(repomix: str, repo: Path, compress: bool) -> dict[str, str]:
    """Path -> file text as repomix outputs it (XML style)."""
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "out.xml"
        command = [repomix, str(repo), "--style", "xml", "-o", str(output), "--no-security-check"]
        if compress:
            command.append("--compress")
        subprocess.run(command, check=True, capture_output=True)
        return {match.group(1): match.group(2) for match in _REPOMIX_FILE.finditer(output.read_text(encoding="utf-8"))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repos", type=Path, nargs="+")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--repomix", help="repomix executable: compare with repomix --compress")
    args = parser.parse_args()
    tokenizer = load_tokenizer(TokenizerRequest(tokenizer=args.tokenizer))
    print("| repository | language | files | auditor skeleton/full (median) | repomix --compress/full (median) | files repomix empties |")
    print("|---|---|---:|---:|---:|---:|")
    for repo in args.repos:
        ours = auditor_ratios(repo.resolve(), tokenizer)
        peer: dict[str, float] = {}
        if args.repomix:
            plain = repomix_files(args.repomix, repo.resolve(), compress=False)
            compressed = repomix_files(args.repomix, repo.resolve(), compress=True)
            shared = sorted(set(plain) & set(compressed) & set(ours))
            plain_counts = tokenizer.count_many([plain[path] for path in shared])
            compressed_counts = tokenizer.count_many([compressed[path] for path in shared])
            peer = {path: c / max(p, 1) for path, p, c in zip(shared, plain_counts, compressed_counts)}
        by_language: dict[str, list[str]] = defaultdict(list)
        for path, (language, _) in ours.items():
            by_language[language].append(path)
        for language, paths in sorted(by_language.items()):
            if len(paths) < 5:
                continue
            median = statistics.median(ours[path][1] for path in paths)
            peer_values = [peer[path] for path in paths if path in peer]
            peer_median = f"{statistics.median(peer_values):.2f}" if peer_values else "-"
            # repomix --compress outputs nothing for a file its queries find no definition in.
            emptied = sum(1 for value in peer_values if value < EMPTIED) if peer_values else "-"
            print(f"| {repo.name} | {language} | {len(paths)} | {median:.2f} | {peer_median} | {emptied} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
