"""Framework facts as data (like CodeQL's models-as-data): which calls open a transaction or
take a view out of the request's, which register callbacks that run after the commit,
which write, which only look up a framework registry row (``lookup``: a content type, a
permission), which signals the framework sends inside a transaction of its own, and which
methods the framework runs from which (DRF's ``create`` -> ``perform_create`` ->
``serializer.save()`` -> the serializer's ``create``).

Inputs: the package's model files (``models/*.yaml``, one per framework, each row naming
the framework file and function that proves it) and, optionally, a project's own files of
the same format (``tx-models`` in ``[tool.auditor]`` or ``--tx-models``). Output:
:class:`FrameworkFacts`, the rows of all of them; :func:`builtin_facts` for the package's
alone. A bad row is a :class:`ModelsFileError` naming the file, the row and the field.
The format is documented in docs/tx-models.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from auditor.errors import UsageError

_BUILTIN_FILES = ("django.yaml", "django_lookups.yaml", "django_admin.yaml", "drf.yaml", "pyhermes.yaml", "mozilla_django_oidc.yaml")
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SUBJECTS = ("call", "method", "signal", "setting")
_THROUGH = frozenset({"model", "queryset", "manager", "related-manager", "drf-view", "drf-serializer", "django-admin", "auth-backend"})
_DISPATCH_THROUGH = frozenset({"drf-view", "drf-serializer"})
_INSIDE_THROUGH = frozenset({"django-admin"})
_REQUEST_THROUGH = frozenset({"auth-backend"})
_FIELDS = frozenset({"kind", *_SUBJECTS, "through", "atomic", "calls", "bases", "proof", "note"})
_PROOF_FIELDS = frozenset({"file", "function"})


class ModelsFileError(UsageError):
    """A transaction-models file that cannot be read, or a row in it that is not valid."""


class Kind(str, Enum):
    """What a row says about its call or signal."""

    OPENS = "opens"
    """The call (decorator, ``with`` expression) runs what it wraps in one transaction."""
    OPTS_OUT = "opts-out"
    """The decorator takes a view out of the transaction ``ATOMIC_REQUESTS`` opens."""
    AFTER_COMMIT = "after-commit"
    """The callbacks the call registers run after the transaction commits."""
    WRITE = "write"
    """The call writes to the database (``atomic``: in one transaction of its own)."""
    INSIDE = "inside"
    """The signal's receivers run inside the transaction of the call that sends it."""
    OUTSIDE = "outside"
    """The signal's receivers run in no transaction the framework opens."""
    LOOKUP = "lookup"
    """The call reads, or creates once, a framework registry row (a content type, a
    permission, a site): no business write, not counted in a sequence."""
    INVOKES = "invokes"
    """The framework's ``method`` (of the classes ``bases``) calls ``calls`` next."""
    IN_REQUEST = "in-request"
    """The decorated function is run by the framework's own Django view: the request's
    transaction (``ATOMIC_REQUESTS``) covers it as it covers the project's views."""
    RUNS_INSIDE = "runs-inside"
    """The framework runs the project's ``method`` (of a class deriving from one of
    ``bases``) inside a transaction it opens around it (ModelAdmin's ``save_model`` inside
    ``changeform_view``'s ``atomic``)."""
    RUNS_IN_REQUEST = "runs-in-request"
    """The framework runs the project's ``method`` (of a class deriving from one of
    ``bases``) while it handles a request in a view of its own, in no transaction of its
    own (mozilla-django-oidc's callback view authenticates, and its backend's
    ``authenticate`` runs ``update_user``): the override is an entry point of kind
    ``http``."""
    HOST_SETTING = "host-setting"
    """The project runs inside a host whose Django settings turn the ``setting`` on for the
    default database (only ``ATOMIC_REQUESTS`` is read): for a library or plugin with no
    settings of its own."""


# Which subject each kind takes.
_SUBJECT_OF = {
    Kind.OPENS: ("call",),
    Kind.OPTS_OUT: ("call",),
    Kind.AFTER_COMMIT: ("call",),
    Kind.WRITE: ("call", "method"),
    Kind.INSIDE: ("signal",),
    Kind.OUTSIDE: ("signal",),
    Kind.LOOKUP: ("call",),
    Kind.INVOKES: ("method",),
    Kind.RUNS_INSIDE: ("method",),
    Kind.IN_REQUEST: ("call",),
    Kind.RUNS_IN_REQUEST: ("method",),
    Kind.HOST_SETTING: ("setting",),
}
# The host settings a ``host-setting`` row may name.
_HOST_SETTINGS = frozenset({"ATOMIC_REQUESTS"})


@dataclass(frozen=True)
class Proof:
    """The framework file and function whose source shows a fact."""

    file: str
    function: str


