"""Why is a real-fix case missed? Runs the static pass's pieces on the case's parent tree and
prints, per case: whether the function is indexed, which of its calls count as writes (and
which of the case's write lines do not), whether the writes are covered, who calls it, and
whether any entry point reaches it (with and without transaction boundaries).

    .venv/bin/python benchmarks/real_fixes/diagnose.py [--mirrors /work/.mirror] [--cases ID,...]

Runs inside auditor's own interpreter (it imports ``auditor``); uses the exporter of
``bench_real_fixes.py``. Read-only diagnostics: nothing here is part of the scoring.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import deque
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench_real_fixes import CASES, RULE, export_tree, mirror_dir, names_match  # noqa: E402

from auditor.callgraph.graph import FunctionRef  # noqa: E402
from auditor.analysis.entrypoints import find_entry_points  # noqa: E402
from auditor.analysis.transactions.analysis import TxOptions, _Analysis, _enclosing_of  # noqa: E402
from auditor.rules.loader import builtin_rules  # noqa: E402
from auditor.runs.prepare import prepare_repository  # noqa: E402


def callers_upward(graph, ref: FunctionRef, depth: int = 3) -> list[str]:
    """Caller chains up to ``depth`` levels, as text."""
    out: list[str] = []
    frontier = [(ref, "")]
    for _ in range(depth):
        nxt = []
        for node, trail in frontier:
            for edge in graph.callers(node):
                text = f"{edge.caller.qualname}@{edge.caller.path}:{edge.line}{' ~' if edge.approximate else ''}"
                nxt.append((edge.caller, f"{text} -> {trail}" if trail else text))
        if not nxt:
            break
        out = [t for _, t in nxt]
        frontier = nxt[:20]
    return out[:8]


def diagnose(case: dict, tree: Path) -> list[str]:
    lines: list[str] = []
    rule = builtin_rules()[RULE]
    prepared = prepare_repository(tree, use_cache=False)
    indexes, graph, texts = prepared.indexes, prepared.graph, prepared.texts
    path = case["path"]
    index = indexes.get(path)
    if index is None:
        return [f"file not indexed: {path}"]
    qualnames = [d.qualname for d in index.definitions if names_match(case["function"], d.qualname)]
    qualnames = [q for q in qualnames if any(d.qualname == q and d.kind != "class" for d in index.definitions)]
    if not qualnames:
        return [f"function {case['function']} not among the file's definitions"]
    ref = FunctionRef(path, qualnames[0])
    entries = find_entry_points(indexes, graph, rule, texts)
    analysis = _Analysis(indexes, texts, rule, graph, TxOptions())
    facts = analysis.facts.get(path)
    sinks = [site.call for site in facts.sites.get(ref, [])] if facts else []
    enclosing = _enclosing_of(ref)
    sink_lines = sorted({c.line for c in sinks})
    covered = sorted({c.line for c in sinks if facts.covered(enclosing, c.line, c.callee, c.arguments)}) if facts else []
    lines.append(f"function: {ref.qualname} ({'entry point: ' + next((e.kind + '/' + e.detail for e in entries if e.ref == ref), '') if any(e.ref == ref for e in entries) else 'not an entry point'})")
    lines.append(f"writes recognised in it: lines {sink_lines or 'none'}" + (f"; covered: {covered}" if covered else ""))
    calls_at = {}
    for call in index.calls:
        if call.enclosing == ref.qualname or (call.enclosing and call.enclosing.startswith(ref.qualname + ".")):
            calls_at.setdefault(call.line, []).append(call.callee)
    for w in case["write_lines"]:
        if w in sink_lines:
            continue
        callees = calls_at.get(w, [])
        out_edges = [e.callee.qualname for e in graph.callees(ref) if e.line == w]
        lines.append(f"  write line {w} not a sink: calls {callees or 'none indexed'}"
                     + (f" -> resolves to {out_edges}" if out_edges else " (unresolved)"))
    reached: dict[FunctionRef, tuple] = {}
    queue: deque = deque()
    for entry in entries:
        if entry.ref not in reached:
            reached[entry.ref] = (entry, ())
            queue.append(entry.ref)
    while queue:
        node = queue.popleft()
        entry, trail = reached[node]
        for edge in graph.callees(node):
            if edge.callee not in reached:
                reached[edge.callee] = (entry, (*trail, edge))
                queue.append(edge.callee)
    if ref in reached:
        entry, trail = reached[ref]
        chain = " -> ".join([entry.ref.qualname] + [e.callee.qualname for e in trail])
        lines.append(f"reachable (ignoring boundaries) from {entry.kind}/{entry.detail}: {chain}")
        blocked = [e for e in trail if analysis._edge_blocked(e, analysis._call_for(e))]
        if analysis._entry_covered(entry) or blocked:
            lines.append(f"  that path is covered: entry covered={analysis._entry_covered(entry)}, blocked edges="
                         f"{[(b.caller.qualname, b.line) for b in blocked]}")
    else:
        lines.append(f"not reachable from any of {len(entries)} entry points")
        up = callers_upward(graph, ref)
        lines.append(f"  callers: {up if up else 'none resolved'}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--cases", default="")
    parser.add_argument("--keep", type=Path, help="reuse/keep exported trees here")
    args = parser.parse_args()
    cases = json.loads(CASES.read_text(encoding="utf-8"))
    if args.cases:
        wanted = {c.strip() for c in args.cases.split(",")}
        cases = [c for c in cases if c["id"] in wanted]
    scratch = Path(tempfile.mkdtemp(prefix="auditor-diagnose-"))
    root = args.keep or scratch
    for case in cases:
        print(f"== {case['id']}: {case['path']} {case['function']} (writes {case['write_lines']})")
        git_dir = mirror_dir(args.mirrors, case["repo"])
        if git_dir is None:
            print("  no mirror")
            continue
        tree = root / case["repo"].replace("/", "+") / case["parent_commit"][:12]
        if not (tree.is_dir() and any(tree.iterdir())):
            error = export_tree(git_dir, case["parent_commit"], tree)
            if error:
                print(f"  {error}")
                continue
        try:
            for line in diagnose(case, tree):
                print(f"  {line}")
        except Exception as exc:  # diagnostics only
            print(f"  diagnosis failed: {type(exc).__name__}: {exc}")
        sys.stdout.flush()
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
