"""Markdown links from ``scan`` work in a pull-request comment: the base is inferred from a
GitHub/GitLab ``origin`` and the commit, relative to where the scanned directory sits in the
repository; ``--link-base`` wins; anything else keeps links relative."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.walk.diff import infer_link_base
from tests.support import git


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "services" / "api").mkdir(parents=True)
    (root / "services" / "api" / "app.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


@pytest.mark.parametrize(
    ("remote", "prefix"),
    [
        ("https://github.com/acme/shop.git", "https://github.com/acme/shop/blob/"),
        ("git@github.com:acme/shop.git", "https://github.com/acme/shop/blob/"),
        ("https://gitlab.com/group/sub/shop", "https://gitlab.com/group/sub/shop/-/blob/"),
    ],
)
def test_hosted_remotes_give_a_commit_link_base(checkout: Path, remote: str, prefix: str) -> None:
    git(checkout, "remote", "add", "origin", remote)
    commit = git(checkout, "rev-parse", "HEAD")
    assert infer_link_base(checkout / "services" / "api") == f"{prefix}{commit}/services/api/"
    assert infer_link_base(checkout) == f"{prefix}{commit}/"


def test_no_hosted_remote_keeps_links_relative(checkout: Path, tmp_path: Path) -> None:
    assert infer_link_base(checkout) is None
    git(checkout, "remote", "add", "origin", str(tmp_path / "elsewhere.git"))
    assert infer_link_base(checkout) is None
    assert infer_link_base(tmp_path / "not-a-repo") is None
