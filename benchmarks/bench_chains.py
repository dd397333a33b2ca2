"""Pack quality benchmark: are the call chains a finding needs packed together?

A model can only trace a bug it sees whole: the entry point, every call on the way and the
sink, in full text, in one window. The static pass's tx-outside-transaction findings give a
set of real chains (entry point -> ... -> write); this script packs the same repository the
way `auditor scan` does and reports how many of those chains have every file in full text
within a single window, and what that costs in windows and prompt tokens.

    python benchmarks/bench_chains.py REPO --tokenizer DIR [--neighbor-depth N] [--include-tests] [--no-chain-windows]

Chains through files the audit scope leaves out (tests, migrations, seed code...) are
counted apart: their files are not packed unless the scope is widened.

Not a timed benchmark: it measures what the packer puts together, for comparing packing
strategies on a real repository (e.g. saleor).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from auditor.analysis.transactions import TxOptions
from auditor.pack.packer import PackOptions
from auditor.runs.prepare import pack_prepared, prepare_repository, run_static_pass
from auditor.rules.loader import load_rules
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer, with_count_cache


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--tokenizer", required=True, help="tokenizer dir for exact counts (e.g. the stand-in)")
    parser.add_argument("--neighbor-depth", type=int, default=PackOptions().neighbor_depth)
    parser.add_argument("--include-tests", action="store_true", help="pack test code too (audit scope)")
    parser.add_argument("--no-chain-windows", action="store_true", help="fill windows by rank only (the old packing)")
    args = parser.parse_args()

    rules = load_rules(["tx-outside-transaction"])
    root = args.repo.resolve()
    tokenizer = with_count_cache(load_tokenizer(TokenizerRequest(tokenizer=args.tokenizer)), scope=str(root))
    prepared = prepare_repository(root, on_change=tokenizer.preload)
    # Every finding of the pass (min severity low), none listed in the prompts: the chains alone.
    static = run_static_pass(prepared, rules, TxOptions(min_severity="low"), reported=False)
    findings = static.findings
    options = PackOptions(
        neighbor_depth=args.neighbor_depth, include=("tests",) if args.include_tests else (),
        chain_windows=not args.no_chain_windows,
    )
    packed = pack_prepared(prepared, rules=rules, tokenizer=tokenizer, options=options, static=static)

    in_full = [
        {f.path for f in window.files if f.tier == "full" and (f.start_line, f.end_line) == (1, f.total_lines)}
        for window in packed.windows
    ]
    anywhere = set().union(*in_full) if in_full else set()
    scoped = {entry.path for entry in prepared.walk.files} - {o.path for o in packed.omitted if "out of the audit scope" in o.reason}
    all_chains = [{step.path for step in finding.chain} | {finding.path} for finding in findings]
    chains = [chain for chain in all_chains if chain <= scoped]
    together = sum(1 for chain in chains if any(chain <= window for window in in_full))
    somewhere = sum(1 for chain in chains if chain <= anywhere)
    lengths = [len(chain) for chain in chains]
    tokens = sum(window.prompt_tokens for window in packed.windows)
    print(f"windows: {len(packed.windows)}, prompt tokens in all: {tokens:,}")
    print(f"chains (static tx-outside-transaction findings): {len(all_chains)}, "
          f"of which through out-of-scope files: {len(all_chains) - len(chains)}; files per chain: "
          f"{min(lengths, default=0)}-{max(lengths, default=0)}")
    print(f"every file of the chain in full in one window: {together} / {len(chains)} ({together / max(len(chains), 1):.0%})")
    print(f"every file of the chain in full in some window: {somewhere} / {len(chains)} ({somewhere / max(len(chains), 1):.0%})")
    print(f"distinct file chains whole in one window (as `pack --format json` reports): "
          f"{packed.chains_whole()} / {len(packed.chains)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