@dataclass(frozen=True)
class FrameworkFact:
    """One row: a call pattern (``call``, fnmatch over the callee text), a framework method
    reached ``through`` a kind of receiver (``method``, built-in files only) or a signal name
    (``signal``), what it does (``kind``), and where that is proven. An ``invokes`` row also
    names what the method ``calls`` (``serializer.save``: a method of the view's serializer)
    and the framework classes (``bases``) that provide the method. A ``host-setting`` row
    names a Django ``setting``; ``source`` is the file the row was read from."""

    kind: Kind
    framework: str
    call: str = ""
    method: str = ""
    through: str = ""
    signal: str = ""
    setting: str = ""
    source: str = ""
    atomic: bool = False
    calls: str = ""
    bases: tuple[str, ...] = ()
    proof: Proof | None = None
    note: str = ""


@dataclass(frozen=True)
class FrameworkFacts:
    """The rows of one or more model files, in file order."""

    facts: tuple[FrameworkFact, ...] = ()

    def calls(self, kind: Kind) -> tuple[str, ...]:
        """The call patterns of the rows of ``kind``, in row order, each once."""
        return tuple(dict.fromkeys(fact.call for fact in self.facts if fact.kind is kind and fact.call))

    def methods(self, kind: Kind, through: str) -> frozenset[str]:
        """The method names of the rows of ``kind`` reached through ``through``."""
        return frozenset(fact.method for fact in self.facts if fact.kind is kind and fact.through == through and fact.method)

    def atomic_methods(self, through: str) -> frozenset[str]:
        """The method names of the ``write`` rows reached through ``through`` that the
        framework runs in one transaction of their own (``atomic: true``)."""
        return frozenset(fact.method for fact in self.facts if fact.kind is Kind.WRITE and fact.through == through and fact.atomic)

    def signals(self, kind: Kind) -> frozenset[str]:
        """The signal names of the rows of ``kind``."""
        return frozenset(fact.signal for fact in self.facts if fact.kind is kind and fact.signal)

    def host_setting(self, setting: str) -> str:
        """The file of the first ``host-setting`` row that names ``setting`` ("" when none)."""
        return next((fact.source for fact in self.facts if fact.kind is Kind.HOST_SETTING and fact.setting == setting), "")

    def invocations(self, through: str) -> tuple[FrameworkFact, ...]:
        """The ``invokes`` rows of methods reached through ``through``, in row order."""
        return tuple(fact for fact in self.facts if fact.kind is Kind.INVOKES and fact.through == through)

    def run_inside(self, through: str) -> tuple[FrameworkFact, ...]:
        """The ``runs-inside`` rows of methods reached through ``through``, in row order."""
        return tuple(fact for fact in self.facts if fact.kind is Kind.RUNS_INSIDE and fact.through == through)

    def run_in_request(self, through: str) -> tuple[FrameworkFact, ...]:
        """The ``runs-in-request`` rows of methods reached through ``through``, in row order."""
        return tuple(fact for fact in self.facts if fact.kind is Kind.RUNS_IN_REQUEST and fact.through == through)

    def extended(self, other: FrameworkFacts) -> FrameworkFacts:
        """These rows, then ``other``'s."""
        return FrameworkFacts(self.facts + other.facts)


@cache
def builtin_facts() -> FrameworkFacts:
    """The rows of the package's model files (read once; the result is immutable)."""
    found = FrameworkFacts()
    folder = resources.files(__package__).joinpath("models")
    for name in _BUILTIN_FILES:
        text = folder.joinpath(name).read_text(encoding="utf-8")
        found = found.extended(parse_facts(text, f"{__package__}/models/{name}", builtin=True))
    return found


def load_facts(paths: tuple[Path, ...]) -> FrameworkFacts:
    """The built-in rows, then those of each project file in ``paths``."""
    found = builtin_facts()
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelsFileError(f"{path}: cannot read transaction models: {exc}") from exc
        found = found.extended(parse_facts(text, str(path), builtin=False))
    return found


def parse_facts(text: str, source: str, *, builtin: bool) -> FrameworkFacts:
    """The rows of one model file's text (``source`` names it in errors). A project's file
    (``builtin`` False) may leave out ``proof`` and may not use ``method`` rows, which feed
    the built-in framework models' own method tables."""
    try:
        # The package's own files through libyaml where it is built (same documents, a tenth
        # of the time); a project's file through the pure loader, whose error texts it sees.
        document = yaml.load(text, Loader=_FAST_LOADER) if builtin else yaml.safe_load(text)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        raise ModelsFileError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise ModelsFileError(f"{source}: expected a mapping with 'framework' and 'facts'")
    unknown = sorted(set(document) - {"framework", "source", "facts"})
    if unknown:
        raise ModelsFileError(f"{source}: unknown top-level key {unknown[0]!r} (known: facts, framework, source)")
    framework = document.get("framework")
    if not isinstance(framework, str) or not framework:
        raise ModelsFileError(f"{source}: 'framework' must name the framework or project the rows are about")
    if builtin and not isinstance(document.get("source"), str):
        raise ModelsFileError(f"{source}: 'source' must name the release the proofs were read in")
    rows = document.get("facts")
    if not isinstance(rows, list):
        raise ModelsFileError(f"{source}: 'facts' must be a list of rows")
    return FrameworkFacts(tuple(_fact(row, framework, f"{source}: row {number}", builtin, source) for number, row in enumerate(rows, 1)))


