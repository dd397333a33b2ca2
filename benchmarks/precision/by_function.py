"""A judged sample's labels against today's default findings, looked up by function.

    python benchmarks/precision/by_function.py benchmarks/precision/judged-round13-fresh.json /work/fresh13

Each repository of the judged file is scanned again (the auditor next to this interpreter,
`--engine static --no-cache`, default severities) from ROOT/<repo>. A judged finding still
counts when a default finding of the same (path, function) is shown: a fix that changes a
finding's effects changes its fingerprint, so fingerprints cannot carry labels across rule
changes. Prints, per repository, what is shown and which judged findings are gone, then the
labels of those still shown (strict precision, FALSE share).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

SHOWN = ("critical", "high")


def shown_functions(repo: Path) -> set[tuple[str, str]]:
    auditor = Path(sys.executable).with_name("auditor")
    command = [str(auditor), "scan", str(repo), "--rule", "tx-outside-transaction", "--engine", "static",
               "--format", "json", "--no-cache", "--min-severity", "low"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"scan of {repo} failed ({done.returncode}): {done.stderr}")
    return {(item["path"], item["function"]) for item in json.loads(done.stdout)["findings"] if item["severity"] in SHOWN}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("judged", type=Path)
    parser.add_argument("root", type=Path, help="the directory holding each judged repository by name")
    args = parser.parse_args()
    judged = json.loads(args.judged.read_text())["judged"]
    kept: collections.Counter[str] = collections.Counter()
    gone: collections.Counter[str] = collections.Counter()
    total = 0
    for repo in sorted({record["repo"] for record in judged}):
        shown = shown_functions(args.root / repo)
        total += len(shown)
        records = [record for record in judged if record["repo"] == repo]
        for record in sorted(records, key=lambda item: item["rank"]):
            if (record["path"], record["function"]) in shown:
                kept[record["label"]] += 1
            else:
                gone[record["label"]] += 1
                print(f"  gone: {repo} {record['label']} {record['function']}")
        unjudged = len(shown - {(record["path"], record["function"]) for record in records})
        print(f"{repo}: {len(shown)} shown by default, {unjudged} of them not judged")
    still = sum(kept.values())
    print(f"shown {total}; judged and still shown {still}: TRUE {kept['TRUE']}, WEAK {kept['WEAK']}, FALSE {kept['FALSE']}")
    if still:
        print(f"strict precision {kept['TRUE'] / still:.2f}, FALSE {kept['FALSE'] / still:.0%}; gone: {dict(sorted(gone.items()))}")


if __name__ == "__main__":
    main()
