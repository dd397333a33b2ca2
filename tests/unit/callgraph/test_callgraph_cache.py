"""The on-disk call graph cache: a stored graph answers like a fresh build, and any change to
the files, or a damaged file, makes the graph be built again."""

from __future__ import annotations

import marshal
import textwrap
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from auditor.callgraph import cache as graph_cache
from auditor.callgraph import graph as call_graph
from auditor.callgraph.cache import CallGraphCache, graph_cache_key
from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.index.extract import index_source
from auditor.index.model import FileIndex
from auditor.languages import language_for_path
from auditor.runs.prepare import prepare_repository

FILES = {
    "shop/__init__.py": "from .billing import charge as charge_card\n",
    "shop/billing.py": """
        class Gateway:
            def send(self, amount):
                return amount

        class RetryingGateway(Gateway):
            def send(self, amount):
                return super().send(amount)

        def charge(order):
            return RetryingGateway().send(order.total)
        """,
    "shop/orders.py": """
        from . import billing
        from shop import charge_card

        def place(order):
            billing.charge(order)
            charge_card(order)
            return audit(order)

        def audit(order):
            return order

        if __name__ == "__main__":
            place(None)
        """,
    "shop/views.py": """
        from shop.orders import place as place_order

        def checkout(request):
            return place_order(request.order)
        """,
    "lonely.py": "def alone():\n    return 1\n",
}


def index_all(files: dict[str, str]) -> dict[str, FileIndex]:
    indexes = {}
    for path, text in files.items():
        language = language_for_path(path)
        assert language is not None, path
        indexes[path] = index_source(path, textwrap.dedent(text).lstrip("\n"), language)
    return indexes


def assert_same_answers(loaded: CallGraph, fresh: CallGraph, indexes: dict[str, FileIndex]) -> None:
    assert loaded.edges == fresh.edges
    assert loaded.components() == fresh.components()
    refs = {edge.caller for edge in fresh.edges} | {edge.callee for edge in fresh.edges}
    for ref in sorted(refs):
        assert loaded.callers(ref) == fresh.callers(ref)
        assert loaded.callees(ref) == fresh.callees(ref)
        assert loaded.definition(ref) == fresh.definition(ref)
        assert loaded.base_classes(ref) == fresh.base_classes(ref)
    for path in indexes:
        assert loaded.file_neighbors(path) == fresh.file_neighbors(path)
    source, target = FunctionRef("shop/views.py", "checkout"), FunctionRef("shop/billing.py", "Gateway.send")
    assert loaded.paths(source, target) == fresh.paths(source, target) != ()
    assert loaded.resolve("shop/orders.py", "billing.charge") == fresh.resolve("shop/orders.py", "billing.charge")
    assert loaded.plausible_edge("shop/orders.py", "place", "shop/orders.py", "audit")


