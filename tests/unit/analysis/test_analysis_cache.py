"""The analysis cache (auditor.analysis.transactions.result_memo and .facts_cache): a cached
run returns what an uncached one does, byte for byte; every key input changed misses; an
edit recomputes only the edited file's facts; a damaged entry is recomputed; the stores are
bounded; ``--no-cache`` reads and writes neither."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from auditor.analysis.transactions import TxOptions, analyze_tx_outside_transaction, facts_cache, result_memo
from auditor.analysis.transactions import analysis as analysis_module
from auditor.analysis.transactions.facts import FileFacts
from auditor.analysis.transactions.facts_cache import text_digest
from auditor.analysis.transactions.result_memo import ResultMemo, result_key
from auditor.findings.model import ChainStep, EffectSite, Finding, FindingChain, Verdict
from auditor.index.extract import index_source
from auditor.rules.loader import Rule, builtin_rules
from auditor.rules.severity import Severity
from auditor.runs.prepare import prepare_repository, run_static_pass, selected_rules
from tests.support import ALL_SEVERITIES, FIXTURES, load_app

APPS = (
    "django_shop", "django_caught", "django_invites", "django_rerun", "django_deletes", "django_drf", "flask_ledger",
    "go_inventory",
)  # fmt: skip


def rule() -> Rule:
    return builtin_rules()["tx-outside-transaction"]


def analysed(
    indexes, texts, cache: Path | None, options: TxOptions = ALL_SEVERITIES, rule_used: Rule | None = None
) -> str:
    """The repr of one run's result: every field, every value's type."""
    return repr(analyze_tx_outside_transaction(indexes, texts, rule_used or rule(), options=options, cache_dir=cache))


class Spy:
    """Counts the analyses run and the files whose facts are computed (not restored)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs = 0
        self.computed: list[str] = []
        analyzed, computed = analysis_module._analyzed, FileFacts.computed.__func__

        def counting_run(*args, **kwargs):
            self.runs += 1
            return analyzed(*args, **kwargs)

        def counting_facts(cls, path, *args):
            self.computed.append(path)
            return computed(cls, path, *args)

        monkeypatch.setattr(analysis_module, "_analyzed", counting_run)
        monkeypatch.setattr(FileFacts, "computed", classmethod(counting_facts))


def edited(indexes, texts, path: str, text: str):
    """``indexes`` and ``texts`` with ``path`` holding ``text``."""
    texts = {**texts, path: text}
    return {**indexes, path: index_source(path, text, indexes[path].language)}, texts


def insert_line(text: str, after: str, line: str) -> str:
    """``text`` with ``line`` inserted after the first line containing ``after`` (indented alike)."""
    lines = text.split("\n")
    position = next(number for number, found in enumerate(lines) if after in found)
    indent = lines[position + 1][: len(lines[position + 1]) - len(lines[position + 1].lstrip())]
    return "\n".join([*lines[: position + 1], indent + line, *lines[position + 1 :]])


