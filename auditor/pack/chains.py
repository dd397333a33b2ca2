"""Seed chains: the call chains (entry point -> ... -> relevant file) the packer keeps whole
for the rules the static pass does not cover.

Input: the index, texts and call graph of a repository, the rules that need the model
alone, and the files their relevance patterns match (their *seeds*). Output: chains as
``FileChain`` (the files in call order, entry file first), which the packer places so that
each chain's files are in full in one window: for each entry point, the shortest call paths
to the functions of the nearest seed files. A rule with a static analysis gets its chains
from that analysis's findings instead (``auditor.runs.prepare.StaticPass``), so this module
never runs one.
"""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from pathlib import Path
from typing import Collection, Mapping, Sequence

from auditor import __version__
from auditor.analysis.openapi_operations import documents_key
from auditor.callgraph.cache import graph_cache_key
from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.analysis.entrypoints import find_entry_points
from auditor.index.model import FileIndex
from auditor.pack.packer import FileChain
from auditor.rules.loader import Rule
from auditor.storage.sealed import prune_least_recent, seal, unseal, write_atomically

logger = logging.getLogger(__name__)

MAX_SEED_DEPTH = 4
"""Longest entry-point -> seed path (in calls) followed."""
MAX_SEED_CHAINS_PER_ENTRY = 4
"""Seed files per entry point kept as chains (the nearest ones)."""
CHAINS_CACHE_VERSION = 2
"""Version of the chain cache's format and key; part of its directory name."""
MAX_CACHED_CHAIN_SETS = 16
_CHAINS_MAGIC = b"auditor-chains\x00"


def relevance_chains(
    indexes: Mapping[str, FileIndex],
    texts: Mapping[str, str],
    graph: CallGraph,
    rules: Sequence[Rule],
    seed_files: Collection[str],
    *,
    include_tests: bool = False,
) -> tuple[FileChain, ...]:
    """Every rule's seed chains (``seed_chains``), deduplicated and sorted; deterministic for
    the same inputs. ``include_tests`` counts test code and dev-data commands as entry points."""
    chains: set[FileChain] = set()
    for rule in rules:
        chains.update(seed_chains(indexes, graph, rule, texts, seed_files, include_tests=include_tests))
    return tuple(sorted(chains))


def seed_chains(
    indexes: Mapping[str, FileIndex],
    graph: CallGraph,
    rule: Rule,
    texts: Mapping[str, str],
    seed_files: Collection[str],
    *,
    include_tests: bool = False,
) -> set[FileChain]:
    """Shortest call paths from each entry point to the nearest seed files (breadth-first,
    at most ``MAX_SEED_DEPTH`` calls and ``MAX_SEED_CHAINS_PER_ENTRY`` seed files each)."""
    seeds = frozenset(seed_files)
    chains: set[FileChain] = set()
    if not seeds:
        return chains
    for entry in find_entry_points(indexes, graph, rule, texts, include_tests=include_tests):
        parent: dict[FunctionRef, FunctionRef | None] = {entry.ref: None}
        depth = {entry.ref: 0}
        queue = deque([entry.ref])
        reached: set[str] = set()
        while queue and len(reached) < MAX_SEED_CHAINS_PER_ENTRY:
            node = queue.popleft()
            if node.path in seeds and node.path not in reached:
                reached.add(node.path)
                trail: list[str] = []
                step: FunctionRef | None = node
                while step is not None:
                    trail.append(step.path)
                    step = parent[step]
                chains.add(files_in_order(list(reversed(trail))))
            if depth[node] >= MAX_SEED_DEPTH:
                continue
            for edge in graph.callees(node):
                if edge.callee not in parent:
                    parent[edge.callee] = node
                    depth[edge.callee] = depth[node] + 1
                    queue.append(edge.callee)
    return chains


def files_in_order(paths: Sequence[str]) -> FileChain:
    """The distinct files of a chain, in the order the chain first enters them."""
    return tuple(dict.fromkeys(paths))


class ChainCache:
    """On-disk cache of ``relevance_chains`` results, so that a re-pack of an unchanged tree
    does not look for its entry points and walk the graph again.

    The key covers every indexed file (``graph_cache_key``: paths, languages, contents and
    the index/graph versions), the OpenAPI documents entry points are read from
    (``documents_key``), each rule's full definition, the seed files, whether tests
    count as entry points, and auditor's version. Files live under ``directory / f"chains-v{CHAINS_CACHE_VERSION}"``, sealed and
    written atomically; an unreadable or malformed file is a miss. The
    ``MAX_CACHED_CHAIN_SETS`` most recently used are kept.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory) / f"chains-v{CHAINS_CACHE_VERSION}"

    def chains(
        self,
        indexes: Mapping[str, FileIndex],
        texts: Mapping[str, str],
        graph: CallGraph,
        rules: Sequence[Rule],
        seed_files: Collection[str],
        *,
        include_tests: bool = False,
    ) -> tuple[FileChain, ...]:
        """``relevance_chains`` of the inputs, from the cache when it holds them."""
        key = hashlib.sha256(
            repr((__version__, graph_cache_key(indexes), documents_key(texts), tuple(rules), tuple(sorted(seed_files)), include_tests)).encode()
        ).hexdigest()
        target = self.directory / f"{key}.chains"
        try:
            stored = unseal(_CHAINS_MAGIC, target.read_bytes())
            if isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key and isinstance(stored[1], tuple):
                return tuple(tuple(chain) for chain in stored[1])
        except FileNotFoundError:
            pass
        except (OSError, ValueError, EOFError, TypeError) as error:
            logger.debug("ignoring unreadable chain cache file %s: %s", target, error)
        found = relevance_chains(indexes, texts, graph, rules, seed_files, include_tests=include_tests)
        if write_atomically(target, seal(_CHAINS_MAGIC, (key, found))):
            prune_least_recent(self.directory, "*.chains", MAX_CACHED_CHAIN_SETS, spare=target)
        return found
