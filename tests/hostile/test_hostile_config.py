"""Hostile configuration files, from a seeded generator: random keys, types and tables in
auditor.toml and [tool.auditor]. Whatever they hold, a scan either runs or stops with a
usage error (64) naming the file (or a rule error, 3), never a traceback and never the blame
on a flag."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "fixtures" / "go_inventory"
KEYS = ("probes", "max-model-len", "include", "exclude", "engine", "min-severity", "timeout", "rule",
        "max-file-bytes", "no-cache", "thinking", "format", "nonsense-key", "parse-budget")
VALUES = ('-1', '0', '3', '1e400', '"many"', '"low"', '"static"', 'true', '[]', '["**/*.go"]', '[1, 2]',
          '[{a = 1}]', '{x = 1}', '"\\u202e"', '"' + "a" * 5000 + '"', '2024-01-01')


def _configs(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    cases = []
    for number in range(count):
        lines = [f"{rng.choice(KEYS)} = {rng.choice(VALUES)}" for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.4:
            lines.append(f"[scan]\n{rng.choice(KEYS)} = {rng.choice(VALUES)}")
        body = "\n".join(dict.fromkeys(lines)) + "\n"
        name = "auditor.toml" if number % 2 else "pyproject.toml"
        if name == "pyproject.toml":
            body = "[tool.auditor]\n" + body.replace("[scan]", "[tool.auditor.scan]")
        cases.append((name, body))
    return cases


@pytest.mark.parametrize(("name", "body"), _configs(seed=15, count=12))
def test_a_hostile_configuration_runs_or_is_a_named_usage_error(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / name).write_text(body, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "auditor", "scan", str(FIXTURE), "--engine", "static", "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "AUDITOR_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)},
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    # 3: a configured rule that is no rule, named; 5: a scan that audited only part of the tree.
    assert completed.returncode in (0, 3, 5, 64), (body, completed.returncode, completed.stderr)
    if completed.returncode == 64:
        assert name in completed.stderr.replace("\n", ""), completed.stderr
