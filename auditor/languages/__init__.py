"""Languages auditor understands, as data: adding a language is adding files here.

- this module: the file-extension mapping (``EXTENSIONS``, ``language_for_path``).
- ``grammars``: tree-sitter grammars, parsers and the compiled queries, loaded with
  importlib.resources.
- ``<language>-<name>.scm``: the queries the index runs per language (definitions, calls,
  imports, contexts, assignments, ``__main__``); ``grammars`` documents their captures.

What a call means in each language is ``auditor.callgraph.languages``'s.
"""

from __future__ import annotations

from pathlib import PurePosixPath

# Extension -> language name. Language names are the ones used by rule files and the index.
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
}


def language_for_path(path: str) -> str | None:
    """Return the language of a repository path by its extension, or None if unsupported.

    ``.ts`` is always TypeScript (never a video transport stream): binary detection is by
    content, not by this mapping.
    """
    return EXTENSIONS.get(PurePosixPath(path).suffix.lower())