def forbid_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any attempt to resolve call sites fail, so a passing build must have loaded."""

    def fail(*_: object) -> None:
        raise AssertionError("the graph was rebuilt instead of loaded")

    monkeypatch.setattr(call_graph, "file_edges", fail)


def test_a_stored_graph_loads_and_answers_like_a_fresh_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexes = index_all(FILES)
    cache = CallGraphCache(tmp_path)
    fresh = cache.build(indexes)
    assert fresh.edges  # the fixture has calls to resolve
    assert cache.graph_path(graph_cache_key(indexes)).is_file()

    forbid_resolution(monkeypatch)
    loaded = cache.build(index_all(FILES))  # equal indexes, new objects
    monkeypatch.undo()
    assert_same_answers(loaded, CallGraph.build(indexes), indexes)


def test_changing_adding_or_removing_a_file_misses_the_cache(tmp_path: Path) -> None:
    cache = CallGraphCache(tmp_path)
    cache.build(index_all(FILES))

    edited = {**FILES, "shop/views.py": "from shop.orders import audit\n\ndef checkout(request):\n    return audit(request)\n"}
    assert cache.get(index_all(edited)) is None
    graph = cache.build(index_all(edited))
    callees = graph.callees(FunctionRef("shop/views.py", "checkout"))
    assert [edge.callee for edge in callees] == [FunctionRef("shop/orders.py", "audit")]
    assert cache.get(index_all(edited)) is not None
    assert cache.get(index_all(FILES)) is not None  # the first graph is still stored

    assert cache.get(index_all({**FILES, "extra.py": "def extra():\n    pass\n"})) is None
    assert cache.get(index_all({path: text for path, text in FILES.items() if path != "lonely.py"})) is None
    moved = {("shop/views2.py" if path == "shop/views.py" else path): text for path, text in FILES.items()}
    assert cache.get(index_all(moved)) is None


def test_another_auditor_code_misses_the_stored_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A checkout whose resolution rules changed must not answer with a graph the old rules built.
    cache = CallGraphCache(tmp_path)
    cache.build(index_all(FILES))
    assert cache.get(index_all(FILES)) is not None
    keys = graph_cache_key(index_all(FILES)), graph_cache.surface_key(index_all(FILES))
    monkeypatch.setattr(graph_cache, "package_digest", lambda: "an edited checkout")
    assert cache.get(index_all(FILES)) is None
    assert graph_cache_key(index_all(FILES)) != keys[0]
    assert graph_cache.surface_key(index_all(FILES)) != keys[1]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: data[: len(data) // 2],
        lambda data: data[:-1] + bytes([data[-1] ^ 0xFF]),
        lambda data: b"not a graph at all",
    ],
    ids=["empty", "truncated", "flipped-byte", "garbage"],
)
def test_a_damaged_graph_file_is_ignored_and_rebuilt(tmp_path: Path, damage) -> None:
    indexes = index_all(FILES)
    cache = CallGraphCache(tmp_path)
    expected = cache.build(indexes).edges
    target = cache.graph_path(graph_cache_key(indexes))
    target.write_bytes(damage(target.read_bytes()))

    assert cache.get(indexes) is None
    assert cache.build(indexes).edges == expected
    reloaded = cache.get(indexes)
    assert reloaded is not None and reloaded.edges == expected


def test_a_well_sealed_file_with_wrong_content_is_ignored(tmp_path: Path) -> None:
    indexes = index_all(FILES)
    cache = CallGraphCache(tmp_path)
    expected = cache.build(indexes).edges
    key = graph_cache_key(indexes)
    target = cache.graph_path(key)
    rows = ((("shop/orders.py", ("place", "gone.py", "f", 3, False)),), (("shop/orders.py", ("place", "x")),))
    for stored in [("another key", ()), (key, rows[0]), (key, rows[1]), (key, "rows"), [key, ()]]:
        payload = marshal.dumps(stored)
        target.write_bytes(graph_cache._GRAPH_MAGIC + zlib.crc32(payload).to_bytes(4, "big") + payload)
        assert cache.get(indexes) is None, stored
    graph = cache.build(indexes)
    assert graph.edges == expected
    payload = marshal.dumps((key, graph._rows))  # the same framing with the right content loads
    target.write_bytes(graph_cache._GRAPH_MAGIC + zlib.crc32(payload).to_bytes(4, "big") + payload)
    loaded = cache.get(indexes)
    assert loaded is not None and loaded.edges == expected


def test_only_the_most_recently_used_graphs_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_cache, "MAX_GRAPHS", 2)
    cache = CallGraphCache(tmp_path)
    for number in range(4):
        cache.build(index_all({**FILES, "lonely.py": f"def alone():\n    return {number}\n"}))
    assert len(list(cache.directory.glob("*.graph"))) == 2


def write_repository(root: Path) -> None:
    for path, text in FILES.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"))


def test_prepare_repository_reuses_the_graph_unless_caching_is_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, cache_dir = tmp_path / "repo", tmp_path / "cache"
    write_repository(root)

    uncached = prepare_repository(root, cache_dir=cache_dir, use_cache=False)
    assert not list(cache_dir.rglob("*.graph"))

    first = prepare_repository(root, cache_dir=cache_dir)
    assert len(list(cache_dir.rglob("*.graph"))) == 1
    forbid_resolution(monkeypatch)
    second = prepare_repository(root, cache_dir=cache_dir)
    assert second.graph.edges == first.graph.edges == uncached.graph.edges

    with pytest.raises(AssertionError, match="rebuilt"):
        prepare_repository(root, cache_dir=cache_dir, use_cache=False)
    (root / "shop" / "views.py").write_text("def checkout(request):\n    return request\n")
    with pytest.raises(AssertionError, match="rebuilt"):
        prepare_repository(root, cache_dir=cache_dir)


def test_equal_indexes_get_one_key_whichever_strings_they_share() -> None:
    # Two empty __init__.py files: indexed one by one their content hashes are two equal
    # strings; from index_files (or a cache) they are one shared object. Same files, same key.
    files = {"a/__init__.py": "", "b/__init__.py": "", "a/m.py": "def f():\n    return 1\n"}
    separate = index_all(files)
    shared = separate["a/__init__.py"].content_hash
    sharing = {
        path: replace(index, content_hash=shared) if index.content_hash == shared else index
        for path, index in separate.items()
    }
    assert separate["b/__init__.py"].content_hash is not shared
    assert sharing == separate
    assert graph_cache_key(sharing) == graph_cache_key(separate)


def count_resolved_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the files whose calls are resolved (``file_edges`` still runs)."""
    resolved: list[str] = []
    real = call_graph.file_edges

    def recording(repository, path, index):  # type: ignore[no-untyped-def]
        resolved.append(path)
        return real(repository, path, index)

    monkeypatch.setattr(call_graph, "file_edges", recording)
    return resolved


