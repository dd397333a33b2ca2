"""Static-pass benchmark: index + call graph + tx-outside-transaction analysis, cold and warm
index cache, side by side with Semgrep running an intraprocedural "write outside atomic" rule,
or with another auditor build.

    python benchmarks/bench_static.py REPO [--semgrep benchmarks/work/venv/bin/semgrep]
    python benchmarks/bench_static.py REPO --baseline /path/to/old/.venv/bin/auditor --rounds 5 [--warm-runs 3]

Every tool is a child of this process; wall time and peak RSS are read per child (os.wait4).
Each round runs every auditor build once on a fresh cache directory (cold) and
``--warm-runs`` more times on that directory (warm). With ``--baseline``, the baseline build
and this one (``--auditor``, default ``python -m auditor`` of this interpreter) take turns,
the first of each round alternating, so load from other processes on a shared machine falls
on both alike; the medians and this build's ratio to the baseline are printed.

Auditor's finding count and Semgrep's result count are printed too: they answer different
questions (Semgrep has no entry points or chains), so compare cost, not counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SEMGREP_RULE = """rules:
  - id: write-outside-atomic
    languages: [python]
    severity: WARNING
    message: ORM write outside transaction.atomic
    patterns:
      - pattern-either:
          - pattern: $X.save(...)
          - pattern: $M.objects.create(...)
          - pattern: $M.objects.filter(...).update(...)
          - pattern: $X.delete(...)
      - pattern-not-inside: |
          with transaction.atomic(...):
            ...
      - pattern-not-inside: |
          @transaction.atomic
          def $F(...):
            ...
"""


@dataclass(frozen=True)
class Sample:
    """One child run: wall seconds, peak RSS in MiB and the findings it reported (or why not)."""

    wall: float
    rss: float
    findings: int | str


def run_child(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run ``command``; return (wall seconds, peak RSS MiB, exit status) of that child alone."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def scan_command(auditor: list[str], repo: Path, report: Path) -> list[str]:
    return [*auditor, "scan", str(repo), "--engine", "static", "--rule", "tx-outside-transaction",
            "--format", "json", "-o", str(report)]  # fmt: skip


def cold_and_warm(auditor: list[str], repo: Path, scratch: Path, warm_runs: int = 1) -> tuple[Sample, list[Sample]]:
    """One cold run (empty cache directory), then ``warm_runs`` warm runs (the same
    directory) of a build."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=scratch))
    env = dict(os.environ, AUDITOR_CACHE_DIR=str(cache))
    report = cache / "static.json"
    samples = []
    for _ in range(1 + warm_runs):
        report.unlink(missing_ok=True)
        wall, rss, code = run_child(scan_command(auditor, repo, report), env)
        findings = len(json.loads(report.read_text())["findings"]) if code == 0 and report.exists() else f"exit {code}"
        samples.append(Sample(wall, rss, findings))
    shutil.rmtree(cache, ignore_errors=True)
    return samples[0], samples[1:]


def median_sample(samples: list[Sample]) -> Sample:
    findings = {sample.findings for sample in samples}
    shown = samples[0].findings if len(findings) == 1 else "varies: " + ", ".join(sorted(map(str, findings)))
    return Sample(statistics.median(s.wall for s in samples), statistics.median(s.rss for s in samples), shown)


def compare(
    builds: dict[str, list[str]], repo: Path, rounds: int, scratch: Path, warm_runs: int = 1
) -> dict[str, tuple[list[Sample], list[Sample]]]:
    """``rounds`` cold+warm series per build, the builds taking turns (the first alternating)."""
    results: dict[str, tuple[list[Sample], list[Sample]]] = {name: ([], []) for name in builds}
    names = list(builds)
    for number in range(rounds):
        order = names if number % 2 == 0 else names[::-1]
        for name in order:
            cold, warms = cold_and_warm(builds[name], repo, scratch, warm_runs)
            results[name][0].append(cold)
            results[name][1].extend(warms)
            warm_text = ", ".join(f"{warm.wall:.2f} s" for warm in warms)
            print(f"round {number + 1}/{rounds} {name}: cold {cold.wall:.2f} s {cold.rss:.0f} MiB, "
                  f"warm {warm_text} {warms[0].rss:.0f} MiB", file=sys.stderr)  # fmt: skip
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--semgrep", help="semgrep executable")
    parser.add_argument("--auditor", help="auditor executable to measure (default: python -m auditor of this interpreter)")
    parser.add_argument("--baseline", help="another auditor executable to time against, in alternating rounds")
    parser.add_argument("--rounds", type=int, default=1, help="cold+warm series per build (medians are reported)")
    parser.add_argument("--warm-runs", type=int, default=1, help="warm runs after each cold run")
    args = parser.parse_args()
    if args.rounds < 1 or args.warm_runs < 1:
        parser.error("--rounds and --warm-runs must be at least 1")
    scratch = Path(tempfile.mkdtemp(prefix="auditor-static-bench-"))
    builds = {"auditor": [args.auditor] if args.auditor else [sys.executable, "-m", "auditor"]}
    if args.baseline:
        builds = {"baseline": [args.baseline], **builds}
    results = compare(builds, args.repo, args.rounds, scratch, args.warm_runs)
    rows = []
    for name, (colds, warms) in results.items():
        label = f"{name} ({builds[name][-1] if name == 'baseline' or args.auditor else 'python -m auditor'})"
        rows.append((f"{label} static, cold index cache", median_sample(colds)))
        rows.append((f"{label} static, warm index cache", median_sample(warms)))
    if args.semgrep:
        rule = scratch / "rule.yml"
        rule.write_text(SEMGREP_RULE)
        output = scratch / "semgrep.json"
        command = [args.semgrep, "scan", "--metrics=off", "--disable-version-check", "--config", str(rule),
                   "--json", "-o", str(output), "--exclude", "tests", str(args.repo)]
        wall, rss, code = run_child(command, dict(os.environ))
        results_count = len(json.loads(output.read_text())["results"]) if output.exists() else f"exit {code}"
        rows.append(("semgrep (intraprocedural rule)", Sample(wall, rss, results_count)))
    heading = "median wall s" if args.rounds > 1 else "wall s"
    print(f"| tool | {heading} | peak RSS MiB | findings |")
    print("|---|---:|---:|---:|")
    for label, sample in rows:
        print(f"| {label} | {sample.wall:.2f} | {sample.rss:.0f} | {sample.findings} |")
    if args.baseline:
        print()
        print(f"Ratio auditor / baseline (medians of {args.rounds} round{'s' if args.rounds > 1 else ''}, "
              f"{args.warm_runs} warm run{'s' if args.warm_runs > 1 else ''} each):")  # fmt: skip
        print("| cache | wall | peak RSS |")
        print("|---|---:|---:|")
        for position, cache in enumerate(("cold", "warm")):
            mine, theirs = median_sample(results["auditor"][position]), median_sample(results["baseline"][position])
            print(f"| {cache} | {mine.wall / theirs.wall:.2f}x | {mine.rss / theirs.rss:.2f}x |")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
