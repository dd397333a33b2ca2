"""Where a function binds a plain name, in any target position, and which loop holds a
line: Python's own parse of the function's text (:mod:`ast`). A name is bound by an
assignment target anywhere in it (``a = b = v``, ``x, name = v``, ``*name``), an augmented
or annotated assignment, a ``for``/comprehension target, ``with ... as``, ``except ... as``,
``:=``, ``del``, ``import ... as``, a nested ``def``/``class``, a ``match`` capture, or a
``global``/``nonlocal`` declaration (Python's name binding rules: the language reference,
"Naming and binding").

Inputs: a function's source lines. Output: :class:`FunctionBindings`, or None when the
text does not parse (then callers assume nothing about the name).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


@dataclass(frozen=True, slots=True)
class FunctionBindings:
    """The binding lines of each name and the loop bodies of one function (1-based lines
    of the file)."""

    bindings: dict[str, tuple[int, ...]]
    loops: tuple[tuple[int, int, int], ...]
    """``(header line, first body line, last body line)`` of every loop body."""

    def lines_binding(self, name: str) -> tuple[int, ...]:
        """The lines where ``name`` (a plain name or a dotted attribute, ``self.order``)
        is bound (sorted)."""
        return self.bindings.get(name, ())

    def bound_before(self, dotted: str, line: int) -> int:
        """How many bindings of ``dotted`` or of any prefix of it (``self`` and
        ``self.order`` for ``self.order``) sit above ``line``."""
        parts = dotted.split(".")
        prefixes = (".".join(parts[: end + 1]) for end in range(len(parts)))
        return sum(1 for prefix in prefixes for bound in self.lines_binding(prefix) if bound < line)

    def loop_of(self, line: int) -> int | None:
        """The header line of the innermost loop whose body holds ``line``, if any."""
        holding = [loop for loop in self.loops if loop[1] <= line <= loop[2]]
        return max(holding, key=lambda loop: (loop[1], -loop[2]))[0] if holding else None


def function_bindings(lines: list[str], first_line: int) -> FunctionBindings | None:
    """The bindings of the function whose text is ``lines`` (starting at file line
    ``first_line``); None when it does not parse."""
    if not lines:
        return None
    indent = len(lines[0]) - len(lines[0].lstrip())
    prefix = lines[0][:indent]
    source = "\n".join(text[indent:] if text.startswith(prefix) else text for text in lines)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found: dict[str, set[int]] = {}
    loops: list[tuple[int, int, int]] = []
    offset = first_line - 1

    def bind(name: str, line: int) -> None:
        found.setdefault(name, set()).add(line + offset)

    top = tree.body[0] if len(tree.body) == 1 else None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id, node.lineno)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(ast.unparse(node), node.lineno)  # ``self.order = ...``: that attribute rebound
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not top:
            bind(node.name, node.lineno)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bind(name, node.lineno)
        elif isinstance(node, ast.alias):
            bind((node.asname or node.name).split(".", 1)[0], getattr(node, "lineno", 1))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, node.lineno)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name, node.lineno)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest, node.lineno)
        if isinstance(node, _LOOPS) and node.body:
            last = max(getattr(child, "end_lineno", child.lineno) or child.lineno for child in node.body)
            loops.append((node.lineno + offset, node.body[0].lineno + offset, last + offset))
    return FunctionBindings({name: tuple(sorted(lines_)) for name, lines_ in found.items()}, tuple(sorted(loops)))
