"""Pack quality benchmark: are the call chains a finding needs packed together, and at what cost?

A model can only trace a bug it sees whole: the entry point, every call on the way and the
sink, in full text, in one window. The static pass's tx-outside-transaction findings (of
every severity) give a set of real chains (entry point -> ... -> write); this script plans
the windows the way `auditor scan` and `auditor pack` do (``plan_windows``, canaries
planted: the prompt tokens are those `pack --format json` reports) and reports how many of
those chains have every file in full text within a single window, and what that costs:

- windows and prompt tokens as sent, and their estimated time (``auditor plan``'s estimate);
- the tokens of the source files the rule audits (every walked file in the audit scope, in
  one of the rule's languages, counted whole) and the prompt tokens over them;
- the token-ratio guard's ratio (prompt tokens over the distinct full text carried);
- the file tokens placed, by file kind (as `pack --format json`'s ``tokens_by_kind``).

    python benchmarks/bench_chains.py REPO --tokenizer DIR [--include-tests] [--row NAME]
    python benchmarks/bench_chains.py REPO --tokenizer DIR --no-chain-windows [--neighbor-depth N]

``--no-chain-windows`` / ``--neighbor-depth`` pack with those packer settings instead (no
canaries planted, so the prompt tokens are a little lower than a scan's). ``--row NAME``
also prints the result as one Markdown table row (docs/benchmarks.md). Chains through files
the audit scope leaves out (tests, migrations, seed code...) are counted apart: their files
are not packed unless the scope is widened; "all chains" counts them as not whole.

Not a timed benchmark: it measures what the packer puts together, for comparing packing
strategies on a real repository (e.g. saleor).
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import replace
from pathlib import Path

from auditor.config.scan import ScanConfig
from auditor.pack.guard import token_ratio
from auditor.planning.timing import estimate_time
from auditor.pack.packer import PackOptions, PackResult
from auditor.pack.scope import scope_class
from auditor.report.manifest import kind_labels
from auditor.rules.loader import load_rules
from auditor.runs.prepare import ScanInputs, pack_prepared, plan_windows, prepare_scan
from auditor.tokens.tokenizer import PromptTokenizer, TokenizerRequest, load_tokenizer, with_count_cache

RULE = "tx-outside-transaction"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--tokenizer", required=True, help="tokenizer dir for exact counts (e.g. the stand-in)")
    parser.add_argument("--neighbor-depth", type=int, default=PackOptions().neighbor_depth)
    parser.add_argument("--include-tests", action="store_true", help="pack test code too (audit scope)")
    parser.add_argument("--no-chain-windows", action="store_true", help="fill windows by rank only (the old packing)")
    parser.add_argument("--row", metavar="NAME", help="also print a Markdown table row named NAME")
    args = parser.parse_args()

    root = args.repo.resolve()
    config = ScanConfig(root=root, rules=(RULE,), tokenizer=args.tokenizer, include_tests=args.include_tests)
    tokenizer = with_count_cache(load_tokenizer(TokenizerRequest(tokenizer=args.tokenizer)), scope=str(root))
    inputs = prepare_scan(config, runs_model=True, on_change=tokenizer.preload)
    if args.no_chain_windows or args.neighbor_depth != PackOptions().neighbor_depth:
        options = replace(config.pack, neighbor_depth=args.neighbor_depth, chain_windows=not args.no_chain_windows)
        packed = pack_prepared(inputs.repository, rules=inputs.rules, tokenizer=tokenizer, options=options, static=inputs.static)
    else:
        packed = plan_windows(config, tokenizer, inputs=inputs).sent
    report(packed, inputs, tokenizer, args.row)
    return 0


def report(packed: PackResult, inputs: ScanInputs, tokenizer: PromptTokenizer, row: str | None) -> None:
    """Print the chains whole, the cost, and (with ``row``) the Markdown row."""
    prepared = inputs.repository
    in_full = [
        {f.path for f in window.files if f.tier == "full" and (f.start_line, f.end_line) == (1, f.total_lines)}
        for window in packed.windows
    ]
    anywhere = set().union(*in_full) if in_full else set()
    scoped = {entry.path for entry in prepared.walk.files} - {o.path for o in packed.omitted if "out of the audit scope" in o.reason}
    all_chains = [{step.path for step in finding.chain} | {finding.path} for finding in inputs.static.chain_findings]
    chains = [chain for chain in all_chains if chain <= scoped]
    together = sum(1 for chain in chains if any(chain <= window for window in in_full))
    somewhere = sum(1 for chain in chains if chain <= anywhere)
    lengths = [len(chain) for chain in chains]
    tokens = sum(window.prompt_tokens for window in packed.windows)
    languages = {language for rule in inputs.rules for language in rule.languages}
    audited = [
        entry.text for entry in prepared.walk.files
        if entry.language in languages and scope_class(entry.path, entry.text) is None
    ]
    source_tokens = sum(tokenizer.count_many(audited))
    labels = kind_labels(prepared.walk)
    by_kind = Counter[str]()
    for window in packed.windows:
        for placed in window.files:
            by_kind[labels.get(placed.path, "other")] += placed.tokens
    guard = token_ratio(packed)
    minutes = sum(estimate_time(w.prompt_tokens, packed.options.output_tokens).total_s for w in packed.windows) / 60
    whole_share = together / max(len(all_chains), 1)
    print(f"windows: {len(packed.windows)}, prompt tokens in all: {tokens:,}, estimated {minutes:.1f} min on the default device profile")
    print(f"source files the rule audits: {len(audited):,}, {source_tokens:,} tokens; "
          f"prompt tokens / source tokens: {tokens / max(source_tokens, 1):.2f}x; guard ratio: {guard.ratio:.2f}x")
    print(f"chains (static {RULE} findings, every severity): {len(all_chains)}, "
          f"of which through out-of-scope files: {len(all_chains) - len(chains)}; files per chain: "
          f"{min(lengths, default=0)}-{max(lengths, default=0)}")
    print(f"every file of the chain in full in one window: {together} / {len(chains)} ({together / max(len(chains), 1):.0%}); "
          f"of all chains: {together} / {len(all_chains)} ({whole_share:.1%})")
    print(f"every file of the chain in full in some window: {somewhere} / {len(chains)} ({somewhere / max(len(chains), 1):.0%})")
    print(f"distinct file chains whole in one window (as `pack --format json` reports): "
          f"{packed.chains_whole()} / {len(packed.chains)}")
    kinds = ", ".join(f"{kind} {count / 1e3:,.0f} K" for kind, count in by_kind.most_common())
    print(f"file tokens by kind: {kinds}")
    if row is not None:
        print(
            f"| {row} | {len(packed.windows)} | {tokens / 1e6:.2f} M | {minutes:.1f} min | {source_tokens / 1e6:.2f} M | "
            f"{tokens / max(source_tokens, 1):.2f}x | {guard.ratio:.2f}x | {together} / {len(all_chains)} ({whole_share:.1%}) | {kinds} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
