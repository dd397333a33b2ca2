"""What ``function_code`` compares between head and base: comment-only lines per language
drop out, indentation and ``*``-prefixed code stay."""

from __future__ import annotations

from auditor.runs.basecompare import code_lines


def lines(text: str, language: str | None) -> list[str]:
    return list(code_lines(text.splitlines(), language))


def test_python_keeps_indentation_and_star_lines_and_drops_hash_comments() -> None:
    text = "def f(order, extra):\n    # a note\n\n    order.update(\n        *order.items,\n        **extra,\n    )   \n"
    assert lines(text, "python") == [
        "def f(order, extra):", "    order.update(", "        *order.items,", "        **extra,", "    )",
    ]


def test_c_like_drops_line_and_block_comments_but_not_a_star_line_of_code() -> None:
    text = (
        "function f(a, b) {\n  // note\n  /**\n   * docs\n   */\n  /* one line */\n"
        "  /* lead */ save(a);\n  const x = a\n    * b;\n}\n"
    )
    assert lines(text, "javascript") == [
        "function f(a, b) {", "  /* lead */ save(a);", "  const x = a", "    * b;", "}",
    ]


def test_a_language_without_known_comments_keeps_every_non_blank_line() -> None:
    assert lines("a\n\n# b\n// c\n", None) == ["a", "# b", "// c"]
