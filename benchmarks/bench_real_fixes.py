"""Real-fix benchmark for ``tx-outside-transaction``: historical upstream commits that made
existing writes atomic (the buggy/fixed pair method).

    python benchmarks/bench_real_fixes.py --auditor .venv/bin/auditor \
        [--mirrors /work/.mirror] [--cases ID,...] [--json OUT] [--markdown OUT] [--timeout 300] [--keep DIR]
    python benchmarks/bench_real_fixes.py --render OUT.json --markdown OUT.md   # no scans

For every case in ``benchmarks/real_fixes/cases.json`` the parent and the fix trees are exported
from the bare mirror ``MIRRORS/owner+name/repo`` (the layout ``fetch github:owner/name``
creates; ``MIRRORS/owner+name`` itself is accepted too when it is a git directory) with
``git archive COMMIT | tar -x`` and the whole tree is scanned once per distinct commit:

    auditor scan TREE --rule tx-outside-transaction --engine static --format json --no-cache

Scoring, per case:

* reported at parent: some finding in the parent's report has a chain step (or the sink) in
  the case's file whose function name matches the case's function (equal, or the shorter
  dotted name is the tail of the longer: ``Storage.createEntry`` ~ ``createEntry``, but
  ``Post.delete`` !~ ``Topic.delete``), or a finding whose sink is in that file at one of
  ``write_lines`` +/-2.
* reported through a call ('call'): otherwise, some finding's own sequence calls the
  case's function by its qualname (``line N: calls move_to_trash (5 writes)``), and the
  qualname's first name is defined once in the tree (so the call is into this function):
  the helper's writes are reported as part of the caller's sequence. At the fix, such a
  call still counted (not as "its own transaction") is held against the fix.
* reported in a sequence ('sequence'): otherwise, some finding's ``sequence`` (every effect
  on its path, where it happens) holds effects at two or more lines of the case's function:
  the writes are counted in a caller's sequence some calls above them
  (``save_kobocat_user`` -> ``KobocatUser.sync`` -> the case's ``KobocatDigestPartial.sync``).
* silent after fix: no finding in the fix's report has its sink in the case's function (file
  and name as above), and no finding's sequence holds effects at two or more of its lines (a
  fixed SQLAlchemy function still commits once, and that commit ends its transaction).
  Findings whose chain only passes through the function on the way to writes elsewhere are
  counted separately (``fix_chains_through_function``), not held against the fix. Sink lines
  are not used at the fix (lines move).

Every case is scored twice: on the findings ``--min-severity`` shows (default ``high``, what
a user sees by default) and on every finding (``any_severity`` in the JSON); the totals split
both by the round that added the case (``round`` in cases.json, absent for rounds 1 to 3).

A scan that fails, times out or reports an incomplete result (exit 5/6, ``complete: false``)
makes the affected cases ``error``; the others still run. Totals: recall on parents, the
silent-after-fix rate over all cases and over the cases reported at the parent (a fix that is
"recognised"), and every miss with the number of findings in that file and a reason hint.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = HERE / "real_fixes" / "cases.json"
RULE = "tx-outside-transaction"
LINE_SLACK = 2
# Media and archives: never read by the scan, and most of the export time in asset-heavy repos.
SKIP_EXTENSIONS = frozenset(
    "png jpg jpeg gif ico bmp webp tif tiff psd svgz woff woff2 ttf otf eot pdf zip gz tgz bz2 xz 7z jar war "
    "mp3 mp4 m4a ogg wav webm mov avi flac so dll dylib exe bin class pyc mo".split())


@dataclass
class ScanOutcome:
    """One scan of one exported tree."""

    ok: bool
    findings: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    exit_code: int | None = None
    definitions: Counter = field(default_factory=Counter)


def mirror_dir(mirrors: Path, repo: str) -> Path | None:
    """The bare git directory for ``owner/name`` under ``mirrors``, or None."""
    base = mirrors / repo.replace("/", "+")
    for candidate in (base / "repo", base, mirrors / repo.replace("/", "__"), mirrors / repo):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def export_tree(git_dir: Path, commit: str, dest: Path) -> str:
    """Write the tree of ``commit`` into ``dest``; return an error text or ''.

    Uses ``git ls-tree`` + ``git cat-file --batch`` rather than ``git archive``: a fetched
    snapshot lacks blobs of 4 MiB and more (and LFS content), which makes ``git archive`` fail
    for the whole tree. Missing blobs, symlinks and submodules are skipped.
    """
    dest.mkdir(parents=True, exist_ok=True)
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "--full-tree", commit],
                             capture_output=True)
    if listing.returncode != 0:
        return f"git ls-tree {commit[:10]} failed: {listing.stderr.decode(errors='replace').strip()[:300]}"
    entries = []
    for record in listing.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, sha = meta.split(b" ")
        if kind != b"blob" or mode == b"120000":
            continue
        rel = raw_path.decode("utf-8", errors="surrogateescape")
        if rel.rsplit(".", 1)[-1].lower() in SKIP_EXTENSIONS:
            continue
        entries.append((sha.decode(), rel, mode == b"100755"))
    batch = subprocess.Popen(["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert batch.stdin is not None and batch.stdout is not None

    def feed() -> None:
        try:
            for sha, _, _ in entries:
                batch.stdin.write(sha.encode() + b"\n")
        except BrokenPipeError:
            pass
        finally:
            batch.stdin.close()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    missing = 0
    root = dest.resolve()
    try:
        for sha, rel, executable in entries:
            header = batch.stdout.readline().split()
            if len(header) < 3 or header[1] == b"missing":
                missing += 1
                continue
            data = batch.stdout.read(int(header[2]))
            batch.stdout.read(1)  # the newline after the object
            target = (dest / rel)
            if not str(target.resolve()).startswith(str(root)):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if executable:
                target.chmod(0o755)
    finally:
        batch.stdout.read()
        writer.join()
        batch.wait()
    if not entries:
        return f"commit {commit[:10]} has no files"
    if missing == len(entries):
        return f"no blob of {commit[:10]} is in the mirror"
    return ""


def run_scan(auditor: str, tree: Path, timeout: float, scratch: Path) -> ScanOutcome:
    """Static scan of ``tree`` for the tx rule; parse the JSON report."""
    report = scratch / f"report-{os.getpid()}-{time.monotonic_ns()}.json"
    env = dict(os.environ, AUDITOR_CACHE_DIR=str(scratch / "cache"))
    command = [auditor, "scan", str(tree), "--rule", RULE, "--engine", "static",
               "--format", "json", "--output", str(report), "--no-cache", "--min-severity", "low"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, timeout=timeout, env=env, cwd=str(tree))
    except subprocess.TimeoutExpired:
        return ScanOutcome(False, error=f"timeout after {timeout:.0f}s", seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    text = report.read_text(encoding="utf-8") if report.is_file() else proc.stdout.decode(errors="replace")
    report.unlink(missing_ok=True)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        tail = proc.stderr.decode(errors="replace").strip()[-400:]
        return ScanOutcome(False, error=f"exit {proc.returncode}, no JSON report: {tail}", seconds=seconds,
                           exit_code=proc.returncode)
    if proc.returncode not in (0, 1):
        return ScanOutcome(False, findings=data.get("findings", []), seconds=seconds, exit_code=proc.returncode,
                           error=f"exit {proc.returncode} (incomplete scan)")
    if not data.get("complete", True):
        return ScanOutcome(False, findings=data.get("findings", []), seconds=seconds, exit_code=proc.returncode,
                           error="report says complete: false")
    findings = [f for f in data.get("findings", []) if f.get("rule") == RULE]
    return ScanOutcome(True, findings=findings, seconds=seconds, exit_code=proc.returncode, definitions=defined_names(tree))


def names_match(case_name: str, found: str | None) -> bool:
    """Equal, or the shorter dotted name is the tail of the longer (``Storage.createEntry`` ~
    ``createEntry``; ``A.save`` !~ ``B.save``)."""
    if not found:
        return False
    if case_name == found:
        return True
    a, b = case_name.split("."), found.split(".")
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return long_[-len(short):] == short


def same_path(a: str | None, b: str) -> bool:
    if not a:
        return False
    a = a.replace("\\", "/").lstrip("./")
    b = b.replace("\\", "/").lstrip("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def steps(finding: dict[str, Any]) -> list[dict[str, Any]]:
    """The chain steps plus the sink as a step."""
    out = list(finding.get("chain") or [])
    out.append({"path": finding.get("path"), "line": finding.get("line"), "function": finding.get("function")})
    return out


def matches_function(finding: dict[str, Any], case: dict[str, Any]) -> bool:
    return any(same_path(s.get("path"), case["path"]) and names_match(case["function"], s.get("function"))
               for s in steps(finding))


CALLS = re.compile(r"line \d+: calls ([\w.~<>]+)( \(its own transaction\))?")
DEFINED = re.compile(rb"(?m)^\s*(?:async\s+)?(?:class|def|func|type)\s+(\w+)")
SOURCE_SUFFIXES = (".py", ".go", ".java")


def defined_names(tree: Path) -> Counter:
    """How many times each class/function/type name is defined in the tree's sources."""
    counts: Counter = Counter()
    for path in tree.rglob("*"):
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            counts.update(name.decode() for name in DEFINED.findall(path.read_bytes()))
    return counts


