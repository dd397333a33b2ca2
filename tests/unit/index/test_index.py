"""Index stage: definitions, calls, context blocks, imports per language; cache; robustness."""

from __future__ import annotations

import gc
import time
from dataclasses import fields, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor.index import cache as index_cache
from auditor.index import extract as index_extract
from auditor.index import indexer as index_indexer
from auditor.index import model as index_model
from auditor.index.cache import IndexCache, scan_pack_name
from auditor.index.extract import QUERY_NAMES, index_source
from auditor.index.indexer import collection_paused, index_files
from auditor.index.model import CallSite, ContextBlock, Definition, FileIndex, Import
from auditor.languages import language_for_path
from auditor.languages.grammars import (
    GRAMMARS,
    UnsupportedLanguageError,
    parser_for,
    query_bundle,
    query_for,
)
from auditor.progress import ProgressEvent
from auditor.storage.dirs import cache_dir
from auditor.storage.sealed import seal, unseal
from tests.support import TEST_DATA

DATA = TEST_DATA / "lang"


def index_fixture(name: str) -> FileIndex:
    path = DATA / name
    language = language_for_path(name)
    assert language is not None
    return index_source(name, path.read_text(encoding="utf-8"), language)


def definitions_by_qualname(index: FileIndex) -> dict[str, tuple[str, int, int, int]]:
    return {
        d.qualname: (d.kind, d.start_line, d.end_line, d.body_start_line)
        for d in index.definitions
    }


def calls_of(index: FileIndex) -> set[tuple[str, str, int, str | None]]:
    return {(c.callee, c.name, c.line, c.enclosing) for c in index.calls}


# --------------------------------------------------------------------------- python


def test_python_definitions_have_qualnames_kinds_spans_and_decorators() -> None:
    index = index_fixture("sample.py")

    assert definitions_by_qualname(index) == {
        "OrderService": ("class", 14, 35, 16),
        "OrderService.__init__": ("method", 17, 18, 18),
        # starts at its first decorator; body after the three-line docstring
        "OrderService.save_order": ("method", 20, 32, 30),
        # a docstring-only body leaves nothing to elide
        "OrderService.only_doc": ("method", 34, 35, 36),
        "process": ("function", 38, 46, 39),
        "process.helper": ("function", 39, 40, 40),
        "one_liner": ("function", 49, 49, 50),
    }
    save_order = next(d for d in index.definitions if d.name == "save_order")
    assert save_order.decorators == (
        "transaction.atomic",
        'app.route("/pay", methods=["POST"],)',
    )
    assert save_order.parent == "OrderService"
    service = index.definitions[0]
    assert service.bases == ("BaseService",)  # metaclass=... is not a base
    assert service.parent is None
    assert [d.start_line for d in index.definitions] == sorted(
        d.start_line for d in index.definitions
    )


def test_python_calls_record_callee_chains_arguments_and_enclosing_function() -> None:
    index = index_fixture("sample.py")

    assert calls_of(index) == {
        ("app.route", "route", 21, None),  # a decorator runs at class level
        ("self.session.add", "add", 30, "OrderService.save_order"),
        ("OrderModel.objects.filter", "filter", 31, "OrderService.save_order"),
        ("OrderModel.objects.filter.update", "update", 31, "OrderService.save_order"),
        ("transaction.atomic", "atomic", 42, "process"),
        ("engine.begin", "begin", 42, "process"),
        ("conn.execute", "execute", 43, "process"),
        ("helper", "helper", 46, "process"),
        ("process", "process", 53, None),
    }
    arguments = {c.callee: c.arguments for c in index.calls}
    assert arguments["OrderModel.objects.filter.update"] == 'state="saved"'
    assert arguments["conn.execute"] == "\"UPDATE orders SET state = 'done'\""
    assert arguments["engine.begin"] == ""
    assert [(c.line, c.callee) for c in index.calls] == sorted(
        (c.line, c.callee) for c in index.calls
    )


def test_python_with_items_become_context_blocks_without_their_alias() -> None:
    index = index_fixture("sample.py")

    assert index.context_blocks == (
        ContextBlock("transaction.atomic()", 42, 45, "process"),
        ContextBlock("engine.begin()", 42, 45, "process"),
    )


def test_python_imports_cover_plain_aliased_relative_and_wildcard_forms() -> None:
    index = index_fixture("sample.py")

    assert index.imports == (
        Import("os", None, None, 3),
        Import("os.path", None, "osp", 4),
        Import("django.db", "transaction", None, 5),
        Import(".models", "Order", "OrderModel", 6),
        Import(".models", "Payment", None, 6),
        Import("..core.db", "*", None, 7),
    )


