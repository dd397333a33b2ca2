"""Scope: a subdirectory of a git work tree (a monorepo's project) scanned within its whole
repository.

``within_repository`` turns the configuration of a scan of ``PATH`` into one of the
repository's top that reports what lies under ``PATH``: the walk, the index and the call
graph cover the whole repository, so a chain entering from a caller outside ``PATH`` and
reaching a write inside it is found; the findings, the coverage and the files not audited
are those under ``PATH`` (``ScanConfig.report_under``). Every path is then relative to the
repository's top, as a review's are, so a finding has one fingerprint (and one SARIF
``primaryLocationLineHash``) whether ``auditor scan PATH``, ``auditor scan .`` or
``auditor review PATH`` found it. A ``PATH`` under a directory of tests, fixtures or
examples (a sample project kept in a repository), or under one the walk excludes by
default (``vendor/``, ``third_party/``, ``node_modules/``), is scanned on its own, as
before: from the top, its every file would be left out, with no entry point and nothing
packed or audited.

``--include``/``--exclude`` globs stay relative to ``PATH`` and select among its files
(``WalkOptions.glob_base``); the code outside ``PATH`` is walked for the call graph with
the default exclusions, ``.gitignore`` and ``.auditorignore``. Transaction-model files
named relative to ``PATH`` are read from there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from auditor.config.scan import ScanConfig
from auditor.pack.scope import scope_class
from auditor.walk.classify import classify_path
from auditor.walk.diff import GitError, repository_top

if TYPE_CHECKING:
    from auditor.report.model import Coverage  # the reporters' model: `auditor pack` never loads it

_Value = TypeVar("_Value")


@dataclass(frozen=True)
class Scoped:
    """A scan's configuration as ``within_repository`` scopes it: ``source_prefix`` is what
    goes before the result's paths to make them relative to the repository's top ("" when
    they are already), ``notice`` says why a subdirectory is scanned on its own."""

    config: ScanConfig
    source_prefix: str = ""
    notice: str | None = None


def within_repository(config: ScanConfig) -> Scoped:
    """``config`` as a scan of its repository's top reporting what lies under ``config.root``;
    ``config`` itself when the root is the top, not in a git work tree, or under a directory
    whose code auditor never treats as production (below: then with a notice)."""
    if not config.root.is_dir():
        return Scoped(config)  # the walk names what is wrong with it (missing, a file, a looping link)
    try:
        top, prefix = repository_top(Path(os.path.realpath(config.root)))
    except GitError:
        return Scoped(config)
    if not prefix:
        return Scoped(config)
    left_out = left_out_from_the_top(prefix, config.walk.default_excludes)
    if left_out is not None:
        # Seen from the top, every file under PATH would be left out (test, fixture,
        # example or vendored code): no entry points, nothing packed. PATH alone is its own project.
        return Scoped(config, prefix, (
            f"{prefix.rstrip('/')} lies under a directory of {left_out}: it is scanned on its own, "
            "as a project (callers elsewhere in the repository are not seen)"
        ))
    return Scoped(replace(
        config,
        root=top,
        walk=replace(config.walk, glob_base=prefix),
        tx_models=config.absolute_tx_models,
        report_under=prefix,
    ))


def left_out_from_the_top(prefix: str, default_excludes: bool) -> str | None:
    """What every file under the directory ``prefix`` ("a/b/") is, by its path alone, when
    it is code a scan of the repository's top leaves out ("tests, fixtures or examples":
    the static pass and the pack skip them; "vendored or excluded code": the walk's default
    exclusions skip them, unless ``default_excludes`` is off); None when it is not."""
    # Imported here: the analysis is loaded only when a scan runs it, not by a memoized pack.
    from auditor.analysis.transactions.reach import dev_or_fixture_path

    probe = f"{prefix}module.py"
    if dev_or_fixture_path(probe) or scope_class(probe, "") is not None:
        return "tests, fixtures or examples"
    if default_excludes and classify_path(probe) is not None:
        return "vendored or excluded code"
    return None


def glob_base_of(config: ScanConfig, prefix: str) -> ScanConfig:
    """``config`` with its ``--include``/``--exclude`` globs relative to ``prefix`` (a review
    of a subdirectory walks from the repository's top, as ``within_repository`` does)."""
    return replace(config, walk=replace(config.walk, glob_base=prefix)) if prefix else config


def reported_root_name(config: ScanConfig) -> str:
    """The name reports give the scanned directory: the one the user named (``PATH``), also
    when the scan walked from the repository's top."""
    root = config.root / config.report_under if config.report_under else config.root
    return root.name or str(root)


def paths_under(values: Mapping[str, _Value], prefix: str) -> Mapping[str, _Value]:
    """The entries of a path-keyed mapping under ``prefix`` (all of them for "")."""
    return values if not prefix else {path: value for path, value in values.items() if path.startswith(prefix)}


def coverage_under(coverage: "Coverage", prefix: str) -> "Coverage":
    """``coverage`` restricted to the files under ``prefix`` (all of it for "")."""
    if not prefix:
        return coverage

    def inside(paths: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(path for path in paths if path.startswith(prefix))

    return replace(
        coverage,
        full=inside(coverage.full),
        skeleton=inside(coverage.skeleton),
        omitted=inside(coverage.omitted),
        not_audited=tuple(item for item in coverage.not_audited if item.path.startswith(prefix)),
    )
