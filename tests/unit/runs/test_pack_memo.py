"""The pack memo (auditor.runs.pack_memo): a hit gives the pack's output byte for byte, and
changing any one input the key covers (a file's content, an option, a rule text, the
tokenizer, auditor's version) misses it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from auditor.cli.app import app
from auditor.cli.flags import ScanFlags
from auditor.cli.options import scan_config
from auditor.config.scan import ScanConfig
from auditor.report.manifest import manifest_json
from auditor.runs import pack_memo
from auditor.rules.loader import named_or_builtin
from auditor.runs.pack_memo import PackMemo, PackOutput, memoized_pack, pack_memo_key
from auditor.runs.prepare import WindowPlan, selected_rules
from auditor.tokens.tokenizer import load_tokenizer
from auditor.walk.walker import walk
from tests.support import FIXTURES

WINDOW = {"max_model_len": 16384, "output_tokens": 512}
RULE = (Path(__file__).resolve().parents[3] / "auditor" / "rules" / "builtin" / "sql-injection.md").read_text(encoding="utf-8")


@pytest.fixture()
def inputs(tmp_path: Path, tiny_tokenizer_dir: Path) -> dict[str, Path]:
    """A copy of fixtures/django_shop, of the tiny tokenizer, and a custom rule file."""
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "django_shop", repo)
    tokenizer = tmp_path / "tokenizer"
    shutil.copytree(tiny_tokenizer_dir, tokenizer)
    rule = tmp_path / "custom.md"
    rule.write_text(RULE.replace("id: sql-injection", "id: custom-sql"), encoding="utf-8")
    return {"repo": repo, "tokenizer": tokenizer, "rule": rule}


def config_of(inputs: dict[str, Path], **flags: object) -> ScanConfig:
    settings = {"tokenizer": str(inputs["tokenizer"]), "no_cache": True, "rule": ("tx-outside-transaction", str(inputs["rule"])), **WINDOW}
    settings.update(flags)
    return scan_config(inputs["repo"], ScanFlags(**settings))  # type: ignore[arg-type]


def key_of(config: ScanConfig) -> str:
    tokenizer = load_tokenizer(config.tokenizer_request)
    return pack_memo_key(config, walk(config.root, config.walk), named_or_builtin(config.rules), tokenizer, "json")


def edit_file(inputs: dict[str, Path]) -> None:
    with open(inputs["repo"] / "shop" / "views.py", "a", encoding="utf-8") as handle:
        handle.write("# edited\n")


def edit_rule(inputs: dict[str, Path]) -> None:
    rule = inputs["rule"]
    rule.write_text(rule.read_text(encoding="utf-8") + "\nOne more sentence of guidance.\n", encoding="utf-8")


def edit_vocabulary(inputs: dict[str, Path]) -> None:
    vocabulary = inputs["tokenizer"] / "tokenizer.json"
    vocabulary.write_text(json.dumps(json.loads(vocabulary.read_text(encoding="utf-8")), indent=1), encoding="utf-8")


def edit_template(inputs: dict[str, Path]) -> None:
    config = inputs["tokenizer"] / "tokenizer_config.json"
    data = json.loads(config.read_text(encoding="utf-8"))
    template = inputs["tokenizer"] / "chat_template.jinja"
    if template.is_file():
        template.write_text(template.read_text(encoding="utf-8") + "{# changed #}", encoding="utf-8")
    else:
        data["chat_template"] += "{# changed #}"
        config.write_text(json.dumps(data), encoding="utf-8")


EDITS: dict[str, Callable[[dict[str, Path]], None]] = {
    "a file's content": edit_file,
    "a rule text": edit_rule,
    "the tokenizer's vocabulary": edit_vocabulary,
    "the chat template": edit_template,
}


def test_the_memo_names_the_rules_a_model_pack_selects(inputs: dict[str, Path]) -> None:
    for rules in ((), ("tx-outside-transaction",)):
        config = config_of(inputs, rule=rules)
        assert named_or_builtin(config.rules) == selected_rules(config.rules, runs_model=True)


@pytest.mark.parametrize("edit", EDITS)
def test_changing_one_input_changes_the_key(inputs: dict[str, Path], edit: str) -> None:
    before = key_of(config_of(inputs))
    assert key_of(config_of(inputs)) == before
    EDITS[edit](inputs)
    assert key_of(config_of(inputs)) != before


@pytest.mark.parametrize(
    "flags", [{"max_windows": 1}, {"output_tokens": 1024}, {"probes": 0}, {"seed": 7}, {"min_severity": "low"}, {"include_tests": True}, {"exclude": ("shop/models.py",)}]
)
def test_changing_one_option_changes_the_key(inputs: dict[str, Path], flags: dict[str, object]) -> None:
    assert key_of(config_of(inputs, **flags)) != key_of(config_of(inputs))


def test_another_auditor_version_changes_the_key(inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    before = key_of(config_of(inputs))
    monkeypatch.setattr(pack_memo, "__version__", pack_memo.__version__ + ".1")
    assert key_of(config_of(inputs)) != before


def test_another_output_variant_changes_the_key(inputs: dict[str, Path]) -> None:
    config = config_of(inputs)
    tokenizer = load_tokenizer(config.tokenizer_request)
    walked = walk(config.root, config.walk)
    keys = {pack_memo_key(config, walked, named_or_builtin(config.rules), tokenizer, variant) for variant in ("json", "prompt 0", "prompt 1")}
    assert len(keys) == 3


def memo_run(inputs: dict[str, Path], memo: PackMemo, renders: list[int], **flags: object) -> PackOutput:
    """One memoized json pack; ``renders`` counts the plans actually made."""
    config = config_of(inputs, **flags)

    def render(plan: WindowPlan) -> str:
        renders.append(1)
        return manifest_json(plan.sent, plan.inputs.repository.walk)

    return memoized_pack(config, load_tokenizer(config.tokenizer_request), render, variant="json", memo=memo)


@pytest.mark.parametrize("edit", EDITS)
def test_a_hit_is_the_pack_byte_for_byte_and_an_edit_misses(inputs: dict[str, Path], tmp_path: Path, edit: str) -> None:
    memo, renders = PackMemo(tmp_path / "memo"), []
    first = memo_run(inputs, memo, renders)
    again = memo_run(inputs, memo, renders)
    assert renders == [1] and again == first
    EDITS[edit](inputs)
    after = memo_run(inputs, memo, renders)
    assert renders == [1, 1]
    unmemoized = memo_run(inputs, None, renders)  # type: ignore[arg-type]
    assert after == unmemoized


def test_a_damaged_entry_is_a_miss(inputs: dict[str, Path], tmp_path: Path) -> None:
    memo, renders = PackMemo(tmp_path / "memo"), []
    first = memo_run(inputs, memo, renders)
    for entry in memo.directory.glob("*.pack"):
        entry.write_bytes(entry.read_bytes()[:-10])
    assert memo_run(inputs, memo, renders) == first and renders == [1, 1]


@pytest.mark.parametrize("format", ["json", "prompt"])
def test_the_cli_writes_the_same_bytes_from_the_memo(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, format: str
) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "cache"))
    base = ["pack", str(inputs["repo"]), "--tokenizer", str(inputs["tokenizer"]), "--format", format,
            "--max-model-len", str(WINDOW["max_model_len"]), "--output-tokens", str(WINDOW["output_tokens"])]
    outputs = []
    for flags in (["--no-cache"], [], []):
        outcome = CliRunner().invoke(app, [*base, *flags, "-o", str(tmp_path / f"out{len(outputs)}")])
        assert outcome.exit_code == 0, outcome.output
        outputs.append((tmp_path / f"out{len(outputs)}").read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    assert len(list((tmp_path / "cache" / "packs").rglob("*.pack"))) == 1


def test_a_linked_transaction_models_file_is_keyed_by_the_bytes_it_links_to(inputs: dict[str, Path]) -> None:
    # Outside the walked tree, so that only the models' own digest can see the edit.
    models = inputs["rule"].parent / "models.yaml"
    models.write_text("framework: shop\nfacts: []\n", encoding="utf-8")
    linked = inputs["rule"].parent / "linked.yaml"
    linked.symlink_to(models)
    before = key_of(config_of(inputs, tx_models=(linked,)))
    assert before is not None
    models.write_text("framework: shop\nfacts: []\n# edited\n", encoding="utf-8")
    assert key_of(config_of(inputs, tx_models=(linked,))) != before


def test_an_unreadable_transaction_models_file_makes_no_key(inputs: dict[str, Path]) -> None:
    (inputs["repo"] / "models.yaml").mkdir()
    assert key_of(config_of(inputs, tx_models=(Path("models.yaml"),))) is None
    assert key_of(config_of(inputs, tx_models=(Path("missing.yaml"),))) is None


def test_another_package_digest_changes_the_key(inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    before = key_of(config_of(inputs))
    monkeypatch.setattr(pack_memo, "package_digest", lambda: "edited checkout")
    assert key_of(config_of(inputs)) != before


def test_a_plan_with_a_timing_skip_is_not_memoized(inputs: dict[str, Path], tmp_path: Path) -> None:
    memo, renders = PackMemo(tmp_path / "memo"), []
    # A parse budget no file meets: every file is skipped as parse-budget, as a slow run might.
    memo_run(inputs, memo, renders, parse_budget=1e-9)
    memo_run(inputs, memo, renders, parse_budget=1e-9)
    assert renders == [1, 1] and not list(memo.directory.glob("*.pack"))