def test_python_module_facts_main_block_and_literal_assignments() -> None:
    index = index_fixture("sample.py")

    assert index.main_block == (52, 53)
    # the f-string is not a literal
    assert index.string_assignments == (("DEBUG", 9), ("DATABASE_URL", 10))
    assert index.line_count == 53
    assert not index.has_errors


def test_enclosing_definition_finds_the_innermost_matching_kind() -> None:
    index = index_fixture("sample.py")

    def enclosing(line: int, kinds: tuple[str, ...] = ("function", "method")) -> str | None:
        definition = index.enclosing_definition(line, kinds)
        return definition.qualname if definition is not None else None

    assert enclosing(40) == "process.helper"
    assert enclosing(43) == "process"
    assert enclosing(31) == "OrderService.save_order"
    assert enclosing(20) == "OrderService.save_order"  # a decorator line
    assert enclosing(16) is None
    assert enclosing(16, kinds=("class",)) == "OrderService"
    assert enclosing(10) is None


def test_a_file_with_syntax_errors_is_flagged_and_still_indexed() -> None:
    index = index_fixture("broken.py")

    assert index.has_errors
    qualnames = {d.qualname for d in index.definitions}
    assert {"good", "Survivor", "Survivor.method"} <= qualnames
    assert ("good", "good", 11, "Survivor.method") in calls_of(index)


# --------------------------------------------------------------------------- javascript / typescript


def test_javascript_definitions_calls_and_imports() -> None:
    index = index_fixture("sample.js")

    assert definitions_by_qualname(index) == {
        "checkout": ("function", 11, 15, 12),
        "CartController": ("class", 17, 26, 18),
        "CartController.constructor": ("method", 18, 21, 19),
        "CartController.add": ("method", 23, 25, 24),
        "handler": ("function", 28, 30, 29),
    }
    assert index.definitions[1].bases == ("BaseController",)
    calls = calls_of(index)
    assert ("orders.items.filter.map", "map", 13, "checkout") in calls
    assert ("this.store.items.push", "push", 24, "CartController.add") in calls
    assert ("process", "process", 29, "handler") in calls
    route = next(c for c in index.calls if c.callee == "app.get")
    assert route == CallSite("app.get", "get", 32, None, "'/checkout', checkout")
    assert index.imports == (
        Import("./orders", "default", "orders", 1),
        Import("./payments", None, "payments", 2),
        Import("../store", "load", "fetchOrder", 3),
        Import("../store", "save", None, 3),
        Import("./polyfill", None, None, 4),
        Import("express", None, "express", 5),
        Import("express", "Router", None, 6),
        Import("express", "json", "parseJson", 6),
    )
    assert index.context_blocks == ()
    assert index.main_block is None


def test_typescript_decorators_bases_and_generic_calls() -> None:
    index = index_fixture("sample.ts")

    assert definitions_by_qualname(index) == {
        "Repository": ("class", 5, 7, 6),
        "OrderService": ("class", 9, 21, 11),
        "OrderService.constructor": ("method", 11, 13, 12),
        "OrderService.save": ("method", 15, 20, 18),
        "total": ("function", 23, 25, 24),
    }
    by_name = {d.qualname: d for d in index.definitions}
    assert by_name["OrderService"].decorators == ("Injectable({providedIn: 'root'})",)
    assert by_name["OrderService"].bases == (
        "BaseService",
        "Repository<Order>",
        "Disposable",
    )
    assert by_name["OrderService.save"].decorators == (
        "Get('/orders')",
        "Transactional()",
    )
    assert by_name["Repository"].bases == ("Base",)
    calls = calls_of(index)
    # type arguments and the awaited expression's `await` are not part of the callee
    assert ("this.http.post", "post", 18, "OrderService.save") in calls
    assert ("this.http.post.toPromise", "toPromise", 18, "OrderService.save") in calls
    assert Import("fs", None, "fs", 3) in index.imports
    assert Import("@angular/core", "Injectable", None, 1) in index.imports


def test_tsx_reuses_typescript_queries() -> None:
    index = index_fixture("sample.tsx")

    assert definitions_by_qualname(index) == {
        "Counter": ("function", 3, 10, 4),
        "Label": ("function", 12, 14, 13),
    }
    assert ("setCount", "setCount", 6, "Counter") in calls_of(index)
    assert index.imports == (
        Import("react", "default", "React", 1),
        Import("react", "useState", None, 1),
    )
    assert not index.has_errors


# --------------------------------------------------------------------------- go / java


