"""Names the call graph shares with its readers: the pseudo-functions that hold module-level
and ``__main__`` calls, Python module names from paths, and callee texts without their
argument lists."""

from __future__ import annotations

from functools import lru_cache

MODULE_FUNCTION = "<module>"
"""The caller of calls made at a file's module level."""

MAIN_FUNCTION = "<main>"
"""The caller of calls made inside an ``if __name__ == "__main__":`` block."""


def python_module_name(path: str) -> str:
    """The dotted module name of a Python file path ("a/b/__init__.py" -> "a.b")."""
    stem = path[: -len(".pyi")] if path.endswith(".pyi") else path[: -len(".py")] if path.endswith(".py") else path
    parts = [part for part in stem.split("/") if part]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=1 << 16)
def strip_arguments(text: str) -> str:
    """Drop argument lists and generic parameters from a dotted expression
    ("app.route('/x')" -> "app.route", "Repo<T>.save" -> "Repo.save"); kept per text (the
    same callee and decorator texts recur across a repository's files)."""
    if "(" not in text and "[" not in text and "<" not in text:
        return text.strip()
    out: list[str] = []
    depth = 0
    for char in text:
        if char in "([<":
            depth += 1
        elif char in ")]>":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(char)
    return "".join(out).strip()
