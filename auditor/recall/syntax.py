"""How canaries read: the vocabulary their descriptions and identifiers are drawn from, and
per language (``SYNTAX``, a table keyed by language) how a constant, a function and a module
are written, so a canary looks like the code around it. ``auditor.recall.canaries`` draws
from these to make canaries."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# --------------------------------------------------------------------------------------
# Vocabulary: descriptions in words and the identifier words they become.
# --------------------------------------------------------------------------------------

SUBJECTS: Final = (
    ("ledger sync worker", ("ledger", "sync")),
    ("invoice archiver", ("invoice", "archiver")),
    ("shipment queue", ("shipment", "queue")),
    ("thumbnail renderer", ("thumbnail", "renderer")),
    ("log rotator", ("log", "rotator")),
    ("search indexer", ("search", "indexer")),
    ("payout scheduler", ("payout", "scheduler")),
    ("inventory reconciler", ("inventory", "reconciler")),
    ("email digest sender", ("digest", "sender")),
    ("webhook dispatcher", ("webhook", "dispatcher")),
    ("report exporter", ("report", "exporter")),
    ("cache warmer", ("cache", "warmer")),
    ("sitemap builder", ("sitemap", "builder")),
    ("backup uploader", ("backup", "uploader")),
    ("price feed importer", ("price", "feed")),
    ("coupon redeemer", ("coupon", "redeemer")),
    ("loyalty tracker", ("loyalty", "tracker")),
    ("warehouse picker", ("warehouse", "picker")),
    ("refund processor", ("refund", "processor")),
    ("newsletter mailer", ("newsletter", "mailer")),
    ("image resizer", ("image", "resizer")),
    ("metrics flusher", ("metrics", "flusher")),
    ("audit trail compactor", ("trail", "compactor")),
    ("address normaliser", ("address", "normaliser")),
)

ATTRIBUTES: Final = (
    ("flush interval (in milliseconds)", ("flush", "interval", "ms")),
    ("maximum payload size (in bytes)", ("max", "payload", "bytes")),
    ("retry ceiling (in milliseconds)", ("retry", "ceiling", "ms")),
    ("daily request quota", ("daily", "quota")),
    ("starting sequence number", ("start", "sequence")),
    ("cool-down period (in milliseconds)", ("cooldown", "ms")),
    ("maximum number of rows read per run", ("max", "rows", "per", "run")),
    ("buffer capacity (in bytes)", ("buffer", "capacity", "bytes")),
    ("lease duration (in milliseconds)", ("lease", "duration", "ms")),
    ("page size limit", ("page", "size", "limit")),
)

ADJECTIVES: Final = (
    "amber", "copper", "velvet", "granite", "hollow", "silent", "crimson", "marble", "willow", "cobalt",
    "saffron", "misty", "brisk", "gentle", "lunar", "polar", "rustic", "sunny", "tidal", "ivory",
    "jade", "coral", "dusky", "frosty", "golden", "hazel", "indigo", "lilac", "maple", "olive",
)
NOUNS: Final = (
    "harbor", "meadow", "lantern", "falcon", "orchard", "canyon", "beacon", "glacier", "thicket", "prairie",
    "summit", "harvest", "pebble", "compass", "ember", "quarry", "raven", "spindle", "tundra", "valley",
    "anchor", "bramble", "cedar", "dune", "fjord", "grove", "heron", "island", "juniper", "kestrel",
)
VERBS: Final = ("fold", "mend", "weave", "shape", "blend", "carve", "stitch", "trim", "polish", "brew", "knit", "tune")
ROOT_WORDS: Final = (
    "harborline", "stonebridge", "bluefern", "northwind", "redcliff", "oakhaven", "silverpine", "fernwood",
    "brightwater", "ironvale", "ashgrove", "larkspur", "millbrook", "thornfield", "westmere", "elmstead",
)

# Integer expressions over ``first`` and ``second`` that are valid in all five languages.
BEHAVIOURS: Final = (
    ("the sum of the squares of its two arguments", "first * first + second * second"),
    ("the product of its two arguments plus one", "first * second + 1"),
    ("three times the difference of its first and second arguments (first minus second)", "(first - second) * 3"),
    ("twice the sum of its two arguments", "(first + second) * 2"),
    ("the square of its first argument minus its second argument", "first * first - second"),
    ("the sum of its two arguments plus ten", "first + second + 10"),
    ("the product of its two arguments minus their sum", "first * second - (first + second)"),
    ("the cube of its first argument, ignoring the second", "first * first * first"),
    ("its first argument times one hundred, plus its second argument", "first * 100 + second"),
    ("its second argument minus its first argument", "second - first"),
    ("its first argument plus twice its second argument", "first + 2 * second"),
    ("the square of the sum of its two arguments", "(first + second) * (first + second)"),
    ("seven times its first argument minus its second argument", "first * 7 - second"),
    ("the sum of its two arguments times their difference (first minus second)", "(first + second) * (first - second)"),
)

def _upper(words: Sequence[str]) -> str:
    return "_".join(word.upper() for word in words)


def snake(words: Sequence[str]) -> str:
    return "_".join(words)


def _camel(words: Sequence[str]) -> str:
    return words[0] + "".join(word.capitalize() for word in words[1:])


def pascal(words: Sequence[str]) -> str:
    return "".join(word.capitalize() for word in words)


# --------------------------------------------------------------------------------------
# How canary sources are written, per language.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CanarySyntax:
    """How canary sources are written in one language: naming conventions and source templates.

    Templates are ``str.format`` strings. A module template receives ``root`` and ``leaf``
    (the directory names), ``package`` (the leaf as a Go package name), ``class_name``,
    ``doc`` and ``doc_sentence`` (the doc with a lowercase first letter), the ``body``
    rendered line by line from the line templates, and for a batch module ``used`` (the
    imported constants) and ``constants_module``/``constants_class`` (where they live). A
    ``path`` template receives ``root``, ``leaf``, ``module`` and ``class_name``.
    """

    constant_case: Callable[[Sequence[str]], str]
    function_case: Callable[[Sequence[str]], str]
    path: str
    constant_line: str
    constants_module: str
    batch_function: str
    batch_module: str
    function: str
    functions_module: str
    # Java names its classes, so they are identifiers a finding could cite.
    classes_are_identifiers: bool = False


_JAVA_CLASS = "public final class {class_name} {{\n{body}\n    private {class_name}() {{\n    }}\n}}\n"

SYNTAX: Final[Mapping[str, CanarySyntax]] = MappingProxyType(
    {
        "python": CanarySyntax(
            constant_case=_upper,
            function_case=snake,
            path="{root}/{leaf}/{module}.py",
            constant_line="{name} = {value}\n",
            constants_module='"""{doc}"""\n\n{body}',
            batch_function="\n\ndef {name}(queue):\n    return queue.take({constant})\n",
            batch_module='"""Batch helpers for the background workers."""\n\nfrom {root}.{leaf}.{constants_module} import {used}\n{body}',
            function="\n\ndef {name}(first, second):\n    return {expression}\n",
            functions_module='"""Small arithmetic helpers."""\n{body}',
        ),
        "javascript": CanarySyntax(
            constant_case=_upper,
            function_case=_camel,
            path="{root}/{leaf}/{module}.js",
            constant_line="export const {name} = {value};\n",
            constants_module="// {doc}\n\n{body}",
            batch_function="\nexport function {name}(queue) {{\n  return queue.take({constant});\n}}\n",
            batch_module='// Batch helpers for the background workers.\n\nimport {{ {used} }} from "./{constants_module}";\n{body}',
            function="\nexport function {name}(first, second) {{\n  return {expression};\n}}\n",
            functions_module="// Small arithmetic helpers.\n{body}",
        ),
        "typescript": CanarySyntax(
            constant_case=_upper,
            function_case=_camel,
            path="{root}/{leaf}/{module}.ts",
            constant_line="export const {name}: number = {value};\n",
            constants_module="// {doc}\n\n{body}",
            batch_function=(
                "\nexport function {name}(queue: {{ take(count: number): number[] }}): number[] {{\n"
                "  return queue.take({constant});\n}}\n"
            ),
            batch_module='// Batch helpers for the background workers.\n\nimport {{ {used} }} from "./{constants_module}";\n{body}',
            function="\nexport function {name}(first: number, second: number): number {{\n  return {expression};\n}}\n",
            functions_module="// Small arithmetic helpers.\n{body}",
        ),
        "go": CanarySyntax(
            constant_case=pascal,
            function_case=pascal,
            path="{root}/{leaf}/{module}.go",
            constant_line="\t{name} = {value}\n",
            constants_module="// Package {package}: {doc_sentence}\npackage {package}\n\nconst (\n{body})\n",
            batch_function="\nfunc {name}(queue Queue) []int {{\n\treturn queue.Take({constant})\n}}\n",
            batch_module="package {package}\n{body}",
            function="\nfunc {name}(first int, second int) int {{\n\treturn {expression}\n}}\n",
            functions_module="package {package}\n{body}",
        ),
        "java": CanarySyntax(
            constant_case=_upper,
            function_case=_camel,
            path="{root}/{leaf}/{class_name}.java",
            constant_line="    public static final int {name} = {value};\n",
            constants_module="package {root}.{leaf};\n\n/** {doc} */\n" + _JAVA_CLASS,
            batch_function=(
                "\n    public static List<Integer> {name}(BatchQueue queue) {{\n"
                "        return queue.take({constants_class}.{constant});\n    }}\n"
            ),
            batch_module=(
                "package {root}.{leaf};\n\nimport java.util.List;\n\n/** Batch helpers for the background workers. */\n"
                + _JAVA_CLASS.replace("{class_name}", "Batches")
            ),
            function="\n    public static int {name}(int first, int second) {{\n        return {expression};\n    }}\n",
            functions_module="package {root}.{leaf};\n\n/** Small arithmetic helpers. */\n" + _JAVA_CLASS,
            classes_are_identifiers=True,
        ),
    }
)
LANGUAGES: Final = tuple(SYNTAX)


def constant_name(language: str, words: Sequence[str]) -> str:
    """A module constant's name in the language's convention (``LEDGER_SYNC_MS``; Go: ``LedgerSyncMs``)."""
    return SYNTAX[language].constant_case(words)


def function_name(language: str, words: Sequence[str]) -> str:
    """A function's name in the language's convention (snake, camel, or exported Pascal for Go)."""
    return SYNTAX[language].function_case(words)


def _module(template: str, package: tuple[str, str], body: str, **fields: str) -> str:
    root, leaf = package
    return template.format(root=root, leaf=leaf, package=leaf.replace("_", ""), body=body, **fields)


def constants_module(language: str, package: tuple[str, str], class_name: str, doc: str, constants: Sequence[tuple[str, int]]) -> str:
    """Source of a module holding integer constants. ``package`` is (root, leaf) directory names."""
    syntax = SYNTAX[language]
    body = "".join(syntax.constant_line.format(name=name, value=value) for name, value in constants)
    return _module(syntax.constants_module, package, body, class_name=class_name, doc=doc, doc_sentence=doc[0].lower() + doc[1:])


def batch_module(
    language: str, package: tuple[str, str], constants_module: str, constants_class: str, functions: Sequence[tuple[str, str]]
) -> str:
    """Source of a module whose functions each take a batch sized by an imported constant.

    ``functions`` are (function name, constant name) pairs.
    """
    syntax = SYNTAX[language]
    used = ", ".join(sorted({constant for _, constant in functions}))
    body = "".join(
        syntax.batch_function.format(name=name, constant=constant, constants_class=constants_class) for name, constant in functions
    )
    return _module(syntax.batch_module, package, body, used=used, constants_module=constants_module)


def functions_module(language: str, package: tuple[str, str], class_name: str, functions: Sequence[tuple[str, str]]) -> str:
    """Source of a module of small integer functions; ``functions`` are (name, expression) pairs."""
    syntax = SYNTAX[language]
    body = "".join(syntax.function.format(name=name, expression=expression) for name, expression in functions)
    return _module(syntax.functions_module, package, body, class_name=class_name)


def module_path(language: str, root: str, leaf: str, module: str, class_name: str) -> str:
    return SYNTAX[language].path.format(root=root, leaf=leaf, module=module, class_name=class_name)


def class_identifiers(language: str, *class_names: str) -> list[str]:
    """The class names a canary defines that count as identifiers (Java's only)."""
    return list(class_names) if SYNTAX[language].classes_are_identifiers else []
