"""Windows hold code: translations, changelogs and data are left out with their reason, a
file's full text is packed once unless a chain needs it, the manifest totals tokens by
reason and kind, and the token-ratio guard fires before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.config.scan import WindowOptions
from auditor.errors import PackError
from auditor.pack.guard import token_ratio
from auditor.pack.packer import PackOptions, pack
from auditor.pack.rank import PackInput
from auditor.pack.reasons import PackReason
from auditor.pack.scope import SCOPE_CLASSES
from auditor.report.manifest import pack_manifest
from auditor.rules.loader import PACK_INCLUDE_CLASSES, parse_rule
from auditor.runs.prepare import token_ratio_notice
from auditor.tokens.tokenizer import TokenizerRequest, load_tokenizer
from auditor.walk.classify import FileKind, file_kind
from auditor.walk.walker import walk
from tests.support import packing_rule

RULE = packing_rule()  # its windows do not move when the rule text is edited
NOT_CODE = {
    "shop/locale/fr/LC_MESSAGES/django.po": "translations",
    "web/src/locale/messages.fr.xlf": "translations",
    "CHANGELOG.md": "docs",
    "fixtures/data.json": "fixture data",
}


@pytest.fixture(scope="module")
def tokenizer(tiny_tokenizer_dir):
    return load_tokenizer(TokenizerRequest(tokenizer=str(tiny_tokenizer_dir)))


def _django_angular(root: Path) -> Path:
    """A Django app with a French catalogue, an Angular XLIFF file full of "save" and
    "delete", a large changelog and a fixture: every one matches the tx rule's patterns."""
    files = {
        "shop/views.py": "from shop.services import pay\n\ndef checkout(request):\n    pay(request)\n",
        "shop/services.py": "def pay(request):\n    order.save()\n    order.delete()\n",
        "shop/locale/fr/LC_MESSAGES/django.po": 'msgid "order.save()"\nmsgstr "enregistrer"\n' * 40,
        "web/src/locale/messages.fr.xlf": (
            '<trans-unit id="a"><source>item.save() then item.delete()</source><target>ok</target></trans-unit>\n' * 60
        ),
        "CHANGELOG.md": "- Fixed order.save() and order.delete() in checkout\n" * 200,
        "fixtures/data.json": '[{"model": "shop.order", "note": "order.save()"}]\n' * 30,
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _inputs(root: Path):
    walked = walk(root)
    return walked, [PackInput(entry.path, entry.text, entry.language, entry.content_hash) for entry in walked.files]


def _options(**overrides) -> PackOptions:
    settings = {"max_model_len": 8_000, "output_tokens": 300, "probe_reserve_tokens": 64, "map_tokens": 300}
    return PackOptions(**(settings | overrides))


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("shop/locale/fr/LC_MESSAGES/django.po", FileKind.TRANSLATIONS),
        ("locale/app.pot", FileKind.TRANSLATIONS),
        ("web/src/locale/messages.fr.xlf", FileKind.TRANSLATIONS),
        ("app/l10n/intl_en.arb", FileKind.TRANSLATIONS),
        ("packages/i18n/src/locales/cs/auth.json", FileKind.TRANSLATIONS),
        ("conf/locale/fr/formats.py", FileKind.CODE),
        ("CHANGELOG.md", FileKind.DOCS),
        ("HISTORY.rst", FileKind.DOCS),
        ("CHANGES", FileKind.DOCS),
        ("docs/guide.txt", FileKind.DOCS),
        ("requirements.txt", FileKind.OTHER),
        ("CMakeLists.txt", FileKind.OTHER),
        ("fixtures/data.json", FileKind.DATA),
        ("exports/orders.csv", FileKind.DATA),
        ("package.json", FileKind.OTHER),
        ("web/src/app.component.ts", FileKind.CODE),
    ],
)
def test_file_kinds(path, kind):
    assert file_kind(path, 100) is kind


def test_large_structured_files_are_data():
    assert file_kind("openapi/schema.yaml", 100) is FileKind.OTHER
    assert file_kind("openapi/schema.yaml", 1_000_000) is FileKind.DATA