def test_go_methods_are_qualified_by_receiver_type() -> None:
    index = index_fixture("sample.go")

    assert definitions_by_qualname(index) == {
        "Store": ("class", 10, 12, 11),
        "Store.Save": ("method", 15, 18, 16),
        "Store.Count": ("method", 20, 20, 21),
        "Register": ("function", 23, 27, 24),
    }
    assert index.definitions[1].parent == "Store"
    handle = next(c for c in index.calls if c.name == "HandleFunc")
    assert handle.callee == "h.HandleFunc"
    assert handle.enclosing == "Register"
    assert handle.arguments.startswith(
        '"/orders", func(w h.ResponseWriter, r *h.Request) {'
    )
    # calls inside a function literal belong to the enclosing named function
    assert ("fmt.Fprintln", "Fprintln", 25, "Register") in calls_of(index)
    assert index.imports == (
        Import("database/sql", None, None, 4),
        Import("fmt", None, None, 5),
        Import("net/http", None, "h", 6),
    )


def test_java_annotations_bases_calls_resources_and_imports() -> None:
    index = index_fixture("sample.java")

    assert definitions_by_qualname(index) == {
        "OrderController": ("class", 8, 32, 11),
        "OrderController.OrderController": ("method", 14, 17, 15),
        "OrderController.save": ("method", 20, 27, 23),
        "OrderController.Listener": ("class", 29, 31, 30),
        "OrderController.Listener.onSave": ("method", 30, 30, 31),
    }
    by_name = {d.qualname: d for d in index.definitions}
    assert by_name["OrderController"].decorators == (
        "RestController",
        'RequestMapping("/orders")',
    )
    assert by_name["OrderController"].bases == (
        "BaseController",
        "Serializable",
        "Closeable",
    )
    # parameter annotations (@RequestBody) are not the method's
    assert by_name["OrderController.save"].decorators == (
        "Transactional",
        'PostMapping("/save")',
    )
    calls = calls_of(index)
    assert (
        "repository.findById.orElseThrow",
        "orElseThrow",
        24,
        "OrderController.save",
    ) in calls
    assert ("repository.save", "save", 26, "OrderController.save") in calls
    assert ("Order", "Order", 26, "OrderController.save") in calls
    assert index.context_blocks == (
        ContextBlock("dataSource.getConnection()", 23, 25, "OrderController.save"),
        ContextBlock("stream", 23, 25, "OrderController.save"),
    )
    assert index.imports == (
        Import("java.sql.Connection", None, None, 3),
        Import("org.junit.Assert.assertEquals", None, None, 4),
        Import("com.example.core", "*", None, 5),
    )


# --------------------------------------------------------------------------- robustness


def test_long_arguments_are_whitespace_normalised_and_truncated() -> None:
    text = (
        "def f():\n    call(\n        "
        + ",\n        ".join(f"argument_{i}" for i in range(200))
        + "\n    )\n"
    )

    (site,) = index_source("long.py", text, "python").calls

    assert len(site.arguments) == index_model.TEXT_LIMIT
    assert site.arguments.startswith("argument_0, argument_1, argument_2")


def test_non_ascii_text_gives_the_same_texts_as_its_ascii_twin() -> None:
    # Byte offsets and character offsets differ once the text is not ASCII.
    template = (
        "def f():\n"
        "    '{0}'\n"
        "    with  lock( '{0}' ) :\n"
        "        Order . objects . filter( name='{0}' ,\n  x=1 ).update( a ,  b )\n"
    )
    ascii_index = index_source("a.py", template.format("abc"), "python")
    text_index = index_source("u.py", template.format("äß€"), "python")

    def texts(index: FileIndex) -> list[tuple[str, str]]:
        return [(site.callee, site.arguments) for site in index.calls] + [
            (block.expression, "") for block in index.context_blocks
        ]

    assert texts(text_index) == [
        (text.replace("abc", "äß€"), arguments.replace("abc", "äß€"))
        for text, arguments in texts(ascii_index)
    ]
    assert ("Order.objects.filter.update", "a , b") in texts(text_index)
    assert ("lock('äß€')", "") in texts(text_index)


def test_undecodable_source_bytes_are_replaced_in_texts() -> None:
    # A lone surrogate is encoded as is (surrogatepass); reading it back cannot decode it.
    (site,) = index_source("s.py", "f('\udcff')\n", "python").calls

    assert site.callee == "f"
    assert site.arguments.startswith("'") and site.arguments.endswith("'")
    assert "\ufffd" in site.arguments


def test_same_input_gives_equal_index() -> None:
    for name in (
        "sample.py",
        "sample.js",
        "sample.ts",
        "sample.go",
        "sample.java",
        "broken.py",
    ):
        assert index_fixture(name) == index_fixture(name)


