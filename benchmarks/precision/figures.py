"""Figures of the judged precision sample: strict precision (TRUE / sampled) and the share of
FALSE, overall, per repository and per severity, plus the causes of FALSE and WEAK labels.

    python benchmarks/precision/figures.py [benchmarks/precision/judged.json]

The overall figure is over the sample as drawn (capped per repository); the weighted figure
weights each repository's precision by its count of findings shown by default, an estimate
of what a user scanning all six repositories would see.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

LABELS = ("TRUE", "WEAK", "FALSE")


def row(name: str, labels: list[str]) -> str:
    counts = collections.Counter(labels)
    n = len(labels)
    cells = " | ".join(str(counts[label]) for label in LABELS)
    return (f"| {name} | {n} | {cells} | {counts['TRUE'] / n:.2f} | "
            f"{counts['FALSE'] / n:.0%} |")


def table(title: str, groups: dict[str, list[str]]) -> list[str]:
    lines = [f"| {title} | sampled | TRUE | WEAK | FALSE | strict precision | FALSE share |",
             "|---|---|---|---|---|---|---|"]
    lines += [row(name, labels) for name, labels in groups.items()]
    return lines


def first_ten(ranked: list[dict]) -> list[str]:
    """Per repository, the verdicts of the report's first 10 findings in report order (T/W/F),
    and whether every TRUE the sample holds is among them."""
    lines = ["| repo | first 10 in report order | TRUE in first 10 | TRUE after 10 (rank) |",
             "|---|---|---|---|"]
    by_repo: dict[str, list[dict]] = collections.defaultdict(list)
    for finding in ranked:
        by_repo[finding["repo"]].append(finding)
    for repo, items in sorted(by_repo.items()):
        items.sort(key=lambda f: f["rank"])
        head = [f["label"][0] for f in items if f["rank"] <= 10]
        late = [str(f["rank"]) for f in items if f["rank"] > 10 and f["label"] == "TRUE"]
        lines.append(f"| {repo} | {' '.join(head)} | {head.count('T')} | {', '.join(late) or '-'} |")
    return lines


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("judged.json")
    document = json.loads(path.read_text())
    # A judged file keeps its findings under "judged"; sample.py's output (labels carried
    # over with --labels) under "sample".
    findings = document["judged"] if "judged" in document else document["sample"]
    judged = [finding for finding in findings if finding.get("label") in LABELS]
    unjudged = len(findings) - len(judged)
    if unjudged:
        print(f"{unjudged} finding(s) have no label yet and are left out of every figure below.\n")

    by_repo: dict[str, list[str]] = collections.defaultdict(list)
    by_severity: dict[str, list[str]] = collections.defaultdict(list)
    for finding in judged:
        by_repo[finding["repo"]].append(finding["label"])
        by_severity[finding["severity"]].append(finding["label"])

    out = table("repo", dict(sorted(by_repo.items())))
    out.append(row("**all**", [f["label"] for f in judged]))
    out.append("")
    order = ("critical", "high", "medium")
    out += table("severity", {s: by_severity[s] for s in order if s in by_severity})
    out.append("")

    shown = {r["repo"]: r["shown_by_default"] for r in document["repos"]}
    total = sum(shown[repo] for repo in by_repo)
    weighted = sum(shown[repo] * labels.count("TRUE") / len(labels) for repo, labels in by_repo.items()) / total
    weighted_false = sum(shown[repo] * labels.count("FALSE") / len(labels) for repo, labels in by_repo.items()) / total
    out.append(f"Weighted by findings shown per repo: strict precision {weighted:.2f}, "
               f"FALSE {weighted_false:.0%}.")
    out.append("")

    ranked = [f for f in judged if "rank" in f]
    if ranked:
        out += first_ten(ranked)
        out.append("")

    causes = collections.Counter((f["label"], f["cause"]) for f in judged if f.get("cause"))
    out += ["| label | cause | count |", "|---|---|---|"]
    out += [f"| {label} | {cause} | {n} |"
            for (label, cause), n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))]
    print("\n".join(out))


if __name__ == "__main__":
    main()