def _fact(row: Any, framework: str, where: str, builtin: bool, source: str) -> FrameworkFact:
    if not isinstance(row, dict):
        raise ModelsFileError(f"{where}: a row must be a mapping, not {type(row).__name__}")
    unknown = sorted(set(row) - _FIELDS)
    if unknown:
        raise ModelsFileError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(_FIELDS))})")
    try:
        kind = Kind(row.get("kind"))
    except ValueError:
        known = ", ".join(kind.value for kind in Kind)
        raise ModelsFileError(f"{where}: field 'kind': {row.get('kind')!r} is not one of {known}") from None
    subjects = [name for name in _SUBJECTS if name in row]
    if len(subjects) != 1:
        raise ModelsFileError(f"{where}: a row names exactly one of {', '.join(_SUBJECT_OF[kind])} (found: {', '.join(subjects) or 'none'})")
    subject = subjects[0]
    if subject not in _SUBJECT_OF[kind]:
        raise ModelsFileError(f"{where}: field {subject!r}: a '{kind.value}' row names {' or '.join(_SUBJECT_OF[kind])}")
    value = row[subject]
    if not isinstance(value, str) or not value.strip():
        raise ModelsFileError(f"{where}: field {subject!r} must be a non-empty string")
    if subject == "method" and not builtin:
        raise ModelsFileError(f"{where}: field 'method': only the built-in models use method rows; name the call with 'call'")
    through = row.get("through", "")
    if subject == "method" and through not in _THROUGH:
        raise ModelsFileError(f"{where}: field 'through' must be one of {', '.join(sorted(_THROUGH))}")
    if subject != "method" and "through" in row:
        raise ModelsFileError(f"{where}: field 'through' goes with 'method' only")
    atomic = row.get("atomic", False)
    if not isinstance(atomic, bool) or (atomic and kind is not Kind.WRITE):
        raise ModelsFileError(f"{where}: field 'atomic' is true or false, on 'write' rows only")
    note = row.get("note", "")
    if not isinstance(note, str):
        raise ModelsFileError(f"{where}: field 'note' must be a string")
    if subject == "setting" and value.strip() not in _HOST_SETTINGS:
        raise ModelsFileError(f"{where}: field 'setting': {value.strip()!r} is not a setting the pass reads (known: {', '.join(sorted(_HOST_SETTINGS))})")
    calls, bases = _invocation(row, kind, through, where)
    return FrameworkFact(
        kind, framework, atomic=atomic, calls=calls, bases=bases, proof=_proof(row.get("proof"), where, builtin),
        note=note, through=through, source=source, **{subject: value.strip()},
    )  # fmt: skip


def _invocation(row: dict[str, Any], kind: Kind, through: str, where: str) -> tuple[str, tuple[str, ...]]:
    """An ``invokes`` row's ``calls`` and ``bases``, a ``runs-inside`` or
    ``runs-in-request`` row's ``bases`` (empty on other rows, which may not have them)."""
    hooks = {Kind.RUNS_INSIDE: _INSIDE_THROUGH, Kind.RUNS_IN_REQUEST: _REQUEST_THROUGH}
    if kind in hooks:
        if "calls" in row:
            raise ModelsFileError(f"{where}: field 'calls' goes with 'invokes' rows only")
        if through not in hooks[kind]:
            raise ModelsFileError(f"{where}: field 'through': a '{kind.value}' row is through {' or '.join(sorted(hooks[kind]))}")
        return "", _bases(row, where)
    if kind is not Kind.INVOKES:
        if "calls" in row:
            raise ModelsFileError(f"{where}: field 'calls' goes with 'invokes' rows only")
        if "bases" in row:
            raise ModelsFileError(f"{where}: field 'bases' goes with 'invokes', 'runs-inside' and 'runs-in-request' rows only")
        return "", ()
    if through not in _DISPATCH_THROUGH:
        raise ModelsFileError(f"{where}: field 'through': an 'invokes' row is through {' or '.join(sorted(_DISPATCH_THROUGH))}")
    calls = row.get("calls")
    if not isinstance(calls, str) or not calls.strip():
        raise ModelsFileError(f"{where}: field 'calls' must name the method the framework calls next")
    return calls.strip(), _bases(row, where)


def _bases(row: dict[str, Any], where: str) -> tuple[str, ...]:
    """A row's ``bases``: the framework classes that provide its method."""
    bases = row.get("bases")
    if not isinstance(bases, list) or not bases or not all(isinstance(base, str) and base for base in bases):
        raise ModelsFileError(f"{where}: field 'bases' must list the framework classes that provide the method")
    return tuple(bases)


def _proof(value: Any, where: str, builtin: bool) -> Proof | None:
    if value is None and not builtin:
        return None
    if not isinstance(value, dict) or set(value) != _PROOF_FIELDS or not all(isinstance(value[key], str) and value[key] for key in _PROOF_FIELDS):
        raise ModelsFileError(f"{where}: field 'proof' must be {{file: ..., function: ...}} naming where the framework's source shows the fact")
    return Proof(value["file"], value["function"])