def calls_function(finding: dict[str, Any], case: dict[str, Any], definitions: Counter) -> bool:
    """The finding's own sequence calls the case's function (its effects counted there),
    by a qualname whose first name is defined once in the tree (so it is this function);
    a call into it as a transaction of its own does not count."""
    if definitions.get(case["function"].split(".")[0], 0) != 1:
        return False
    path_part = str(finding.get("explanation", "")).split("On one path: ", 1)[-1]
    return any(name == case["function"] and not own for name, own in CALLS.findall(path_part))


def in_sequence(finding: dict[str, Any], case: dict[str, Any]) -> bool:
    """Effects at two or more lines of the case's function are on the finding's path (its
    ``sequence``): the function's own writes are part of the sequence (one line there is a
    fixed function's single commit, the transaction's end, however often it is called)."""
    return len({site.get("line") for site in finding.get("sequence") or []
                if same_path(site.get("path"), case["path"]) and names_match(case["function"], site.get("function"))}) >= 2


def sink_in_function(finding: dict[str, Any], case: dict[str, Any]) -> bool:
    """The finding's sink (the function holding the uncovered writes) is the case's function."""
    return same_path(finding.get("path"), case["path"]) and names_match(case["function"], finding.get("function"))


def matches_sink_line(finding: dict[str, Any], case: dict[str, Any]) -> bool:
    line = finding.get("line")
    return (same_path(finding.get("path"), case["path"]) and isinstance(line, int)
            and any(abs(line - w) <= LINE_SLACK for w in case["write_lines"]))