_INDENT = next(line for line in FILES["shop/orders.py"].splitlines() if "billing.charge(order)" in line).split("billing")[0]
# Edits that leave every file's symbol surface as it was: only the edited file is resolved again.
SURFACE_KEPT = {
    "a body grows by lines": ("shop/orders.py", FILES["shop/orders.py"].replace("billing.charge(order)\n", "billing.charge(order)\n" + _INDENT + "order.note = 1\n\n" + _INDENT + "# noted\n")),
    "an argument changes": ("shop/views.py", FILES["shop/views.py"].replace("request.order", "request.basket")),
    "a comment is appended": ("shop/billing.py", FILES["shop/billing.py"] + "# end\n"),
}
# Edits that change a surface: every file is resolved again.
SURFACE_CHANGED = {
    "a function is added": ("shop/billing.py", FILES["shop/billing.py"] + "\ndef refund(order):\n    return order\n"),
    "an import goes": ("shop/orders.py", FILES["shop/orders.py"].replace("from shop import charge_card\n", "")),
    "a new callee text": ("shop/views.py", FILES["shop/views.py"].replace("place_order(request.order)", "place_order(request.order).log()")),
}


@pytest.mark.parametrize("edit", SURFACE_KEPT)
def test_an_edit_that_keeps_every_surface_resolves_only_the_edited_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str) -> None:
    cache = CallGraphCache(tmp_path)
    cache.build(index_all(FILES))
    path, text = SURFACE_KEPT[edit]
    edited = index_all({**FILES, path: text})
    resolved = count_resolved_files(monkeypatch)
    rebuilt = cache.build(edited)
    assert resolved == [path]
    monkeypatch.undo()
    fresh = CallGraph.build(edited)
    assert rebuilt.rows == fresh.rows
    assert_same_answers(rebuilt, fresh, edited)
    assert cache.get(edited) is not None  # stored under its own key


@pytest.mark.parametrize("edit", SURFACE_CHANGED)
def test_an_edit_that_changes_a_surface_resolves_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str) -> None:
    cache = CallGraphCache(tmp_path)
    cache.build(index_all(FILES))
    path, text = SURFACE_CHANGED[edit]
    edited = index_all({**FILES, path: text})
    resolved = count_resolved_files(monkeypatch)
    rebuilt = cache.build(edited)
    assert sorted(resolved) == sorted(edited)
    monkeypatch.undo()
    assert rebuilt.rows == CallGraph.build(edited).rows


