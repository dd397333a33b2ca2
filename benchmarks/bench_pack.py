"""Pack benchmark: auditor pack vs repomix and gitingest on the same repository.

All tools run as children of this process (one process tree); each child's wall time and
peak RSS come from os.wait4 on that child alone. Peers are given as commands so the script
does not depend on where they were installed:

    python benchmarks/bench_pack.py REPO --tokenizer DIR \\
        --repomix benchmarks/work/node_modules/.bin/repomix \\
        --gitingest benchmarks/work/venv/bin/gitingest

The repository is first cloned (``git clone --shared``: objects are shared, the checkout is
fresh) into a scratch directory, so the "one file edited" case can edit it; every tool packs
that clone. auditor runs in the situations a user meets:

- cold: empty caches (the first pack of a repository on a machine, or a CI runner without a
  cache);
- warm: caches from an earlier pack, repository unchanged (a re-run);
- edited: caches from an earlier pack, one file changed since (the pre-merge case);
- first window: what one scan request needs, warm.

``--verify K`` then checks that the first K windows' reported ``prompt_tokens`` equal the
tokenizer's count of the exact prompt text (``--format prompt``), outside the timings.
Results are printed as a Markdown table with ratios against repomix.
"""

from __future__ import annotations

import argparse
import json
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


def edit_one_file(manifest: Path, repo: Path, serial: int) -> str:
    """Append a comment line to the first file of the first window (a file every window's
    ranking depends on); returns its path."""
    first = json.loads(manifest.read_text())["windows"][0]["files"][0]["path"]
    with open(repo / first, "a", encoding="utf-8") as handle:
        handle.write(f"# benchmark edit {serial}\n")
    return first


def verify(auditor: list[str], repo: Path, tokenizer: str, rule: str, manifest: Path, windows: int, env: dict[str, str]) -> list[str]:
    """Compare reported prompt_tokens with an exact count of each window's prompt text."""
    from tokenizers import Tokenizer

    vocabulary = Tokenizer.from_file(str(Path(tokenizer) / "tokenizer.json"))
    reported = json.loads(manifest.read_text())["windows"]
    lines = []
    for window in reported[:windows]:
        prompt = subprocess.run(
            [*auditor, "pack", str(repo), "--tokenizer", tokenizer, "--rule", rule, "--format", "prompt", "--window", str(window["index"])],
            env=env, check=True, capture_output=True, text=True,
        ).stdout
        counted = len(vocabulary.encode(prompt, add_special_tokens=False).ids)
        verdict = "equal" if counted == window["prompt_tokens"] else "DIFFERENT"
        lines.append(f"window {window['index']}: reported {window['prompt_tokens']}, counted {counted}: {verdict}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--tokenizer", required=True, help="tokenizer dir for exact counts (e.g. the stand-in)")
    parser.add_argument("--rule", default="tx-outside-transaction")
    parser.add_argument("--repomix", help="repomix executable")
    parser.add_argument("--gitingest", help="gitingest executable")
    parser.add_argument("--repeat", type=int, default=3, help="runs per warm case; the best is kept")
    parser.add_argument("--verify", type=int, default=0, metavar="K", help="check the first K windows' counts")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="auditor-bench-"))
    repo = scratch / args.repo.resolve().name
    subprocess.run(["git", "clone", "--quiet", "--shared", str(args.repo.resolve()), str(repo)], check=True)
    auditor = [sys.executable, "-m", "auditor"]
    env = dict(os.environ, AUDITOR_CACHE_DIR=str(scratch / "cache"), HF_HUB_OFFLINE="1")
    pack = [*auditor, "pack", str(repo), "--tokenizer", args.tokenizer, "--format", "json", "--rule", args.rule]
    manifest = scratch / "windows.json"
    edits = 0

    def before_edited() -> None:
        nonlocal edits
        edits += 1
        edit_one_file(manifest, repo, edits)

    # (name, command, runs, prepare-before-each-run)
    def clear_caches() -> None:
        shutil.rmtree(scratch / "cache", ignore_errors=True)

    cases: list[tuple[str, list[str], int, object]] = [
        ("auditor pack, first window (one scan request), cold caches", [*pack, "--max-windows", "1", "-o", str(scratch / "first.json")], 1, clear_caches),
        ("auditor pack, all windows, cold caches", [*pack, "-o", str(manifest)], 1, clear_caches),
        ("auditor pack, all windows, warm, unchanged repo", [*pack, "-o", str(manifest)], args.repeat, None),
        ("auditor pack, all windows, warm, one file edited", [*pack, "-o", str(scratch / "edited.json")], args.repeat, before_edited),
        ("auditor pack, first window (one scan request), warm", [*pack, "--max-windows", "1", "-o", str(scratch / "first.json")], args.repeat, None),
    ]
    if args.repomix:
        cases.append(("repomix", [args.repomix, str(repo), "-o", str(scratch / "repomix.xml")], args.repeat, None))
    if args.gitingest:
        cases.append(("gitingest", [args.gitingest, str(repo), "-o", str(scratch / "gitingest.txt")], 1, None))

    results: dict[str, tuple[float, float]] = {}
    for name, command, runs, prepare in cases:
        best = None
        for _ in range(runs):
            if callable(prepare):
                prepare()
            wall, rss, code = run_child(command, env)
            if code != 0:
                print(f"{name}: exit {code}", file=sys.stderr)
            best = (wall, rss) if best is None or wall < best[0] else best
        results[name] = best  # type: ignore[assignment]

    reference = results.get("repomix")
    print(f"| case | wall s | peak RSS MiB |{' wall / repomix |' if reference else ''}")
    print(f"|---|---:|---:|{'---:|' if reference else ''}")
    for name, (wall, rss) in results.items():
        ratio = f" {wall / reference[0]:.2f} |" if reference else ""
        print(f"| {name} | {wall:.2f} | {rss:.0f} |{ratio}")
    if args.verify:
        print()
        for line in verify(auditor, repo, args.tokenizer, args.rule, scratch / "edited.json", args.verify, env):
            print(line)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
