"""Project configuration: defaults for command options from ``auditor.toml`` or the
``[tool.auditor]`` table of ``pyproject.toml``, found from the working directory upward.

Keys are option names without the leading dashes (``max-model-len`` or ``max_model_len``).
Top-level keys apply to every command that has the option; a sub-table per command
(``[tool.auditor.scan]``) applies to that command only and wins. Flags given on the command
line always win over the file. Unknown keys are errors naming the file and the key.

    [tool.auditor]
    rule = ["tx-outside-transaction"]
    exclude = ["migrations/"]
    max-model-len = 262144

    [tool.auditor.scan]
    engine = "openai"
    base-url = "http://spark.local:8000/v1"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from auditor.errors import UsageError

CONFIG_FILE = "auditor.toml"


@dataclass(frozen=True)
class ProjectConfig:
    """Where the configuration came from and its option defaults per command."""

    source: Path | None
    defaults: Mapping[str, Mapping[str, Any]]


def find_config(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest ``auditor.toml``, or ``pyproject.toml`` with a ``[tool.auditor]`` table,
    from ``start`` upward; None when there is none."""
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_FILE
        if candidate.is_file():
            return candidate, _read(candidate)
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            tools = _read(pyproject).get("tool", {})
            table = tools.get("auditor") if isinstance(tools, dict) else None
            if isinstance(table, dict):
                return pyproject, table
            if table is not None:
                raise UsageError(f"{pyproject}: [tool.auditor] must be a table of options, not {type(table).__name__}")
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read configuration: {exc}") from exc


def load_project_config(start: Path, commands: Mapping[str, frozenset[str]]) -> ProjectConfig:
    """Option defaults per command from the nearest configuration file.

    ``commands`` maps each command name to its option names (parameter names, with
    underscores). Raises UsageError for a key no command knows or a command table that
    sets an option the command does not have.
    """
    found = find_config(start)
    if found is None:
        return ProjectConfig(None, {})
    source, table = found
    shared = {key: value for key, value in table.items() if not (key in commands and isinstance(value, dict))}
    known = set().union(*commands.values()) if commands else set()
    for key in shared:
        if _name(key) not in known:
            raise UsageError(f"{source}: unknown option '{key}' (known: {', '.join(sorted(known))})")
    defaults: dict[str, dict[str, Any]] = {}
    for command, options in commands.items():
        values = {_name(key): value for key, value in shared.items() if _name(key) in options}
        specific = table.get(command, {})
        if isinstance(specific, dict):
            for key, value in specific.items():
                if _name(key) not in options:
                    raise UsageError(f"{source}: '{command}' has no option '{key}'")
                values[_name(key)] = value
        if values:
            defaults[command] = values
    return ProjectConfig(source, defaults)


def _name(key: str) -> str:
    return key.strip().lstrip("-").replace("-", "_")
