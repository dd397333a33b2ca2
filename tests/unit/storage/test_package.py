"""auditor.storage.package: the digest of auditor's own files follows every file's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.storage import package


def test_the_package_digest_follows_auditor_s_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "auditor"
    (root / "models").mkdir(parents=True)
    (root / "models" / "django.yaml").write_text("facts: []\n", encoding="utf-8")
    monkeypatch.setattr(package, "_PACKAGE", root)
    package.package_digest.cache_clear()
    try:
        before = package.package_digest()
        (root / "models" / "django.yaml").write_text("facts: [1]\n", encoding="utf-8")
        package.package_digest.cache_clear()
        assert package.package_digest() != before
    finally:
        package.package_digest.cache_clear()
