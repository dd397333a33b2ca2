"""Static-pass benchmark: index + call graph + tx-outside-transaction analysis, cold and warm
index cache, side by side with Semgrep running an intraprocedural "write outside atomic" rule.

    python benchmarks/bench_static.py REPO [--semgrep benchmarks/work/venv/bin/semgrep]

Every tool is a child of this process; wall time and peak RSS are read per child (os.wait4).
Auditor's finding count and Semgrep's result count are printed too: they answer different
questions (Semgrep has no entry points or chains), so compare cost, not counts.
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


def run_child(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run ``command``; return (wall seconds, peak RSS MiB, exit status) of that child alone."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--semgrep", help="semgrep executable")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="auditor-static-bench-"))
    env = dict(os.environ, AUDITOR_CACHE_DIR=str(scratch / "cache"))
    report = scratch / "static.json"
    scan = [sys.executable, "-m", "auditor", "scan", str(args.repo), "--engine", "static",
            "--rule", "tx-outside-transaction", "--format", "json", "-o", str(report)]
    rows = []
    for label in ("auditor static, cold index cache", "auditor static, warm index cache"):
        wall, rss, code = run_child(scan, env)
        findings = len(json.loads(report.read_text())["findings"]) if code == 0 else f"exit {code}"
        rows.append((label, wall, rss, findings))
    if args.semgrep:
        rule = scratch / "rule.yml"
        rule.write_text(SEMGREP_RULE)
        output = scratch / "semgrep.json"
        command = [args.semgrep, "scan", "--metrics=off", "--disable-version-check", "--config", str(rule),
                   "--json", "-o", str(output), "--exclude", "tests", str(args.repo)]
        wall, rss, code = run_child(command, env)
        results = len(json.loads(output.read_text())["results"]) if output.exists() else f"exit {code}"
        rows.append(("semgrep (intraprocedural rule)", wall, rss, results))
    print("| tool | wall s | peak RSS MiB | findings |")
    print("|---|---:|---:|---:|")
    for label, wall, rss, findings in rows:
        print(f"| {label} | {wall:.2f} | {rss:.0f} | {findings} |")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