@pytest.mark.parametrize("app", APPS)
def test_a_cached_run_returns_what_an_uncached_one_does(
    app: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexes, texts = load_app(FIXTURES / app)
    uncached = analysed(indexes, texts, None)
    spy = Spy(monkeypatch)
    assert analysed(indexes, texts, tmp_path) == uncached  # cold: computed and stored
    assert analysed(indexes, texts, tmp_path) == uncached  # warm: the memo's
    assert spy.runs == 1
    (memo_entry,) = (tmp_path / f"tx-results-v{result_memo.MEMO_VERSION}").iterdir()
    memo_entry.unlink()
    assert analysed(indexes, texts, tmp_path) == uncached  # the facts' only
    assert spy.runs == 2 and len(spy.computed) == len(set(spy.computed))


def test_every_input_of_the_key_changes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexes, texts = load_app(FIXTURES / "django_shop")
    digests = {path: text_digest(text) for path, text in texts.items()}
    models = tmp_path / "models.yaml"
    models.write_text("facts: []\n", encoding="utf-8")
    options = (Severity.LOW, False, (models,))

    def key(**changed) -> str | None:
        given = {"indexes": indexes, "digests": digests, "rule": rule(), "options": options, "models": (models,)}
        return result_key(**{**given, **changed})

    base = key()
    path = next(iter(indexes))
    other_index = index_source(path, texts[path] + "\n# edited\n", indexes[path].language)
    variants = {
        "a file's content": key(indexes={**indexes, path: other_index}),
        "a file's text": key(digests={**digests, path: text_digest(texts[path] + " ")}),
        "a text the index does not cover": key(digests={**digests, "notes.txt": text_digest("")}),
        "a file removed": key(indexes={name: index for name, index in indexes.items() if name != path}),
        "the rule": key(rule=replace(rule(), sinks=(*rule().sinks, "*.persist"))),
        "the severity": key(options=(Severity.HIGH, False, (models,))),
        "the tests flag": key(options=(Severity.LOW, True, (models,))),
        "no models file": key(options=(Severity.LOW, False, ()), models=()),
    }
    models.write_text("facts: [{}]\n", encoding="utf-8")
    variants["the models file's bytes"] = key()
    models.write_text("facts: []\n", encoding="utf-8")
    assert key() == base
    monkeypatch.setattr(result_memo, "package_digest", lambda: "an edited checkout")
    variants["auditor's code"] = key()
    monkeypatch.undo()
    monkeypatch.setattr(result_memo, "MEMO_VERSION", result_memo.MEMO_VERSION + 1)
    variants["the memo's version"] = key()
    assert all(variant not in (None, base) for variant in variants.values()), variants
    assert len(set(variants.values())) == len(variants)
    models.unlink()
    assert key() is None  # an unreadable models file: no memo


def test_a_changed_option_or_models_file_misses_the_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexes, texts = load_app(FIXTURES / "django_shop")
    models = tmp_path / "models.yaml"
    models.write_text("framework: shop\nfacts: []\n", encoding="utf-8")
    spy = Spy(monkeypatch)
    runs = [
        TxOptions(min_severity="low"),
        TxOptions(min_severity="high"),
        TxOptions(min_severity="low", include_tests=True),
        TxOptions(min_severity="low", models=(models,)),
    ]
    for options in runs:
        assert analysed(indexes, texts, tmp_path / "cache", options) == analysed(indexes, texts, None, options)
    assert spy.runs == 2 * len(runs)
    models.write_text("framework: shop\nfacts:\n  - {kind: write, call: '*.persist'}\n", encoding="utf-8")
    assert analysed(indexes, texts, tmp_path / "cache", runs[-1]) == analysed(indexes, texts, None, runs[-1])
    assert spy.runs == 2 * len(runs) + 2


def test_an_edit_recomputes_only_the_edited_file_s_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexes, texts = load_app(FIXTURES / "django_shop")
    analysed(indexes, texts, tmp_path)
    path = "shop/services/orders.py"
    indexes, texts = edited(indexes, texts, path, insert_line(texts[path], "def ", "note = None"))
    spy = Spy(monkeypatch)
    assert analysed(indexes, texts, tmp_path) == analysed(indexes, texts, None)
    assert spy.computed.count(path) == 2  # the cached run's and the uncached one's
    assert len(spy.computed) == 1 + sum(1 for name in indexes if indexes[name].language == "python")
    spy.computed.clear()
    assert analysed(indexes, texts, tmp_path) == analysed(indexes, texts, None) and spy.computed.count(path) == 1


def test_a_new_related_name_recomputes_every_file_s_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file's facts read the repository's related-manager names: they are part of the key.
    indexes, texts = load_app(FIXTURES / "django_shop")
    analysed(indexes, texts, tmp_path)
    path = "shop/models.py"
    tagged = (
        "\n\nclass Tagged(models.Model):\n"
        "    owner = models.ForeignKey('Order', related_name='taggings', on_delete=models.CASCADE)\n"
    )
    indexes, texts = edited(indexes, texts, path, texts[path] + tagged)
    spy = Spy(monkeypatch)
    assert analysed(indexes, texts, tmp_path) == analysed(indexes, texts, None)
    python = [name for name in sorted(indexes) if indexes[name].language == "python"]
    assert sorted(spy.computed) == sorted(python * 2)


def damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("store", ["tx-results", "tx-facts"])
@pytest.mark.parametrize("harm", ["flipped byte", "truncated", "directory", "link"])
def test_a_damaged_entry_is_recomputed(store: str, harm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexes, texts = load_app(FIXTURES / "django_shop")
    expected = analysed(indexes, texts, None)
    analysed(indexes, texts, tmp_path / "cache")
    for other in (tmp_path / "cache").glob("tx-*"):
        if not other.name.startswith(store):
            for entry in other.iterdir():
                entry.unlink()  # only the damaged store is left to answer
    (entry,) = next((tmp_path / "cache").glob(store + "*")).iterdir()
    if harm == "flipped byte":
        damage(entry)
    elif harm == "truncated":
        entry.write_bytes(entry.read_bytes()[:100])
    else:
        entry.unlink()
        if harm == "directory":
            entry.mkdir()
        else:
            (tmp_path / "elsewhere").write_bytes(b"")
            os.symlink(tmp_path / "elsewhere", entry)
    spy = Spy(monkeypatch)
    assert analysed(indexes, texts, tmp_path / "cache") == expected
    assert spy.runs == 1
    if store == "tx-facts":
        assert len(spy.computed) == sum(1 for index in indexes.values() if index.language == "python")


def test_a_facts_record_of_another_index_is_recomputed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A record whose call positions lie outside the file's index is not restored.
    indexes, texts = load_app(FIXTURES / "django_shop")
    context = "c" * 64
    path = "shop/services/orders.py"
    stamp = (indexes[path].language, indexes[path].content_hash, text_digest(texts[path]))
    facts = facts_cache.FactsCache(tmp_path)
    facts.store(context, {path: (stamp, ((), ((10_000, "write", "ORM write", "rows"),)))})
    monkeypatch.setattr(analysis_module, "facts_context", lambda *args: context)
    spy = Spy(monkeypatch)
    assert analysed(indexes, texts, tmp_path) == analysed(indexes, texts, None)
    assert spy.computed.count(path) == 2


def test_the_stores_keep_the_most_recently_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(result_memo, "MAX_RESULTS", 2)
    monkeypatch.setattr(facts_cache, "MAX_FACT_PACKS", 2)
    indexes, texts = load_app(FIXTURES / "django_shop")
    base = rule()
    for number in range(4):  # a rule of other sinks: another memo key and another facts context
        analysed(indexes, texts, tmp_path, rule_used=replace(base, sinks=(*base.sinks, f"*.persist{number}")))
    assert len(list((tmp_path / f"tx-results-v{result_memo.MEMO_VERSION}").iterdir())) == 2
    assert len(list((tmp_path / f"tx-facts-v{facts_cache.FACTS_VERSION}").iterdir())) == 2


def test_no_cache_reads_and_writes_neither_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = selected_rules(("tx-outside-transaction",), runs_model=False)
    prepared = prepare_repository(FIXTURES / "django_shop", cache_dir=tmp_path / "on")
    cached = run_static_pass(prepared, rules, ALL_SEVERITIES)
    assert any((tmp_path / "on").glob("tx-results-*/*.result")) and any((tmp_path / "on").glob("tx-facts-*/*.facts"))
    spy = Spy(monkeypatch)
    prepared = prepare_repository(FIXTURES / "django_shop", cache_dir=tmp_path / "on", use_cache=False)
    assert prepared.cache_dir is None
    uncached = run_static_pass(prepared, rules, ALL_SEVERITIES)
    assert spy.runs == 1 and repr(uncached) == repr(cached)


def test_a_stored_finding_comes_back_equal_with_every_nested_value() -> None:
    step = ChainStep("a.py", 3, "view", verified=True, note="entry")
    finding = Finding(
        rule="tx-outside-transaction", severity=Severity.HIGH, title="t", path="a.py", line=4, function="f",
        chain=(step,), explanation="e", found_by=("static", "model"), fingerprint="fp", window=2,
        chains=(FindingChain((step,), ("model",), "why"),), verdicts=(Verdict("S1", "confirmed", "r", "a.py", 4, 1),),
        sequence=(EffectSite("a.py", 4, "f", "write"),), strength=3,
    )  # fmt: skip
    decoded = result_memo._decoded(Finding, result_memo._encoded(finding))
    assert decoded == finding and repr(decoded) == repr(finding)
    with pytest.raises(TypeError):
        result_memo._encoded(replace(finding, title=Severity.LOW))


def test_result_memo_ignores_an_entry_of_another_key(tmp_path: Path) -> None:
    memo = ResultMemo(tmp_path)
    memo.put("a" * 64, (), (1, 2, 3, 4, 5))
    target = tmp_path / f"tx-results-v{result_memo.MEMO_VERSION}"
    (target / ("a" * 64 + ".result")).rename(target / ("b" * 64 + ".result"))
    assert memo.get("b" * 64, 5) is None
    memo.put("c" * 64, (), (1, 2, 3, 4, 5))
    assert memo.get("c" * 64, 5) == ((), (1, 2, 3, 4, 5)) and memo.get("c" * 64, 4) is None
