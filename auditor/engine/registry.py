"""Engines by name: built-ins and third-party plugins through one path.

Every engine is found through the entry-point group ``auditor.engines``: the built-ins
(``vllm``, ``openai``, ``replay``) are declared here as entry points of that group, so
they load exactly the way a plugin's ``[project.entry-points."auditor.engines"]`` does.
Nothing is imported until an engine is created, so listing engines never imports vLLM.
``register_engine`` adds an engine from code (tests, embedding applications).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

from auditor.engine.base import Engine, EngineSettings
from auditor.errors import EngineUnavailable, UsageError

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "auditor.engines"

EngineFactory = Callable[[EngineSettings], Engine]

BUILTIN_ENGINES: dict[str, str] = {
    "openai": "auditor.engine.openai_engine:OpenAIEngine",
    "replay": "auditor.engine.replay:ReplayEngine.from_settings",
    "vllm": "auditor.engine.vllm_engine:VllmEngine",
}

_registered: dict[str, EngineFactory] = {}


def register_engine(name: str, factory: Callable[[EngineSettings], Engine]) -> None:
    """Make ``create_engine(name, settings)`` call ``factory(settings)``.

    A name registered here takes precedence over an entry point of the same name.
    """
    if not name or not name.strip():
        raise UsageError("an engine needs a non-empty name")
    _registered[name] = factory


def _entry_points() -> dict[str, EntryPoint]:
    """Built-in entry points, then installed plugins' (built-in names cannot be taken over)."""
    points = {
        name: EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)
        for name, value in BUILTIN_ENGINES.items()
    }
    for point in entry_points(group=ENTRY_POINT_GROUP):
        existing = points.get(point.name)
        if existing is None:
            points[point.name] = point
        elif existing.value != point.value:
            logger.warning(
                "ignoring engine plugin %r (%s): the name is already taken by %s",
                point.name,
                point.value,
                existing.value,
            )
    return points


def available_engines() -> tuple[str, ...]:
    """Every engine name ``create_engine`` accepts, sorted."""
    return tuple(sorted(set(_entry_points()) | set(_registered)))


def create_engine(name: str, settings: EngineSettings) -> Engine:
    """Build the engine called ``name``.

    Raises ``UsageError`` listing the known names when ``name`` is unknown, and
    ``EngineUnavailable`` when a plugin cannot be imported or the engine cannot run here.
    """
    factory = _registered.get(name)
    if factory is None:
        point = _entry_points().get(name)
        if point is None:
            known = ", ".join(available_engines())
            # "auto" and "static" are resolved by the scan before any engine is created.
            raise UsageError(f"unknown engine {name!r}; known engines: auto, static, {known}")
        try:
            factory = point.load()
        except (ImportError, AttributeError) as exc:
            raise EngineUnavailable(f"engine {name!r} ({point.value}) could not be loaded: {exc}") from exc
    return factory(settings)
