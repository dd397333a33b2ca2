"""Skeletons: signatures, docstrings and module-level code kept verbatim, bodies elided."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from auditor.index.extract import index_source
from auditor.index.model import Definition
from auditor.languages import language_for_path
from auditor.pack.skeleton import Elision, Skeleton, build_skeleton, kept_line_count

DATA = Path(__file__).parent / "data" / "lang"


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

    # save_order's body after its docstring; process's body including the nested helper
    assert skeleton.elisions == (Elision(30, 32), Elision(39, 46))
    kept = kept_lines(lines, skeleton)
    assert kept[20] == "    @transaction.atomic"
    assert kept[25] == "    def save_order(self, order):"
    assert kept[29] == '        """'  # end of the docstring, at its real line number
    assert kept[33] == ""
    assert kept[38] == "def process(items):"
    assert (
        kept[18] == "        self.session = session"
    )  # a one-line body is not worth eliding
    assert kept[49] == "def one_liner(): return 1"
    assert kept[35] == '        """Nothing else."""'
    assert kept[53] == "    process([1, 2])"  # module-level code stays
    assert kept_line_count(skeleton) == 53 - 3 - 8


@pytest.mark.parametrize(
    ("name", "elisions", "signature_lines"),
    [
        (
            "sample.js",
            [(12, 15), (19, 21), (24, 25), (29, 30)],
            {11: "async function checkout(req, res) {"},
        ),
        (
            "sample.ts",
            [(12, 13), (18, 20), (24, 25)],
            {
                16: "  @Transactional()",
                17: "  async save(order: Order): Promise<void> {",
            },
        ),
        (
            "sample.tsx",
            [(4, 10), (13, 14)],
            {12: "export const Label = (props: { text: string }) => {"},
        ),
        (
            "sample.go",
            [(16, 18), (24, 27)],
            {
                14: "// Save writes an order.",
                20: "func (s Store) Count() int { return 0 }",
            },
        ),
        (
            "sample.java",
            [(15, 17), (23, 27)],
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
