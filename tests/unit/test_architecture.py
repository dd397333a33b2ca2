"""The package layout is the architecture: one subpackage per pipeline stage, imports
that only run one way (no module cycle, no stage cycle), read from the source with ``ast``
(function-local imports included, since they are real dependencies too), and no module or
class grown past the size of one job."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import auditor

PACKAGE = Path(auditor.__file__).resolve().parent

STAGES = (
    "analysis", "callgraph", "cli", "config", "engine", "findings", "index", "languages", "pack", "planning",
    "recall", "report", "rules", "runs", "storage", "tokens", "walk",
)
SHARED_LEAVES = ("defaults", "errors", "progress")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The auditor modules ``path`` imports (``from a.b import c`` counts a.b.c when c is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("auditor"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("auditor") and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return {name for name in found if name in modules}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "auditor"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_top_level_lists_the_stages_and_nothing_else() -> None:
    entries = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir() if not p.name.startswith("__")}
    entries.discard("py")
    assert entries == set(STAGES) | set(SHARED_LEAVES)


def test_no_module_imports_itself_back_through_a_cycle() -> None:
    assert _cycle(_graph()) is None


def test_stages_depend_on_each_other_one_way_only() -> None:
    stages: dict[str, set[str]] = defaultdict(set)
    for module, imported in _graph().items():
        for other in imported:
            if _stage(other) != _stage(module):
                stages[_stage(module)].add(_stage(other))
    assert _cycle(dict(stages)) is None


def test_only_the_cli_and_the_runs_import_the_cli_or_the_runs() -> None:
    # The core stages never reach up to the run orchestration or the shell.
    for module, imported in _graph().items():
        if _stage(module) in ("auditor", "__main__", "cli", "runs"):
            continue
        assert not {m for m in imported if _stage(m) in ("cli", "runs")}, module


def test_the_call_graph_never_imports_the_analyses_built_on_it() -> None:
    for module, imported in _graph().items():
        if _stage(module) == "callgraph":
            assert not {m for m in imported if _stage(m) in ("analysis", "pack", "findings")}, module


MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 300


def test_no_module_or_class_outgrows_one_job() -> None:
    # A module or class this long is doing several jobs: split it along a seam, not by
    # joining lines.
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            offenders.append(f"{name}: module of {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1 if node.end_lineno is not None else 0
                if size > MAX_CLASS_LINES:
                    offenders.append(f"{name}:{node.lineno}: class {node.name} of {size} lines (at most {MAX_CLASS_LINES})")
    assert not offenders, "\n".join(offenders)
