"""Skeletons: signatures, docstrings and module-level code kept verbatim, bodies elided."""

from __future__ import annotations

from dataclasses import replace

import pytest

from auditor.index.extract import index_source
from auditor.index.model import Definition
from auditor.languages import language_for_path
from auditor.pack.skeleton import Elision, Skeleton, build_skeleton, kept_line_count
from tests.support import TEST_DATA

DATA = TEST_DATA / "lang"


def skeleton_of(name: str) -> tuple[list[str], Skeleton]:
    text = (DATA / name).read_text(encoding="utf-8")
    language = language_for_path(name)
    assert language is not None
    skeleton = build_skeleton(text, index_source(name, text, language))
    assert skeleton is not None
    return text.split("\n"), skeleton


def kept_lines(lines: list[str], skeleton: Skeleton) -> dict[int, str]:
    elided = {n for e in skeleton.elisions for n in range(e.start_line, e.end_line + 1)}
    return {
        n: lines[n - 1] for n in range(1, skeleton.line_count + 1) if n not in elided
    }


def test_python_keeps_signatures_decorators_and_docstrings_and_elides_bodies() -> None:
    lines, skeleton = skeleton_of("sample.py")

    # the import block and the blank line above it; save_order's docstring after its first line, its body and the blank
    # line after it; process's body including the nested helper and the blank lines after it
    assert skeleton.elisions == (Elision(2, 8), Elision(27, 33), Elision(39, 48))
    kept = kept_lines(lines, skeleton)
    assert kept[20] == "    @transaction.atomic"
    assert kept[25] == "    def save_order(self, order):"
    assert kept[26] == '        """Persist an order.'  # the docstring's first line, at its real number
    assert kept[9] == "DEBUG = True"
    assert kept[38] == "def process(items):"
    assert (
        kept[18] == "        self.session = session"
    )  # a one-line body is not worth eliding
    assert kept[49] == "def one_liner(): return 1"
    assert kept[35] == '        """Nothing else."""'
    assert kept[53] == "    process([1, 2])"  # module-level code stays
    assert kept_line_count(skeleton) == 53 - 7 - 7 - 10


@pytest.mark.parametrize(
    ("name", "elisions", "signature_lines"),
    [
        (
            "sample.js",
            [(1, 4), (12, 16), (19, 22), (24, 25), (29, 31)],
            {11: "async function checkout(req, res) {"},
        ),
        (
            "sample.ts",
            [(1, 4), (12, 14), (18, 20), (24, 25)],
            {
                16: "  @Transactional()",
                17: "  async save(order: Order): Promise<void> {",
            },
        ),
        (
            "sample.tsx",
            [(4, 11), (13, 14)],
            {12: "export const Label = (props: { text: string }) => {"},
        ),
        (
            "sample.go",
            [(2, 8), (16, 19), (24, 27)],
            {
                9: "// Store keeps orders.",
                14: "// Save writes an order.",
                20: "func (s Store) Count() int { return 0 }",
            },
        ),
        (
            "sample.java",
            [(2, 7), (15, 18), (23, 28)],
            {19: "    /** Saves an order. */", 30: "        void onSave(Order order);"},
        ),
    ],
)
def test_brace_languages_elide_bodies_and_keep_doc_comments(
    name: str, elisions: list[tuple[int, int]], signature_lines: dict[int, str]
) -> None:
    lines, skeleton = skeleton_of(name)

    assert [(e.start_line, e.end_line) for e in skeleton.elisions] == elisions
    kept = kept_lines(lines, skeleton)
    for line, text in signature_lines.items():
        assert kept[line] == text
    assert kept_line_count(skeleton) == len(kept)


def test_parse_errors_give_no_skeleton() -> None:
    text = (DATA / "broken.py").read_text(encoding="utf-8")

    assert build_skeleton(text, index_source("broken.py", text, "python")) is None


