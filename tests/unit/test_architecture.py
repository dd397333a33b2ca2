"""The package layout is the architecture: one subpackage per pipeline stage, and imports
that only run one way (no module cycle, no stage cycle), read from the source with ``ast``
(function-local imports included, since they are real dependencies too)."""

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