def in_file(finding: dict[str, Any], case: dict[str, Any]) -> bool:
    return any(same_path(s.get("path"), case["path"]) for s in steps(finding))


def miss_reason(case: dict[str, Any], parent: list[dict[str, Any]]) -> str:
    """A hint for why the parent was not reported, from what the report does contain."""
    file_findings = [f for f in parent if in_file(f, case)]
    if not file_findings:
        return "no finding touches the file"
    near = [f for f in file_findings if same_path(f.get("path"), case["path"])
            and isinstance(f.get("line"), int) and case["def_line"] - 5 <= f["line"] <= max(case["write_lines"]) + 5]
    if near:
        fn = sorted({str(f.get("function")) for f in near})
        return f"findings near the function but named {fn}"
    return f"{len(file_findings)} finding(s) in the file, none for this function"


SEVERITIES = ("critical", "high", "medium", "low")


def shown(findings: list[dict[str, Any]], min_severity: str) -> list[dict[str, Any]]:
    """The findings a scan with ``--min-severity min_severity`` shows."""
    allowed = SEVERITIES[: SEVERITIES.index(min_severity) + 1]
    return [f for f in findings if f.get("severity") in allowed]


def score(case: dict[str, Any], parent: ScanOutcome, fix: ScanOutcome, min_severity: str = "high") -> dict[str, Any]:
    """One case's row, scored on the findings ``min_severity`` shows (scans run at ``low``;
    ``parent_best_severity`` is the worst severity of any matching finding, shown or not)."""
    row: dict[str, Any] = {"id": case["id"], "repo": case["repo"], "framework": case["framework"],
                           "path": case["path"], "function": case["function"]}
    if not parent.ok:
        row.update(status="error", error=f"parent: {parent.error}")
        return row
    every = [f for f in parent.findings
             if matches_function(f, case) or matches_sink_line(f, case) or calls_function(f, case, parent.definitions)
             or in_sequence(f, case)]
    ranks = sorted(SEVERITIES.index(f["severity"]) for f in every if f.get("severity") in SEVERITIES)
    row["parent_best_severity"] = SEVERITIES[ranks[0]] if ranks else None
    parent = ScanOutcome(True, findings=shown(parent.findings, min_severity), seconds=parent.seconds,
                         definitions=parent.definitions)
    fix = ScanOutcome(fix.ok, findings=shown(fix.findings, min_severity), seconds=fix.seconds, error=fix.error,
                      definitions=fix.definitions)
    sinks = [f for f in parent.findings if sink_in_function(f, case) or matches_sink_line(f, case)]
    # A helper that is part of a caller's sequence is reported there ("line N: calls
    # helper (3 writes)"), or a few calls above it (its writes in the finding's sequence);
    # wrapping the helper silences that finding. A chain through the function counts last.
    via_call = [] if sinks else [f for f in parent.findings if calls_function(f, case, parent.definitions)]
    via_sequence = [] if sinks or via_call else [f for f in parent.findings if in_sequence(f, case)]
    chains = [] if sinks or via_call or via_sequence else [f for f in parent.findings if matches_function(f, case)]
    row["parent_via_call"] = bool(via_call)
    row["parent_via_sequence"] = bool(via_sequence)
    hits = sinks or via_call or via_sequence or chains
    row["reported_at_parent"] = bool(hits)
    row["parent_sink_in_function"] = any(sink_in_function(f, case) or matches_sink_line(f, case) for f in hits)
    row["parent_findings_in_file"] = sum(1 for f in parent.findings if in_file(f, case))
    row["parent_findings_total"] = len(parent.findings)
    if hits:
        best = hits[0]
        row["parent_match"] = {"sink": f"{best.get('path')}:{best.get('line')}", "function": best.get("function"),
                               "chain": [f"{s.get('function')}@{s.get('line')}" for s in best.get("chain") or []],
                               "title": best.get("title")}
    else:
        row["miss_reason"] = miss_reason(case, parent.findings)
    if not fix.ok:
        row.update(status="error", error=f"fix: {fix.error}")
        return row
    after = [f for f in fix.findings if sink_in_function(f, case) or in_sequence(f, case)
             or (row["parent_via_call"] and calls_function(f, case, fix.definitions))]
    row["silent_after_fix"] = not after
    row["fix_findings_for_function"] = len(after)
    row["fix_chains_through_function"] = sum(1 for f in fix.findings if matches_function(f, case) and f not in after)
    if after:
        row["fix_match"] = {"sink": f"{after[0].get('path')}:{after[0].get('line')}", "function": after[0].get("function"),
                            "title": after[0].get("title")}
    row["status"] = "ok"
    return row