def test_text_that_does_not_match_the_index_gives_no_skeleton() -> None:
    text = (DATA / "sample.py").read_text(encoding="utf-8")
    index = index_source("sample.py", text, "python")

    assert build_skeleton(text + "\nextra = 1\n", index) is None


def test_adjacent_and_nested_elisions_merge() -> None:
    text = "".join(f"x{n} = {n}\n" for n in range(1, 21))
    index = index_source("f.py", text, "python")

    def function(start: int, end: int, body_start: int) -> Definition:
        return Definition(
            f"f{start}", f"f{start}", "function", start, end, body_start, (), (), None
        )

    index = replace(
        index,
        definitions=(
            function(1, 5, 2),  # body 2-5
            function(6, 8, 6),  # body 6-8 touches 2-5
            function(10, 18, 11),  # body 11-18 ...
            function(12, 15, 13),  # ... contains this nested body
            function(19, 20, 20),  # a single body line is kept
        ),
    )

    skeleton = build_skeleton(text, index)

    assert skeleton is not None
    assert skeleton.elisions == (Elision(2, 8), Elision(11, 18))
    assert kept_line_count(skeleton) == 20 - 7 - 8


def test_classes_are_never_elided_whole() -> None:
    text = 'class Settings:\n    """Config."""\n\n    debug = True\n    name = "x"\n'
    index = index_source("settings.py", text, "python")

    skeleton = build_skeleton(text, index)

    assert skeleton == Skeleton("settings.py", 5, ())


def _elided(name: str, text: str) -> list[tuple[int, int]]:
    language = language_for_path(name)
    assert language is not None
    skeleton = build_skeleton(text, index_source(name, text, language))
    assert skeleton is not None
    return [(e.start_line, e.end_line) for e in skeleton.elisions]


def test_license_headers_and_import_blocks_are_elided_single_comments_kept() -> None:
    text = (
        "/*\n * Copyright 2025\n * Licensed under the Apache License.\n */\npackage shop;\n\n"
        "import java.util.List;\nimport java.util.Map;\n\n// Saves orders.\nclass Orders {\n}\n"
    )
    assert _elided("Orders.java", text) == [(1, 4), (6, 9)]


def test_multi_line_statements_keep_their_first_line_and_declarations_stay_whole() -> None:
    text = (
        "export interface Order {\n  id: string;\n  total: number;\n}\n"
        "const schema = z.object({\n  id: z.string(),\n  total: z.number(),\n});\n"
        "import fs = require('fs');\nexport const x = 1;\n"
    )
    assert _elided("order.ts", text) == [(6, 8)]


def test_python_multi_line_module_statements_and_docstrings_keep_their_first_line() -> None:
    text = (
        '"""Module doc.\n\nMore words.\n"""\n'
        "urlpatterns = [\n    path('a', view_a),\n    path('b', view_b),\n]\n"
        "class Order(models.Model):\n    total = models.DecimalField(\n        max_digits=10,\n        decimal_places=2,\n    )\n"
    )
    assert _elided("urls.py", text) == [(2, 4), (6, 8), (11, 13)]


def test_typescript_interface_members_keep_their_signatures_bodies_and_initializers_go() -> None:
    text = (
        "export interface Api {\n  fetch(\n    url: string,\n    init: RequestInit,\n  ): Promise<Response>;\n"
        "  nested: {\n    deep(\n      a: number,\n    ): string;\n  };\n}\n"
        "export abstract class Base {\n  abstract go(\n    a: string,\n  ): void;\n"
        "  handle(x: number): number {\n    const y = x + 1;\n    return y * 2;\n  }\n"
        "  private cache = new Map<string, number>([\n    ['a', 1],\n    ['b', 2],\n  ]);\n}\n"
        "declare function over(\n  a: string,\n): void;\n"
    )
    # Kept: the interface whole (1-11), the abstract and ambient signatures (13-15, 25-27);
    # elided: the method body (17-19) and the initializer's continuation (21-23).
    assert _elided("api.ts", text) == [(17, 19), (21, 23)]
