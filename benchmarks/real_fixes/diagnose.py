"""Why is a real-fix case missed? Runs the static pass on the case's parent tree and prints,
per case, what ``auditor.analysis.transactions.explain`` says about the function: whether it
was reported (or why not), its entry path and the boundaries on it, its effects (and which
of the case's write lines are none), its grade.

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
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench_real_fixes import CASES, RULE, export_tree, mirror_dir, names_match  # noqa: E402

from auditor.analysis.transactions.explain import AnalysisInputs, explain  # noqa: E402
from auditor.rules.loader import builtin_rules  # noqa: E402
from auditor.runs.prepare import prepare_repository  # noqa: E402


def diagnose(case: dict, tree: Path) -> list[str]:
    """What the static pass decided about the case's function, through the public
    ``explain`` API, plus the case's write lines it does not count as effects."""
    prepared = prepare_repository(tree, use_cache=False)
    path = case["path"]
    index = prepared.indexes.get(path)
    if index is None:
        return [f"file not indexed: {path}"]
    qualnames = [d.qualname for d in index.definitions if d.kind != "class" and names_match(case["function"], d.qualname)]
    if not qualnames:
        return [f"function {case['function']} not among the file's definitions"]
    inputs = AnalysisInputs(prepared.indexes, prepared.texts, builtin_rules()[RULE], prepared.graph)
    explanation = explain(inputs, path, qualnames[0])
    lines = explanation.describe().splitlines()
    effect_lines = {effect.line for effect in explanation.effects}
    for line in case["write_lines"]:
        if line not in effect_lines:
            calls = sorted({call.callee for call in index.calls if call.line == line})
            lines.append(f"  write line {line} is no effect of the function: calls {calls or 'none indexed'}")
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