def test_a_base_whose_graph_is_gone_or_damaged_means_a_full_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = CallGraphCache(tmp_path)
    cache.build(index_all(FILES))
    path, text = SURFACE_KEPT["an argument changes"]
    edited = index_all({**FILES, path: text})
    for graph_file in cache.directory.glob("*.graph"):
        graph_file.write_bytes(b"damaged")
    resolved = count_resolved_files(monkeypatch)
    rebuilt = cache.build(edited)
    assert sorted(resolved) == sorted(edited)
    monkeypatch.undo()
    assert rebuilt.rows == CallGraph.build(edited).rows


def count_digested_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the path of every file whose surface digest is computed."""
    digested: list[str] = []
    real = graph_cache.surface_digest

    def recording(index: FileIndex) -> bytes:
        digested.append(index.path)
        return real(index)

    monkeypatch.setattr(graph_cache, "surface_digest", recording)
    return digested


@pytest.mark.parametrize("edit", [*SURFACE_KEPT, *SURFACE_CHANGED])
def test_after_an_edit_only_the_edited_file_surface_is_digested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str) -> None:
    """The other files' surface digests come from the last build's (by path, language and
    content hash): the surface key, and so the graph, are those of digesting every file."""
    cache = CallGraphCache(tmp_path)
    cache.build(index_all(FILES))
    path, text = {**SURFACE_KEPT, **SURFACE_CHANGED}[edit]
    edited = index_all({**FILES, path: text})
    digested = count_digested_files(monkeypatch)
    rebuilt = cache.build(edited)
    assert digested == [path]
    monkeypatch.undo()
    assert graph_cache.surface_key(edited, graph_cache.surface_digests(edited, cache._stored_surfaces())) == graph_cache.surface_key(edited)
    assert rebuilt.rows == CallGraph.build(edited).rows


@pytest.mark.parametrize("damage", ["garbage", "other code", "missing"])
def test_surface_digests_of_another_code_or_damaged_are_computed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    cache = CallGraphCache(tmp_path)
    cache.build(index_all(FILES))
    if damage == "garbage":
        cache.surfaces_path.write_bytes(b"damaged")
    elif damage == "missing":
        cache.surfaces_path.unlink()
    else:
        monkeypatch.setattr(graph_cache, "package_digest", lambda: "another auditor")
    path, text = SURFACE_KEPT["an argument changes"]
    edited = index_all({**FILES, path: text})
    digested = count_digested_files(monkeypatch)
    rebuilt = cache.build(edited)
    assert sorted(digested) == sorted(edited)
    assert rebuilt.rows == CallGraph.build(edited).rows
ATTACHING = {
    "docs/methods.py": "def settle(self):\n    return 1\n\n\ndef settle_later(self):\n    return 2\n",
    "docs/apps.py": "from .methods import settle, settle_later\n\n\ndef ready(Order):\n    Order.add_to_class('settle', settle)\n",
    "docs/views.py": "def pay(request, order):\n    order.settle()\n",
}


def test_a_changed_add_to_class_value_is_a_changed_surface(tmp_path: Path) -> None:
    """The function ``add_to_class`` attaches is named by the call's arguments, which other
    files' calls resolve to: changing it changes the file's surface, so the cached rows of
    the caller are not reused with the old target."""
    cache = CallGraphCache(tmp_path)
    before = cache.build(index_all(ATTACHING))
    assert [edge.callee.qualname for edge in before.callees(FunctionRef("docs/views.py", "pay"))] == ["settle"]
    edited = index_all({**ATTACHING, "docs/apps.py": ATTACHING["docs/apps.py"].replace("('settle', settle)", "('settle', settle_later)")})
    rebuilt = cache.build(edited)
    assert rebuilt.rows == CallGraph.build(edited).rows
    assert [edge.callee.qualname for edge in rebuilt.callees(FunctionRef("docs/views.py", "pay"))] == ["settle_later"]
