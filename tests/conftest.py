"""Session fixtures: a private cache directory, a tiny Nemotron-shaped tokenizer built at test
time (never downloaded), the stand-in tokenizer from ../shared when present. Constants and
helpers live in ``tests/support.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never reach the Hugging Face hub (set before auditor or transformers load).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support import SHARED, build_tiny_tokenizer  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Caches written by the code under test go to a session directory, never the user's ~/.cache."""
    previous = os.environ.get("AUDITOR_CACHE_DIR")
    os.environ["AUDITOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("auditor-cache"))
    yield
    if previous is None:
        os.environ.pop("AUDITOR_CACHE_DIR", None)
    else:
        os.environ["AUDITOR_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer directory loadable with AutoTokenizer.from_pretrained, built once per session."""
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer"))


@pytest.fixture(scope="session")
def standin_tokenizer_dir() -> Path:
    """The 131,072-id stand-in from ../shared (skips when absent)."""
    directory = SHARED / "nemotron" / "standin-tokenizer"
    if not (directory / "tokenizer.json").is_file():
        pytest.skip("../shared/nemotron/standin-tokenizer is not present")
    return directory