@pytest.mark.parametrize("language", sorted(GRAMMARS))
def test_every_language_has_a_parser_and_compiling_queries(language: str) -> None:
    assert parser_for(language) is not None
    assert query_for(language, "definitions") is not None
    assert query_for(language, "calls") is not None
    assert query_for(language, "imports") is not None
    assert query_bundle(language, QUERY_NAMES) is not None


def test_unsupported_language_has_no_parser_and_cannot_be_indexed() -> None:
    assert parser_for("cobol") is None
    assert query_for("cobol", "calls") is None
    assert query_for("go", "contexts") is None  # no such construct in Go
    with pytest.raises(UnsupportedLanguageError):
        index_source("x.cob", "MOVE A TO B.", "cobol")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(language=st.sampled_from(sorted(GRAMMARS)), text=st.text(max_size=300))
def test_arbitrary_text_never_raises(language: str, text: str) -> None:
    index = index_source("fuzz", text, language)

    assert index.line_count == (
        text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    )
    for definition in index.definitions:
        assert (
            1
            <= definition.start_line
            < definition.body_start_line
            <= definition.end_line + 1
        )
        assert definition.end_line <= max(index.line_count, 1)


# --------------------------------------------------------------------------- index_files and cache


def sources_from_fixtures(*names: str) -> list[tuple[str, str, str, str]]:
    sources = []
    for name in names:
        text = (DATA / name).read_text(encoding="utf-8")
        language = language_for_path(name)
        assert language is not None
        sources.append((name, text, language, index_model.content_hash_of(text)))
    return sources


def test_second_run_reads_everything_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.py", "sample.go", "sample.java")
    first = index_files(sources, cache=IndexCache(tmp_path))

    def no_parsing(*args: object, **kwargs: object) -> FileIndex:
        raise AssertionError("parsed a file that was cached")

    monkeypatch.setattr(index_indexer, "index_source", no_parsing)
    events: list[ProgressEvent] = []
    second = index_files(sources, cache=IndexCache(tmp_path), progress=events.append)

    assert second == first
    assert list(second) == sorted(second)
    assert events[-1] == ProgressEvent(stage="index", completed=3, total=3)


