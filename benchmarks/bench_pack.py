"""Pack benchmark: auditor pack vs repomix and gitingest on the same repository.

All tools run as children of this process (one process tree); each child's wall time and
peak RSS come from os.wait4 on that child alone. Peers are given as commands so the script
does not depend on where they were installed:

    python benchmarks/bench_pack.py REPO --tokenizer DIR \\
        --repomix benchmarks/work/node_modules/.bin/repomix \\
        --gitingest benchmarks/work/venv/bin/gitingest

`benchmarks/setup_peers.sh` installs both peers into benchmarks/work/ (git-ignored).
Results are printed as a Markdown table with ratios against repomix.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_child(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run ``command``; return (wall seconds, peak RSS MiB, exit status) of that child alone."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.stderr.write(process.stderr.read().decode(errors="replace")[-2000:] if process.stderr else "")
    return wall, usage.ru_maxrss / 1024, process.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--tokenizer", required=True, help="tokenizer dir for exact counts (e.g. the stand-in)")
    parser.add_argument("--rule", default="tx-outside-transaction")
    parser.add_argument("--repomix", help="repomix executable")
    parser.add_argument("--gitingest", help="gitingest executable")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    auditor = [sys.executable, "-m", "auditor"]
    scratch = Path(tempfile.mkdtemp(prefix="auditor-bench-"))
    env = dict(os.environ, AUDITOR_CACHE_DIR=str(scratch / "cache"), HF_HUB_OFFLINE="1")
    pack = [*auditor, "pack", str(args.repo), "--tokenizer", args.tokenizer, "--format", "json"]
    cases: list[tuple[str, list[str]]] = [
        ("auditor pack, all windows, cold index cache", [*pack, "--rule", args.rule, "-o", str(scratch / "a.json")]),
        ("auditor pack, all windows, warm index cache", [*pack, "--rule", args.rule, "-o", str(scratch / "b.json")]),
        ("auditor pack, first window (one scan request)", [*pack, "--rule", args.rule, "--max-windows", "1", "-o", str(scratch / "c.json")]),
        ("auditor pack, no rule (whole repo in full)", [*pack, "-o", str(scratch / "d.json")]),
    ]
    if args.repomix:
        cases.append(("repomix", [args.repomix, str(args.repo), "-o", str(scratch / "repomix.xml")]))
    if args.gitingest:
        cases.append(("gitingest", [args.gitingest, str(args.repo), "-o", str(scratch / "gitingest.txt")]))

    results: dict[str, tuple[float, float]] = {}
    for name, command in cases:
        best = None
        for _ in range(args.repeat):
            if "cold" in name:
                shutil.rmtree(scratch / "cache", ignore_errors=True)
            wall, rss, code = run_child(command, env)
            if code != 0:
                print(f"{name}: exit {code}", file=sys.stderr)
            best = (wall, rss) if best is None or wall < best[0] else best
        results[name] = best  # type: ignore[assignment]

    reference = results.get("repomix")
    print(f"| tool | wall s | peak RSS MiB |{' wall / repomix |' if reference else ''}")
    print(f"|---|---:|---:|{'---:|' if reference else ''}")
    for name, (wall, rss) in results.items():
        ratio = f" {wall / reference[0]:.2f} |" if reference else ""
        print(f"| {name} | {wall:.2f} | {rss:.0f} |{ratio}")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