def score_both(case: dict[str, Any], parent: ScanOutcome, fix: ScanOutcome, min_severity: str) -> dict[str, Any]:
    """The case's row scored on what ``min_severity`` shows, with the same scoring on every
    finding at any severity under ``any_severity``, and the case's round under ``round``."""
    row = score(case, parent, fix, min_severity)
    row["round"] = case_round(case)
    if row["status"] == "ok":
        anywhere = score(case, parent, fix, "low")
        row["any_severity"] = {"reported_at_parent": anywhere["reported_at_parent"],
                               "silent_after_fix": anywhere["silent_after_fix"],
                               "match": _match_kind(anywhere) if anywhere["reported_at_parent"] else None}
    return row


def case_round(case: dict[str, Any]) -> str:
    """The benchmark round that added the case (``round`` in cases.json; the first 38 cases,
    rounds 1 to 3, carry none)."""
    return str(case.get("round", "1-3"))


def headline(rows: list[dict[str, Any]], any_severity: bool = False) -> dict[str, int]:
    """Scored cases, reported at the parent, silent after the fix and both, over ``rows``
    (errors excluded), on the default-shown findings or on ``any_severity``'s."""
    ok = [r for r in rows if r["status"] == "ok"]
    views = [r.get("any_severity", {}) if any_severity else r for r in ok]
    return {"scored": len(ok),
            "reported_at_parent": sum(1 for v in views if v.get("reported_at_parent")),
            "silent_after_fix": sum(1 for v in views if v.get("silent_after_fix")),
            "reported_and_silent": sum(1 for v in views if v.get("reported_at_parent") and v.get("silent_after_fix"))}


