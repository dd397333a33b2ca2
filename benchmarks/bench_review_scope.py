"""Review benchmark: a diff-scoped ``auditor review`` against ``--full`` on real commits.

For each commit (``REPO:COMMIT``, reviewed against its first parent) it runs four reviews
in-process, with the stand-in tokenizer counting every window:

- static engine, diff-scoped and full: the static findings' new/existing verdicts;
- a deterministic mock model, diff-scoped and full (``--no-static``, so its findings are
  the model's own and the model-finding logic decides them): the mock answers each window
  with the static pass's findings whose sink and chain lines it holds in full, text
  matching, so a window of the base answers what the base held.

It prints a Markdown table: commit, changed functions, windows and prompt tokens of head
and base for both modes, the diff-scoped share of the full review's tokens, the Spark
estimate (``auditor plan``'s ``estimate_time``) and whether the verdicts are equal::

    python benchmarks/bench_review_scope.py --tokenizer /path/to/tokenizer \\
        /work/repos/saleor:51f865fd2b /work/repos/dispatch:abc1234
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from auditor.analysis.transactions import TxOptions
from auditor.config.scan import ScanConfig
from auditor.engine.base import ChatRequest, Completion
from auditor.planning.timing import estimate_time
from auditor.progress import ProgressEvent
from auditor.report.model import ScanResult
from auditor.runs.prepare import PreparedRepository, run_static_pass, selected_rules
from auditor.runs.review import ReviewConfig, run_review
from auditor.runs.scan import run_scan

_BLOCK = re.compile(r'<<<FILE path=("(?:[^"\\]|\\.)*") view=full lines=(\d+)-(\d+)/(\d+)>>>\n(.*?)<<<END FILE', re.DOTALL)
_LINE = re.compile(r"^(\d+)\|(.*)$")


class CandidateMock:
    """A model that reports, in each window, the static findings it was shown whole: every
    finding whose sink and chain-step lines are in the window's full blocks with the text
    the finding was found on. Deterministic; it learns findings per tree (``learn``)."""

    name = "mock"

    def __init__(self) -> None:
        self.known: dict[tuple[str, int, str], list[dict]] = {}

    def identity(self) -> str:
        return "bench:candidate-mock"

    def learn(self, prepared: PreparedRepository, rule_ids: tuple[str, ...]) -> None:
        """Remember the static findings of ``prepared`` with their lines' text."""
        rules = selected_rules(rule_ids)
        static = run_static_pass(prepared, rules, TxOptions())
        for finding in static.findings:
            lines = prepared.texts[finding.path].splitlines()
            if not 0 < finding.line <= len(lines):
                continue
            steps = [(step.path, step.line, step.function) for step in finding.chain]
            texts = []
            for path, line, _ in steps:
                step_lines = prepared.texts.get(path, "").splitlines()
                texts.append(step_lines[line - 1] if 0 < line <= len(step_lines) else None)
            claim = {
                "rule": finding.rule, "title": finding.title, "severity": finding.severity.name.lower(),
                "sink": {"path": finding.path, "line": finding.line, "function": finding.function},
                "chain": [{"path": path, "line": line, "function": function} for path, line, function in steps],
                "explanation": "the static chain, as shown",
                "_lines": [(path, line, text) for (path, line, _), text in zip(steps, texts)],
            }
            self.known.setdefault((finding.path, finding.line, lines[finding.line - 1]), []).append(claim)

    def generate(self, requests, progress=None) -> list[Completion]:
        return [self._answer(request) for request in requests]

    def _answer(self, request: ChatRequest) -> Completion:
        shown: dict[str, dict[int, str]] = {}
        for match in _BLOCK.finditer(request.messages[-1].content):
            path = json.loads(match.group(1))
            for raw in match.group(5).splitlines():
                parsed = _LINE.match(raw)
                if parsed:
                    shown.setdefault(path, {})[int(parsed.group(1))] = parsed.group(2)
        claims, seen = [], set()
        for (path, line, text), found in sorted(self.known.items()):
            if shown.get(path, {}).get(line) != text:
                continue
            for claim in found:
                if all(text is None or shown.get(p, {}).get(n) == text for p, n, text in claim["_lines"]):
                    key = json.dumps({k: v for k, v in claim.items() if k != "_lines"}, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        claims.append({k: v for k, v in claim.items() if k != "_lines"})
        text = json.dumps({"findings": claims})
        return Completion(request.id, text, "", "stop", request.prompt_tokens, 10)


@dataclass
class Run:
    """One review's cost and verdicts."""

    windows: list[int] = field(default_factory=list)  # windows per scan, head first
    tokens: list[int] = field(default_factory=list)
    seconds: float = 0.0
    verdicts: dict[str, str] = field(default_factory=dict)
    functions: str = "?"


def review(repo: Path, commit: str, scan: ScanConfig, *, full: bool, mock: CandidateMock | None) -> Run:
    """Review ``commit`` against its parent; count windows, tokens and the estimate."""
    run = Run()

    def scan_function(config: ScanConfig, progress=None, *, prepared=None) -> ScanResult:
        if mock is not None and prepared is not None:
            mock.learn(prepared, config.rules)
        result = run_scan(config, progress, engine=mock, prepared=prepared) if mock else run_scan(config, progress, prepared=prepared)
        run.windows.append(len(result.windows))
        run.tokens.append(result.prompt_tokens_sent)
        run.seconds += sum(estimate_time(window.prompt_tokens, config.window.output_tokens).total_s for window in result.windows)
        return result

    def progress(event: ProgressEvent) -> None:
        found = re.match(r"diff-scoped pack: (\d+) changed function", event.message or "")
        if found:
            run.functions = found.group(1)

    config = ReviewConfig(scan=replace(scan, root=repo), base=f"{commit}~1", head=commit, full=full)
    result = run_review(config, progress, scan=scan_function).result
    review_summary = result.review
    assert review_summary is not None
    run.verdicts = {item.fingerprint: item.status for item in review_summary.findings}
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commits", nargs="+", help="REPO:COMMIT, reviewed against the commit's first parent")
    parser.add_argument("--tokenizer", required=True, help="tokenizer directory (the stand-in one)")
    parser.add_argument("--rule", action="append", default=[], help="rules (default: tx-outside-transaction)")
    args = parser.parse_args(argv)
    rules = tuple(args.rule or ["tx-outside-transaction"])
    static = ScanConfig(root=Path("."), rules=rules, engine="static")
    model = ScanConfig(root=Path("."), rules=rules, engine="mock", tokenizer=args.tokenizer, static=False, probes=0)
    print("| commit | functions changed | findings on the change (static / mock) | windows head+base: diff / full "
          "| prompt tokens head+base: diff / full | diff share | Spark estimate: diff / full | verdicts equal (static / mock) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for spec in args.commits:
        repo, commit = spec.rsplit(":", 1)
        static_diff = review(Path(repo), commit, static, full=False, mock=None)
        static_full = review(Path(repo), commit, static, full=True, mock=None)
        mock_diff = review(Path(repo), commit, model, full=False, mock=CandidateMock())
        mock_full = review(Path(repo), commit, model, full=True, mock=CandidateMock())

        def cost(run: Run) -> str:
            return "+".join(str(n) for n in (run.windows + [0])[:2])

        def tokens(run: Run) -> str:
            return "+".join(f"{n:,}" for n in (run.tokens + [0])[:2])

        share = sum(mock_diff.tokens) / max(sum(mock_full.tokens), 1)
        print(
            f"| {Path(repo).name}@{commit[:10]} | {static_diff.functions} | {len(static_diff.verdicts)} / {len(mock_diff.verdicts)} "
            f"| {cost(mock_diff)} / {cost(mock_full)} | {tokens(mock_diff)} / {tokens(mock_full)} | {share:.1%} "
            f"| {mock_diff.seconds / 60:.1f} / {mock_full.seconds / 60:.1f} min "
            f"| {'yes' if static_diff.verdicts == static_full.verdicts else 'NO'} / "
            f"{'yes' if mock_diff.verdicts == mock_full.verdicts else 'NO'} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