def test_the_rule_loader_knows_every_scope_class():
    assert PACK_INCLUDE_CLASSES == SCOPE_CLASSES


def test_translations_docs_and_data_are_not_packed_for_a_code_rule_each_with_its_reason(tokenizer, tmp_path):
    walked, files = _inputs(_django_angular(tmp_path))
    result = pack(files, repository="shop", rules=[RULE], tokenizer=tokenizer, options=_options())
    carried = {f.path for window in result.windows for f in window.files}
    assert carried == {"shop/views.py", "shop/services.py"}
    reasons = {o.path: o.reason for o in result.omitted}
    for path, word in NOT_CODE.items():
        assert word in reasons[path], (path, reasons[path])
        assert path in result.repo_map
    manifest = pack_manifest(result, walked)
    assert {entry["path"] for entry in manifest["omitted"]} >= set(NOT_CODE)
    assert set(manifest["tokens_by_kind"]) == {"python"}


def test_a_rule_that_asks_for_translations_gets_them(tokenizer, tmp_path):
    _, files = _inputs(_django_angular(tmp_path))
    wants = parse_rule(
        "---\nid: missing-translation\ntitle: t\nseverity: low\ndescription: d\npack_include: [translations]\n"
        "relevance:\n  - 'save'\n---\nLook at catalogues.\n",
        "test",
    )
    result = pack(files, repository="shop", rules=[wants], tokenizer=tokenizer, options=_options())
    carried = {f.path for window in result.windows for f in window.files}
    assert {"shop/locale/fr/LC_MESSAGES/django.po", "web/src/locale/messages.fr.xlf"} <= carried
    assert "CHANGELOG.md" not in carried


SAVES_RULE = "---\nid: saves\ntitle: t\nseverity: low\ndescription: d\nrelevance:\n  - 'save'\n---\nLook at saves.\n"


def _many_files(count: int = 12) -> list[PackInput]:
    body = "".join(f"    value_{i} = compute({i}, 'text')\n" for i in range(12))
    return [PackInput(f"app/m{i}.py", f"def f{i}(request):\n    order.save()\n{body}", "python") for i in range(count)]


def _full_counts(result) -> dict[str, int]:
    counts: dict[str, int] = {}
    for window in result.windows:
        for path in {f.path for f in window.files if f.tier == "full"}:
            counts[path] = counts.get(path, 0) + 1
    return counts


def test_a_file_is_packed_in_full_once_when_no_chain_needs_it_twice(tokenizer):
    files = _many_files() + [PackInput("app/notes.txt", "plain notes\n" * 5, None)]
    result = pack(files, repository="r", rules=[RULE], tokenizer=tokenizer, options=_options(max_model_len=5_000))
    assert len(result.windows) > 1
    assert set(_full_counts(result).values()) == {1}
    reasons = {f.reason for window in result.windows for f in window.files}
    assert PackReason.RELEVANT in reasons


def test_only_a_chain_repeats_a_file(tokenizer):
    files = _many_files()
    chains = [(f"app/m{i}.py", "app/m0.py") for i in range(1, 12)]
    result = pack(files, repository="r", rules=[RULE], tokenizer=tokenizer, options=_options(max_model_len=5_000), chains=chains)
    counts = _full_counts(result)
    assert counts["app/m0.py"] > 1
    assert {path for path, count in counts.items() if count > 1} == {"app/m0.py"}
    repeated = {f.reason for window in result.windows for f in window.files if f.path == "app/m0.py" and f.tier == "full"}
    assert repeated == {PackReason.CHAIN}


def test_the_manifest_totals_tokens_by_reason_and_kind(tokenizer, tmp_path):
    walked, files = _inputs(_django_angular(tmp_path))
    result = pack(files, repository="shop", rules=[RULE], tokenizer=tokenizer, options=_options())
    manifest = pack_manifest(result, walked)
    placed = [entry for window in manifest["windows"] for entry in window["files"]]
    assert sum(manifest["tokens_by_reason"].values()) == sum(entry["tokens"] for entry in placed)
    assert sum(manifest["tokens_by_kind"].values()) == sum(entry["tokens"] for entry in placed)
    assert {entry["reason"] for entry in placed} <= {reason.value for reason in PackReason}
    for window in manifest["windows"]:
        assert sum(window["tokens_by_reason"].values()) == sum(entry["tokens"] for entry in window["files"])
    assert manifest["token_ratio"]["prompt_tokens"] == sum(w.prompt_tokens for w in result.windows)