def compute_totals(rows: list[dict[str, Any]], seconds: float = 0.0) -> dict[str, Any]:
    """Totals over per-case rows (errors excluded from the rates); ``by_round`` splits the
    headline figures by the round that added the cases, shown by default and at any severity."""
    ok = [r for r in rows if r["status"] == "ok"]
    found = [r for r in ok if r["reported_at_parent"]]
    silent = [r for r in ok if r["silent_after_fix"]]
    recognised = [r for r in found if r["silent_after_fix"]]
    return {
        "cases": len(rows), "scored": len(ok), "errors": len(rows) - len(ok),
        "reported_at_parent": len(found), "silent_after_fix": len(silent),
        "reported_and_silent": len(recognised),
        "reported_with_sink_in_function": sum(1 for r in found if r.get("parent_sink_in_function")),
        "reported_via_call": sum(1 for r in found if r.get("parent_via_call")),
        "reported_via_sequence": sum(1 for r in found if r.get("parent_via_sequence")),
        "recall": round(len(found) / len(ok), 4) if ok else 0.0,
        "silent_rate": round(len(silent) / len(ok), 4) if ok else 0.0,
        "silent_rate_of_reported": round(len(recognised) / len(found), 4) if found else 0.0,
        "by_framework": {fw: {"cases": n, "reported_at_parent": sum(1 for r in found if r["framework"] == fw),
                              "reported_and_silent": sum(1 for r in recognised if r["framework"] == fw)}
                         for fw, n in sorted(Counter(r["framework"] for r in ok).items())},
        "any_severity": headline(rows, any_severity=True),
        "by_round": {name: {"default": headline(group), "any_severity": headline(group, any_severity=True)}
                     for name in sorted({r.get("round", "1-3") for r in rows})
                     for group in [[r for r in rows if r.get("round", "1-3") == name]]},
        "seconds": round(seconds, 1),
    }


def _match_kind(row: dict[str, Any]) -> str:
    if row.get("parent_sink_in_function"):
        return "found"
    if row.get("parent_via_call"):
        return "call"
    return "sequence" if row.get("parent_via_sequence") else "chain"