def test_identical_content_at_two_paths_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (source,) = sources_from_fixtures("sample.py")
    copies = [source, ("copy/sample.py", *source[1:])]
    parsed: list[str] = []
    real_index_source = index_extract.index_source

    def counting(path: str, *args: object) -> FileIndex:
        parsed.append(path)
        return real_index_source(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(index_indexer, "index_source", counting)
    result = index_files(copies, cache=IndexCache(tmp_path))

    assert len(parsed) == 1
    assert result["copy/sample.py"] == replace(
        result["sample.py"], path="copy/sample.py"
    )
    cached = IndexCache(tmp_path).get(source[3], "python", "elsewhere.py")
    assert cached == replace(result["sample.py"], path="elsewhere.py")


def test_parsing_in_worker_processes_gives_what_parsing_here_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = ["sample.py", "sample.js", "sample.ts", "sample.tsx", "sample.go"]
    names += ["sample.java", "broken.py"]
    sources = sources_from_fixtures(*names)
    # Identical content at a second path is parsed once.
    sources.append(("copy/sample.py", *sources[0][1:]))
    sources.append(("unicode.py", "def f():\n    g('äß', h( x ))\n", "python", "u"))
    monkeypatch.setattr(index_indexer, "PARALLEL_PARSE_THRESHOLD", 1)
    monkeypatch.setattr(index_indexer, "_available_cpus", lambda: 2)

    result = index_files(sources)

    assert result == {
        path: index_source(path, text, language, content_hash)
        for path, text, language, content_hash in sorted(sources)
    }


def test_corrupt_cache_entry_is_ignored_and_rewritten(tmp_path: Path) -> None:
    (source,) = sources_from_fixtures("sample.go")
    cache = IndexCache(tmp_path)
    expected = index_files([source], cache=cache)["sample.go"]
    entry = cache.entry_path(source[3], "go")
    entry.write_text('{"truncated": ', encoding="utf-8")
    # Without its pack, the scan has to read the entry file.
    cache.pack_path(scan_pack_name(["sample.go"])).unlink()

    assert cache.get(source[3], "go", "sample.go") is None
    assert index_files([source], cache=cache)["sample.go"] == expected
    assert cache.get(source[3], "go", "sample.go") == expected


def test_cache_is_separated_by_index_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (source,) = sources_from_fixtures("sample.java")
    index_files([source], cache=IndexCache(tmp_path))
    assert IndexCache(tmp_path).get(source[3], "java", "sample.java") is not None

    monkeypatch.setattr(index_cache, "INDEX_VERSION", index_model.INDEX_VERSION + 1)
    newer = IndexCache(tmp_path)

    assert newer.directory != tmp_path / "v1"
    assert newer.get(source[3], "java", "sample.java") is None


def test_cache_keys_are_content_and_language(tmp_path: Path) -> None:
    cache = IndexCache(tmp_path)
    index = index_source(
        "a.ts",
        "export function f() {\n  return 1;\n}\n",
        "typescript",
        "hash/with:odd chars",
    )
    cache.put(index)

    assert cache.get("hash/with:odd chars", "typescript", "a.ts") == index
    assert cache.get("hash/with:odd chars", "tsx", "a.ts") is None
    assert cache.get("other", "typescript", "a.ts") is None
    stored = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert stored
    assert all(path.is_relative_to(cache.directory) for path in stored)


def test_default_cache_dir_prefers_auditor_then_xdg(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AUDITOR_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("index") == tmp_path / "mine" / "index"

    monkeypatch.delenv("AUDITOR_CACHE_DIR")
    assert cache_dir("index") == tmp_path / "xdg" / "auditor" / "index"

    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir("index") == tmp_path / "home" / ".cache" / "auditor" / "index"


# --------------------------------------------------------------------------- packs


def forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_parsing(*args: object, **kwargs: object) -> FileIndex:
        raise AssertionError("parsed a file that was cached")

    monkeypatch.setattr(index_indexer, "index_source", no_parsing)


def count_parsing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    parsed: list[str] = []
    real_index_source = index_extract.index_source

    def counting(path: str, *args: object) -> FileIndex:
        parsed.append(path)
        return real_index_source(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(index_indexer, "index_source", counting)
    return parsed


def remove_entry_files(cache: IndexCache) -> None:
    entries = list(cache.directory.rglob("*.index"))
    assert entries
    for entry in entries:
        entry.unlink()


def test_a_repeated_scan_is_served_by_its_pack_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.py", "sample.go", "sample.ts")
    cache = IndexCache(tmp_path)
    first = index_files(sources, cache=cache)
    remove_entry_files(cache)
    forbid_parsing(monkeypatch)

    second = index_files(sources, cache=cache)

    assert second == first
    assert list(second) == sorted(second)
    assert [path.name for path in (cache.directory / "packs").iterdir()] == [
        cache.pack_path(scan_pack_name(["sample.py", "sample.go", "sample.ts"])).name
    ]


def test_pack_entries_are_checked_against_current_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.py", "sample.go")
    cache = IndexCache(tmp_path)
    index_files(sources, cache=cache)
    path, text, language, _ = sources[0]
    edited_text = text + "\ndef added():\n    return 1\n"
    edited = [
        (path, edited_text, language, index_model.content_hash_of(edited_text)),
        sources[1],
    ]
    parsed = count_parsing(monkeypatch)

    result = index_files(edited, cache=cache)

    assert parsed == ["sample.py"]
    assert result["sample.py"] == index_source(*edited[0])
    assert "added" in {d.qualname for d in result["sample.py"].definitions}
    # The pack (through its delta) now holds the edited entry; the old one stays until
    # the pack is next written whole, so switching back costs no parse either.
    remove_entry_files(cache)
    parsed.clear()
    assert index_files(edited, cache=cache) == result
    assert parsed == []
    assert index_files(sources, cache=cache)["sample.py"] == index_source(*sources[0])
    assert parsed == []


def _edited(source: tuple[str, str, str, str], serial: int) -> tuple[str, str, str, str]:
    path, text, language, _ = source
    text = text + f"\ndef added_{serial}():\n    return {serial}\n"
    return (path, text, language, index_model.content_hash_of(text))


def test_an_edit_goes_to_the_delta_and_the_pack_is_compacted_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.py", "sample.go", "sample.ts")
    cache = IndexCache(tmp_path)
    name = "repo"
    index_files(sources, cache=cache, pack_name=name)
    pack_file = cache.pack_path(name)
    whole = pack_file.read_bytes()
    monkeypatch.setattr(index_indexer, "PACK_DELTA_MIN", 2)
    monkeypatch.setattr(index_indexer, "PACK_DELTA_SHARE", 0.0)

    # One edit: the pack file is left as it is, the new entry goes to the delta.
    first = index_files([_edited(sources[0], 1), *sources[1:]], cache=cache, pack_name=name)
    assert pack_file.read_bytes() == whole
    assert cache.delta_path(name).is_file()
    remove_entry_files(cache)
    parsed = count_parsing(monkeypatch)
    assert index_files([_edited(sources[0], 1), *sources[1:]], cache=cache, pack_name=name) == first
    assert parsed == []

    # A second edit: delta (1) plus unused old versions (2) pass the limit of 2: the pack
    # is written whole with just the entries in use, and the delta is gone.
    second = [_edited(sources[0], 2), *sources[1:]]
    expected = index_files(second, cache=cache, pack_name=name)
    assert pack_file.read_bytes() != whole
    assert not cache.delta_path(name).exists()
    remove_entry_files(cache)
    parsed.clear()
    assert index_files(second, cache=cache, pack_name=name) == expected
    assert parsed == []
    index_files(sources, cache=cache, pack_name=name)
    assert parsed == ["sample.py"]  # the original version was dropped by the rewrite


def test_a_corrupt_delta_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sources_from_fixtures("sample.py", "sample.go")
    cache = IndexCache(tmp_path)
    index_files(sources, cache=cache, pack_name="repo")
    edited = [_edited(sources[0], 1), sources[1]]
    expected = index_files(edited, cache=cache, pack_name="repo")
    delta = cache.delta_path("repo")
    delta.write_bytes(delta.read_bytes()[:-7] + b"garbage")
    remove_entry_files(cache)
    parsed = count_parsing(monkeypatch)
    assert index_files(edited, cache=cache, pack_name="repo") == expected
    assert parsed == ["sample.py"]


def test_corrupt_pack_is_ignored_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.java", "sample.js")
    cache = IndexCache(tmp_path)
    expected = index_files(sources, cache=cache)
    pack = cache.pack_path(scan_pack_name(path for path, *_ in sources))
    data = pack.read_bytes()
    pack.write_bytes(data[: len(data) // 2] + b"garbage")
    forbid_parsing(monkeypatch)

    assert index_files(sources, cache=cache) == expected  # from the entry files

    remove_entry_files(cache)
    assert index_files(sources, cache=cache) == expected  # from the rewritten pack


def test_pack_is_chosen_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.py")
    cache = IndexCache(tmp_path)
    index_files(sources, cache=cache, pack_name="/repos/shop")
    remove_entry_files(cache)
    parsed = count_parsing(monkeypatch)

    index_files(sources, cache=cache, pack_name="/repos/shop")
    assert parsed == []
    # Another name has no pack yet: it borrows the newest other pack's records, then has its own.
    index_files(sources, cache=cache, pack_name="/repos/other")
    assert parsed == []
    assert cache.pack_path("/repos/other").is_file() and cache.pack_path("/repos/shop").is_file()
    cache.pack_path("/repos/shop").unlink()
    remove_entry_files_if_any(cache)
    index_files(sources, cache=cache, pack_name="/repos/other")  # its own pack
    assert parsed == []


def remove_entry_files_if_any(cache: IndexCache) -> None:
    for entry in cache.directory.rglob("*.index"):
        entry.unlink()


def large_first_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int = 6) -> tuple[IndexCache, list[tuple[str, str, str, str]]]:
    """A cache after the first index of a tree with more than ``ENTRY_FILES_MAX`` files (the
    limit lowered to 3 here)."""
    monkeypatch.setattr(index_indexer, "ENTRY_FILES_MAX", 3)
    sources = []
    for i in range(count):
        text = f"def f{i}():\n    return g{i}()\n"
        sources.append((f"pkg/m{i}.py", text, "python", index_model.content_hash_of(text)))
    cache = IndexCache(tmp_path)
    index_files(sources, cache=cache, pack_name="tree")
    return cache, sources


def test_a_large_first_index_keeps_its_records_in_the_pack_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, sources = large_first_index(tmp_path, monkeypatch)
    expected = index_files(sources)

    assert not list(cache.directory.rglob("*.index"))  # no entry file per record
    forbid_parsing(monkeypatch)
    assert index_files(sources, cache=cache, pack_name="tree") == expected
    # A worktree of the same tree under another name finds them in that pack.
    assert index_files(sources, cache=cache, pack_name="worktree") == expected


def test_an_edit_after_a_large_first_index_writes_its_entry_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, sources = large_first_index(tmp_path, monkeypatch)
    text = "def edited():\n    return 1\n"
    edited = [*sources[1:], ("pkg/m0.py", text, "python", index_model.content_hash_of(text))]

    assert index_files(edited, cache=cache, pack_name="tree") == index_files(edited)
    assert [path.name for path in cache.directory.rglob("*.index")] == [cache.entry_path(edited[-1][3], "python").name]


def test_a_damaged_donor_pack_is_parsed_around_never_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, sources = large_first_index(tmp_path, monkeypatch)
    expected = index_files(sources)
    donor = cache.pack_path("tree")
    data = bytearray(donor.read_bytes())
    data[len(data) // 2] ^= 0xFF
    donor.write_bytes(bytes(data))
    parsed = count_parsing(monkeypatch)

    assert index_files(sources, cache=cache, pack_name="worktree") == expected
    assert sorted(parsed) == sorted(path for path, *_ in sources)


def test_a_donor_record_of_other_content_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, sources = large_first_index(tmp_path, monkeypatch)
    changed = []
    for path, _, language, _ in sources:
        text = f"class C:\n    pass  # {path}\n"
        changed.append((path, text, language, index_model.content_hash_of(text)))
    expected = index_files(changed)
    parsed = count_parsing(monkeypatch)

    assert index_files(changed, cache=cache, pack_name="worktree") == expected
    assert len(parsed) == len(sources)


def test_least_recently_used_packs_are_deleted_beyond_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_cache, "MAX_PACKS", 2)
    sources = sources_from_fixtures("sample.go")
    cache = IndexCache(tmp_path)
    for name in ("first", "second", "third"):
        index_files(sources, cache=cache, pack_name=name)

    kept = {path.name for path in (cache.directory / "packs").glob("*.pack")}
    assert len(kept) == 2
    assert cache.pack_path("third").name in kept


def test_scan_pack_name_survives_file_changes_inside_the_tree() -> None:
    tree = ["app/models.py", "app/views.py", "app/api/orders.py", "manage.py"]

    assert scan_pack_name(tree) == scan_pack_name(
        [*tree, "app/api/payments.py", "app/api/deep/more.py", "setup.py"]
    )
    assert scan_pack_name(tree) == scan_pack_name(reversed(tree))
    assert scan_pack_name(tree) != scan_pack_name(["shop/models.py", "manage.py"])


def test_many_misses_are_parsed_by_worker_processes_with_identical_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = [
        (f"copy{number}/{path}", text + "\n" * number, language, "")
        for number in range(3)
        for path, text, language, _ in sources_from_fixtures(
            "sample.py", "sample.go", "sample.java", "sample.ts"
        )
    ]
    sources = [
        (path, text, language, index_model.content_hash_of(text))
        for path, text, language, _ in sources
    ]
    serial = index_files(sources)
    monkeypatch.setattr(index_indexer, "PARALLEL_PARSE_THRESHOLD", 1)
    monkeypatch.setattr(index_indexer, "_available_cpus", lambda: 2)
    forbid_parsing(monkeypatch)  # in this process; spawned workers import their own
    events: list[ProgressEvent] = []

    parallel = index_files(sources, cache=IndexCache(tmp_path), progress=events.append)

    assert parallel == serial
    assert list(parallel) == sorted(serial)
    assert [event.completed for event in events] == list(range(1, len(sources) + 1))
    assert IndexCache(tmp_path).get(sources[0][3], "python", "x.py") == replace(
        serial[sources[0][0]], path="x.py"
    )


def test_index_values_have_no_instance_dictionaries() -> None:
    index = index_fixture("sample.py")
    values = [
        index,
        index.definitions[0],
        index.calls[0],
        index.context_blocks[0],
        index.imports[0],
    ]

    assert all(not hasattr(value, "__dict__") for value in values)
    with pytest.raises(AttributeError):
        index.calls[0].line = 1  # type: ignore[misc]
    assert [field.name for field in fields(Definition)][:2] == ["name", "qualname"]


def test_collection_paused_restores_the_collector_state() -> None:
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_indexes_read_back_from_a_pack_are_the_public_immutable_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.py", "sample.java")
    cache = IndexCache(tmp_path)
    parsed = index_files(sources, cache=cache)
    forbid_parsing(monkeypatch)

    loaded = index_files(sources, cache=cache)

    for path, index in loaded.items():
        assert index == parsed[path]
        assert hash(index) == hash(parsed[path])
        assert repr(index) == repr(parsed[path])
        values = [index, *index.definitions, *index.calls, *index.context_blocks, *index.imports]
        expected_types = {FileIndex, Definition, CallSite, ContextBlock, Import}
        assert {type(value) for value in values} == expected_types
        with pytest.raises(AttributeError):
            index.definitions[0].name = "changed"  # type: ignore[misc]
        assert replace(index.calls[0], line=0).line == 0


def test_malformed_pack_records_are_ignored_and_reparsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (source,) = sources_from_fixtures("sample.py")
    cache = IndexCache(tmp_path)
    expected = index_files([source], cache=cache)
    remove_entry_files(cache)
    record = (*index_cache._record_of(expected["sample.py"])[:4], (("callee",),))
    record += index_cache._record_of(expected["sample.py"])[5:]
    pack = seal(index_cache._PACK_MAGIC, {(source[3], "python"): record})
    cache.pack_path(scan_pack_name(["sample.py"])).write_bytes(b"".join(pack))
    parsed = count_parsing(monkeypatch)

    assert index_files([source], cache=cache) == expected
    assert parsed == ["sample.py"]


def test_a_pack_stores_each_distinct_string_once(tmp_path: Path) -> None:
    # The same import in two files: read back from the pack, the two share one string
    # object (a pack holding every string separately is much larger and slower to load).
    texts = {
        "a.py": "from django.db import transaction\n\ndef f():\n    transaction.atomic()\n",
        "b.py": "from django.db import transaction\n\ndef g():\n    transaction.atomic()\n",
    }
    sources = [
        (path, text, "python", index_model.content_hash_of(text))
        for path, text in texts.items()
    ]
    cache = IndexCache(tmp_path)
    parsed = index_files(sources, cache=cache)
    remove_entry_files(cache)

    loaded = index_files(sources, cache=cache)

    assert loaded == parsed
    first, second = loaded["a.py"], loaded["b.py"]
    assert first.imports[0].module == second.imports[0].module == "django.db"


def test_a_malformed_pack_record_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = sources_from_fixtures("sample.py", "sample.go")
    cache = IndexCache(tmp_path)
    expected = index_files(sources, cache=cache, pack_name="repo")
    path, _, language, content_hash = sources[0]
    good = index_cache._record_of(expected[path])
    pack = unseal(
        index_cache._PACK_MAGIC, cache.pack_path("repo").read_bytes()
    )
    assert isinstance(pack, dict)
    pack[(content_hash, language)] = (*good[:4], (("callee",),), *good[5:])
    sealed = seal(index_cache._PACK_MAGIC, pack)
    cache.pack_path("repo").write_bytes(b"".join(sealed))
    assert index_files(sources, cache=cache, pack_name="repo") == expected

    # The bad record was replaced: the pack alone serves the scan again.
    remove_entry_files(cache)
    forbid_parsing(monkeypatch)
    assert index_files(sources, cache=cache, pack_name="repo") == expected


def test_entry_files_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_cache, "MAX_ENTRIES", 5)
    cache = IndexCache(tmp_path)
    sources = []
    for i in range(12):
        text = f"def f{i}():\n    return {i}\n"
        sources.append((f"m{i}.py", text, "python", index_model.content_hash_of(text)))
    expected = index_files(sources, cache=cache, pack_name="repo")  # written whole: prunes
    assert len(list(cache.directory.rglob("*.index"))) == 4
    assert index_files(sources, cache=cache, pack_name="repo") == expected  # the pack still serves all


def test_an_unwritable_cache_warns_once_not_per_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    sources = []
    for i in range(20):
        text = f"def f{i}():\n    return {i}\n"
        sources.append((f"m{i}.py", text, "python", index_model.content_hash_of(text)))
    with caplog.at_level("WARNING", logger="auditor.index.indexer"):
        result = index_files(sources, cache=IndexCache(blocked), pack_name="repo")
    assert sorted(result) == sorted(path for path, *_ in sources)
    assert 1 <= len(caplog.records) <= 2  # one for the entries, at most one for the pack


@pytest.mark.parametrize(
    ("name", "text", "calls", "decorators"),
    [
        ("chain-8k.py", "x = a" + ".b()" * 8_000 + "\n", 8_000, 0),
        ("chain-50k.py", "x = a" + ".b()" * 50_000 + "\n", None, 0),
        ("decorators-50k.py", "@d\n" * 50_000 + "def f():\n    pass\n", 0, 50_000),
    ],
)
def test_indexing_is_linear_in_the_file_size(name: str, text: str, calls: int | None, decorators: int) -> None:
    # Issue 15: 8,000 chained calls took 7 s, 50,000 over 25 s (every call re-walked the
    # argument lists of the chain), and 50,000 stacked decorators as long (a quadratic query).
    started = time.monotonic()
    index = index_extract.index_source(name, text, "python")
    elapsed = time.monotonic() - started

    assert elapsed < 4, f"{elapsed:.1f} s"
    if calls is not None:
        assert len(index.calls) == calls
    assert all(len(call.callee) <= index_model.TEXT_LIMIT for call in index.calls)
    if decorators:
        [definition] = index.definitions
        assert len(definition.decorators) == decorators and definition.start_line == 1


def test_decorators_and_argument_lists_are_still_attached() -> None:
    text = "@app.route('/x', methods=['POST'])\n@login_required\ndef view(request):\n    return save(request.order, force=True).done()\n"
    index = index_extract.index_source("views.py", text, "python")
    [definition] = index.definitions
    assert definition.decorators == ("app.route('/x', methods=['POST'])", "login_required")
    assert definition.start_line == 1
    assert [(call.callee, call.arguments) for call in index.calls] == [
        ("app.route", "'/x', methods=['POST']"),
        ("save", "request.order, force=True"),
        ("save.done", ""),
    ]