def test_the_guard_fires_on_a_plan_that_spends_far_more_than_the_code_it_audits(tokenizer):
    files = _many_files()
    chains = [(f"app/m{i}.py", "app/m0.py") for i in range(1, 12)]
    result = pack(files, repository="r", rules=[RULE], tokenizer=tokenizer, options=_options(max_model_len=5_000), chains=chains)
    ratio = token_ratio(result)
    assert ratio.prompt_tokens > ratio.audited_tokens > 0
    notice = token_ratio_notice(result, WindowOptions(max_token_ratio=ratio.ratio / 2))
    assert notice is not None and "estimated" in notice and "auditor plan" in notice
    assert token_ratio_notice(result, WindowOptions(max_token_ratio=ratio.ratio * 2)) is None


def test_a_one_window_plan_never_trips_the_guard(tokenizer, tmp_path):
    _, files = _inputs(_django_angular(tmp_path))
    result = pack(files, repository="shop", rules=[RULE], tokenizer=tokenizer, options=_options())
    assert len(result.windows) == 1
    assert token_ratio(result).ratio > 3
    assert token_ratio_notice(result, WindowOptions()) is None


def _ratio_pack_arguments(tmp_path: Path, tiny_tokenizer_dir: Path) -> list[str]:
    """``auditor pack`` arguments for a repository that packs in several windows."""
    root = tmp_path / "repo"
    root.mkdir()
    for path, text in ((f.path, f.text) for f in _many_files(40)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    # A rule the model alone checks: its relevant files are candidates, packed in several windows.
    rule = tmp_path / "saves.md"
    rule.write_text(SAVES_RULE)
    return [
        "pack", str(root), "--format", "json", "--tokenizer", str(tiny_tokenizer_dir), "--rule", str(rule),
        "--max-model-len", "9000", "--output-tokens", "300", "--no-cache",
    ]


def test_max_token_ratio_makes_the_guard_fatal_before_sending(tmp_path, tiny_tokenizer_dir):
    from typer.testing import CliRunner

    from auditor.cli.app import app

    arguments = _ratio_pack_arguments(tmp_path, tiny_tokenizer_dir)
    plain = CliRunner().invoke(app, arguments)
    assert plain.exit_code == 0, plain.output
    assert len(json.loads(plain.stdout)["windows"]) > 1
    fatal = CliRunner().invoke(app, [*arguments, "--max-token-ratio", "1.01"])
    assert fatal.exit_code == PackError.exit_code, fatal.output
    assert "nothing was sent" in fatal.output


@pytest.mark.parametrize("table", ["[tool.auditor]", "[tool.auditor.pack]"])
def test_the_guard_ratio_comes_from_tool_auditor_and_the_flag_wins(tmp_path, tiny_tokenizer_dir, monkeypatch, table):
    from typer.testing import CliRunner

    from auditor.cli.app import app

    arguments = _ratio_pack_arguments(tmp_path, tiny_tokenizer_dir)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(f"{table}\nmax-token-ratio = 1.01\n")
    monkeypatch.chdir(project)
    fatal = CliRunner().invoke(app, arguments)
    assert fatal.exit_code == PackError.exit_code, fatal.output
    assert "--max-token-ratio 1.01" in fatal.output and "nothing was sent" in fatal.output
    relaxed = CliRunner().invoke(app, [*arguments, "--max-token-ratio", "50"])
    assert relaxed.exit_code == 0, relaxed.output


def test_a_bad_guard_ratio_in_the_configuration_names_the_file(tmp_path, tiny_tokenizer_dir, monkeypatch):
    from typer.testing import CliRunner

    from auditor.cli.app import app

    arguments = _ratio_pack_arguments(tmp_path, tiny_tokenizer_dir)
    (tmp_path / "auditor.toml").write_text("max-token-ratio = -1\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 64, result.output
    assert "auditor.toml" in result.output and "max-token-ratio" in result.output
