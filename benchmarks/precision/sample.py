"""Draw the judged precision sample of the static tx-outside-transaction pass.

    python benchmarks/precision/sample.py /work/repos/saleor /work/repos/healthchecks \
        /work/repos/full-stack-fastapi-template /work/repos/CTFd /work/repos/FitTrackee \
        /work/repos/lemur

Each repository is scanned with the static engine (`auditor scan REPO --rule
tx-outside-transaction --engine static --format json --no-cache --min-severity low`, the
auditor next to this interpreter), so every severity is counted. Findings shown are those
of severity `--min-severity` or worse: `high` (critical and high, the CLI's default) unless
told `medium` (the set judged first, before the CLI had the option). From each repository's default
findings, the first `--first` in report order (default 10: what a user reads first) are
always drawn, then the rest of `--cap`, sorted by path, line, function and fingerprint, with
random.Random(seed) (all of them when it has fewer), so no repository dominates. Each record
keeps its `rank`: its 1-based position among the findings the report shows by default.

sample.json holds ids, paths, line numbers and titles only, never the scanned code: the
effect list keeps each effect's line, kind and callee name, not its source expression.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import subprocess
import sys
from pathlib import Path

RULE = "tx-outside-transaction"
SEVERITIES = ("critical", "high", "medium", "low")
EFFECT = re.compile(r"line (\d+): (?:calls (\S+) )?(?:\S+\(\.\.\.\) )?\(([^)]*)\)")


def scan(repo: Path) -> list[dict]:
    auditor = Path(sys.executable).with_name("auditor")
    command = [str(auditor), "scan", str(repo), "--rule", RULE, "--engine", "static",
               "--format", "json", "--no-cache", "--min-severity", "low"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"scan of {repo} failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout)["findings"]


def commit_of(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def effects_of(explanation: str) -> list[dict]:
    path_part = explanation.split("On one path: ", 1)[-1]
    effects = []
    for match in EFFECT.finditer(path_part):
        line, callee, kind = match.groups()
        effect = {"line": int(line), "kind": kind}
        if callee:
            effect["callee"] = callee
        effects.append(effect)
    return effects


def record(repo: Path, commit: str, finding: dict, rank: int) -> dict:
    return {
        "repo": repo.name,
        "rank": rank,
        "commit": commit,
        "rule": finding["rule"],
        "severity": finding["severity"],
        "path": finding["path"],
        "function": finding["function"],
        "line": finding["line"],
        "title": finding["title"],
        "fingerprint": finding["fingerprint"],
        "chain": [f"{step['path']}:{step['function']}:{step['line']}"
                  for step in finding["chain"]],
        "effects": effects_of(finding["explanation"]),
    }


LABEL_FIELDS = ("label", "reason", "cause", "judged_at")


def carry_labels(sample: list[dict], judged_files: list[Path]) -> int:
    """Copy the label fields of earlier judgements onto the same findings of ``sample``
    (matched by fingerprint, else by repo, path, function and the same effects, and reached
    through the same chain of functions); how many were carried."""
    by_fingerprint: dict[str, dict] = {}
    by_place: dict[tuple, dict] = {}
    for path in judged_files:
        for item in json.loads(path.read_text(encoding="utf-8"))["judged"]:
            by_fingerprint.setdefault(item["fingerprint"], item)
            by_place.setdefault((item["repo"], item["path"], item["function"]), item)
    carried = 0
    for finding in sample:
        earlier = by_fingerprint.get(finding["fingerprint"])
        if earlier is None:  # the same function and the same effects, its first line moved
            earlier = by_place.get((finding["repo"], finding["path"], finding["function"]))
            if earlier is not None and _effects(earlier) != _effects(finding):
                earlier = None
        if earlier is None or "label" not in earlier or _route(earlier) != _route(finding):
            continue  # a label judges a chain too: reached another way, the finding is judged again
        finding.update({key: earlier[key] for key in LABEL_FIELDS if key in earlier})
        carried += 1
    return carried


def _effects(finding: dict) -> list[tuple[str, str]]:
    """The effects' kinds and callees, line numbers left out."""
    return [(effect["kind"], effect.get("callee", "")) for effect in finding["effects"]]


def _route(finding: dict) -> list[str]:
    """The chain's functions (``path:function``), line numbers left out (lines move)."""
    return [step.rsplit(":", 1)[0] for step in finding["chain"]]


def order_key(finding: dict) -> tuple:
    return (finding["path"], finding["line"], finding["function"], finding["fingerprint"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--cap", type=int, default=15, help="most findings drawn per repo")
    parser.add_argument("--first", type=int, default=10,
                        help="the first N findings in report order are always drawn (within --cap)")
    parser.add_argument("--min-severity", choices=SEVERITIES[:3], default="high",
                        help="lowest severity shown (and sampled)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("sample.json"))
    parser.add_argument("--labels", type=Path, action="append", default=[],
                        help="an earlier judged file whose labels carry over to the same findings "
                             "(same fingerprint, else same repo, path and function); repeatable, first wins")
    args = parser.parse_args()

    shown_severities = SEVERITIES[: SEVERITIES.index(args.min_severity) + 1]
    rng = random.Random(args.seed)
    repos, sample = [], []
    for repo in sorted(args.repos, key=lambda p: p.name):
        findings = scan(repo.resolve())
        commit = commit_of(repo)
        by_severity = collections.Counter(f["severity"] for f in findings)
        # The scan's JSON lists findings in report order: a finding's rank is its place there.
        in_order = [f for f in findings if f["severity"] in shown_severities]
        rank = {f["fingerprint"]: position for position, f in enumerate(in_order, start=1)}
        first = in_order[: min(args.first, args.cap)]
        rest = sorted(in_order[len(first):], key=order_key)
        drawn = first + rng.sample(rest, min(args.cap - len(first), len(rest)))
        shown = in_order
        repos.append({"repo": repo.name, "commit": commit, "findings": len(findings),
                      "by_severity": dict(sorted(by_severity.items())),
                      "shown_by_default": len(shown), "hidden_low": by_severity["low"],
                      "sampled": len(drawn)})
        sample.extend(record(repo, commit, f, rank[f["fingerprint"]])
                      for f in sorted(drawn, key=lambda f: rank[f["fingerprint"]]))
        print(f"{repo.name}: {len(findings)} findings, {len(shown)} shown by default, "
              f"{len(drawn)} sampled", file=sys.stderr)

    carried = carry_labels(sample, args.labels)
    if args.labels:
        print(f"labels carried over: {carried} of {len(sample)}; the rest are to judge", file=sys.stderr)
    document = {"rule": RULE, "engine": "static", "seed": args.seed, "cap_per_repo": args.cap,
                "first_in_report_order": args.first,
                "shown_by_default": list(shown_severities), "repos": repos, "sample": sample}
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