def render_markdown(totals: dict[str, Any], rows: list[dict[str, Any]], title: str) -> str:
    """The results as Markdown: a table, the totals and the misses."""
    out = [f"# {title}", "", "Parent and fix are scored on the findings shown by default (`--min-severity high`); "
           "the 'any severity' columns score every finding.", "",
           "| id | round | framework | parent | fix | parent, any severity | fix, any severity "
           "| findings in file | worst matching severity | function |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["status"] == "error":
            out.append(f"| {r['id']} | {r.get('round', '1-3')} | {r['framework']} | ERROR | | | | | | "
                       f"`{r['function']}` ({r['error']}) |")
            continue
        par = _match_kind(r) if r["reported_at_parent"] else "**MISS**"
        fix = "silent" if r["silent_after_fix"] else "**STILL**"
        anywhere = r.get("any_severity", {})
        any_par = anywhere.get("match") or "**MISS**"
        any_fix = "silent" if anywhere.get("silent_after_fix") else "**STILL**"
        best = r.get("parent_best_severity") or "none"
        out.append(f"| {r['id']} | {r.get('round', '1-3')} | {r['framework']} | {par} | {fix} | {any_par} | {any_fix} "
                   f"| {r['parent_findings_in_file']} | {best} | `{r['function']}` |")
    t = totals
    out += ["", "## Totals", "",
            f"- cases: {t['cases']} (scored {t['scored']}, errors {t['errors']})",
            f"- recall on parents: {pct(t['reported_at_parent'], t['scored'])}; sink in the function itself: "
            f"{t.get('reported_with_sink_in_function', 0)}, a caller's sequence calls it ('call'): "
            f"{t.get('reported_via_call', 0)}, its writes in a caller's sequence further up ('sequence'): "
            f"{t.get('reported_via_sequence', 0)}, only a chain through it ('chain'): "
            f"{t['reported_at_parent'] - t.get('reported_with_sink_in_function', 0) - t.get('reported_via_call', 0) - t.get('reported_via_sequence', 0)}",
            f"- silent after fix, all cases: {pct(t['silent_after_fix'], t['scored'])}",
            f"- silent after fix, of those reported at the parent: {pct(t['reported_and_silent'], t['reported_at_parent'])}",
            ""]
    if t.get("by_round"):
        out += ["| cases | scored | shown by default: reported at parent | silent after fix | reported and silent "
                "| any severity: reported at parent | silent after fix | reported and silent |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        groups = [(f"round {name}", g) for name, g in t["by_round"].items()]
        groups.append(("all", {"default": {k: t[k] for k in ("scored", "reported_at_parent", "silent_after_fix",
                                                              "reported_and_silent")},
                               "any_severity": t["any_severity"]}))
        for label, g in groups:
            d, a = g["default"], g["any_severity"]
            out.append(f"| {label} | {d['scored']} | {pct(d['reported_at_parent'], d['scored'])} "
                       f"| {pct(d['silent_after_fix'], d['scored'])} "
                       f"| {pct(d['reported_and_silent'], d['reported_at_parent'])} "
                       f"| {pct(a['reported_at_parent'], a['scored'])} | {pct(a['silent_after_fix'], a['scored'])} "
                       f"| {pct(a['reported_and_silent'], a['reported_at_parent'])} |")
        out.append("")
    out += ["| framework | cases | reported at parent | reported and silent after fix |", "| --- | --- | --- | --- |"]
    for fw, b in t["by_framework"].items():
        out.append(f"| {fw} | {b['cases']} | {b['reported_at_parent']} | {b['reported_and_silent']} |")
    misses = [r for r in rows if r["status"] == "ok" and not r["reported_at_parent"]]
    if misses:
        out += ["", "## Misses at the parent", ""]
        for r in misses:
            out.append(f"- {r['id']}: `{r['path']}` `{r['function']}` -- {r['parent_findings_in_file']} finding(s) "
                       f"in the file; {r['miss_reason']}; worst matching severity: "
                       f"{r.get('parent_best_severity') or 'none'}")
    still = [r for r in rows if r["status"] == "ok" and not r["silent_after_fix"]]
    if still:
        out += ["", "## Still reported after the fix", ""]
        for r in still:
            m = r.get("fix_match", {})
            out.append(f"- {r['id']}: `{m.get('function')}` sink `{m.get('sink')}`: {m.get('title')}")
    return "\n".join(out) + "\n"


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100.0 * n / d:.0f}%)" if d else "0/0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--auditor", default=shutil.which("auditor") or "auditor", help="auditor executable")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="directory of fetched mirrors")
    parser.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    parser.add_argument("--cases-file", type=Path, default=CASES)
    parser.add_argument("--json", type=Path, help="write per-case results here")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per scan")
    parser.add_argument("--keep", type=Path, help="export trees under this directory and keep them")
    parser.add_argument("--markdown", type=Path, help="write the table, totals and misses as Markdown here")
    parser.add_argument("--min-severity", choices=SEVERITIES, default="high",
                        help="score on the findings this severity shows (the CLI default: high)")
    parser.add_argument("--render", type=Path, help="no scans: render the Markdown (--markdown) from an earlier --json")
    args = parser.parse_args()
    if args.render:
        data = json.loads(args.render.read_text(encoding="utf-8"))
        # Only the cases still in the cases file (and --cases, when given) count.
        known = {c["id"] for c in json.loads(args.cases_file.read_text(encoding="utf-8"))}
        if args.cases:
            known &= {c.strip() for c in args.cases.split(",")}
        rows = [r for r in data["cases"] if r["id"] in known]
        text = render_markdown(compute_totals(rows, data["totals"].get("seconds", 0.0)), rows,
                               "Real-fix benchmark results")
        if args.markdown:
            args.markdown.write_text(text, encoding="utf-8")
        else:
            print(text, end="")
        return 0
    if os.sep in args.auditor or (os.altsep and os.altsep in args.auditor):
        args.auditor = str(Path(args.auditor).resolve())

    cases = json.loads(args.cases_file.read_text(encoding="utf-8"))
    if args.cases:
        wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
        unknown = wanted - {c["id"] for c in cases}
        if unknown:
            print(f"unknown case ids: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c["id"] in wanted]

    scratch = Path(tempfile.mkdtemp(prefix="auditor-real-fixes-"))
    trees_root = args.keep or (scratch / "trees")
    scans: dict[tuple[str, str], ScanOutcome] = {}
    started = time.perf_counter()

    def scan_commit(repo: str, commit: str) -> ScanOutcome:
        key = (repo, commit)
        if key in scans:
            return scans[key]
        git_dir = mirror_dir(args.mirrors, repo)
        if git_dir is None:
            outcome = ScanOutcome(False, error=f"no mirror for {repo} under {args.mirrors} (fetch github:{repo})")
        else:
            tree = trees_root / repo.replace("/", "+") / commit[:12]
            error = "" if (args.keep and tree.is_dir() and any(tree.iterdir())) else export_tree(git_dir, commit, tree)
            if error:
                outcome = ScanOutcome(False, error=error)
            else:
                try:
                    outcome = run_scan(args.auditor, tree, args.timeout, scratch)
                except Exception as exc:  # one broken scan must not stop the others
                    outcome = ScanOutcome(False, error=f"{type(exc).__name__}: {exc}")
                if not args.keep:
                    shutil.rmtree(tree, ignore_errors=True)
        scans[key] = outcome
        state = "ok" if outcome.ok else f"ERROR {outcome.error}"
        print(f"  scanned {repo}@{commit[:10]}: {len(outcome.findings)} findings, {outcome.seconds:.1f}s, {state}",
              file=sys.stderr, flush=True)
        return outcome

    rows = []
    for case in cases:
        try:
            parent = scan_commit(case["repo"], case["parent_commit"])
            fix = scan_commit(case["repo"], case["fix_commit"])
            rows.append(score_both(case, parent, fix, args.min_severity))
        except Exception as exc:
            rows.append({"id": case["id"], "repo": case["repo"], "framework": case["framework"], "path": case["path"],
                         "function": case["function"], "round": case_round(case), "status": "error",
                         "error": f"{type(exc).__name__}: {exc}"})
    shutil.rmtree(scratch, ignore_errors=True)

    # Table.
    print(f"{'id':34} {'fw':10} {'parent':7} {'fix':7} {'file#':5}  function")
    for r in rows:
        if r["status"] == "error":
            print(f"{r['id']:34} {r['framework']:10} {'ERROR':7} {'':7} {'':5}  {r['function']}  ({r['error']})")
            continue
        par = _match_kind(r) if r["reported_at_parent"] else "MISS"
        fix = "silent" if r["silent_after_fix"] else "STILL"
        print(f"{r['id']:34} {r['framework']:10} {par:7} {fix:7} {r['parent_findings_in_file']:<5}  {r['function']}")

    totals = compute_totals(rows, time.perf_counter() - started)
    ok = [r for r in rows if r["status"] == "ok"]
    found = [r for r in ok if r["reported_at_parent"]]
    silent = [r for r in ok if r["silent_after_fix"]]
    recognised = [r for r in found if r["silent_after_fix"]]
    print()
    strict = [r for r in found if r["parent_sink_in_function"]]
    print(f"recall on parents:        {pct(len(found), len(ok))}   (of which sink in the function itself: {len(strict)};"
          f" 'chain' = only a chain through it)")
    print(f"silent after fix (all):   {pct(len(silent), len(ok))}")
    print(f"silent after fix (found): {pct(len(recognised), len(found))}   (reported at parent and silent at fix)")
    anywhere = totals["any_severity"]
    print(f"at any severity: recall {pct(anywhere['reported_at_parent'], anywhere['scored'])}, silent after fix "
          f"{pct(anywhere['silent_after_fix'], anywhere['scored'])}")
    for name, group in totals["by_round"].items():
        d, a = group["default"], group["any_severity"]
        print(f"  round {name:6} default recall {pct(d['reported_at_parent'], d['scored'])}, silent "
              f"{pct(d['silent_after_fix'], d['scored'])}; any severity recall "
              f"{pct(a['reported_at_parent'], a['scored'])}, silent {pct(a['silent_after_fix'], a['scored'])}")
    for fw, t in totals["by_framework"].items():
        print(f"  {fw:10} recall {pct(t['reported_at_parent'], t['cases'])}, fixed-and-silent {t['reported_and_silent']}")
    if len(ok) != len(rows):
        print(f"errors: {len(rows) - len(ok)}")
    print(f"time: {totals['seconds']}s for {len(scans)} scans")
    misses = [r for r in ok if not r["reported_at_parent"]]
    if misses:
        print("\nmisses at parent:")
        for r in misses:
            print(f"  {r['id']}: {r['path']} {r['function']} -- {r['parent_findings_in_file']} finding(s) in file; "
                  f"{r['miss_reason']}")
    still = [r for r in ok if not r["silent_after_fix"]]
    if still:
        print("\nstill reported after fix:")
        for r in still:
            m = r.get("fix_match", {})
            print(f"  {r['id']}: {m.get('function')} sink {m.get('sink')}")
    for r in rows:
        if r["status"] == "error":
            print(f"\nerror {r['id']}: {r['error']}")
    if args.markdown:
        args.markdown.write_text(render_markdown(totals, rows, "Real-fix benchmark results"), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps({"totals": totals, "cases": rows}, indent=2, sort_keys=True) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
