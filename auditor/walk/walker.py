"""Walk stage: decide which files of a repository are audited, and read them once.

Input: a scan root (a directory, possibly a subdirectory of a git work tree) and
:class:`WalkOptions`. Output: a :class:`WalkResult` holding every audited file as a decoded
:class:`~auditor.walk.files.FileEntry` and every other candidate as a
:class:`~auditor.walk.files.SkippedFile` with its reason.

The candidates come from :mod:`auditor.walk.listing` (git's own view of the tree, or the
same ``.gitignore`` rules applied without git); gitignored paths are not candidates and
are not reported. Every other exclusion is, in this order: a file name that is not UTF-8,
``.auditorignore`` files (:mod:`auditor.walk.ignore`), ``--exclude`` and ``--include``
globs (:mod:`auditor.walk.globs`), the default exclusions by name
(:mod:`auditor.walk.classify`), what the disk says (:mod:`auditor.walk.reading`), text
that does not decode, and the default exclusions by content. A single bad file never
stops the walk.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from auditor import defaults
from auditor.errors import UsageError
from auditor.languages import language_for_path
from auditor.progress import ProgressCallback, ProgressEvent, no_progress
from auditor.walk import placeholders
from auditor.walk.classify import classify_content, classify_path, name_suffix
from auditor.walk.files import FileEntry, SkippedFile, SkipReason
from auditor.walk.globs import GlobList
from auditor.walk.ignore import AUDITORIGNORE, IgnoreTree
from auditor.walk.listing import Listing, list_candidates
from auditor.walk.reading import FileReader, decode_text

__all__ = ["WalkOptions", "WalkResult", "walk"]

_STAGE = "walk"
_PROGRESS_EVERY = 200


@dataclass(frozen=True)
class WalkOptions:
    """What to walk: include/exclude globs (gitignore syntax) and limits.

    The globs match paths relative to ``glob_base`` (a directory under the root, "" or
    ending in "/": the directory the user named when the walk starts at the repository's
    top) and select among the files under it only; files outside it are walked whatever
    the globs say (a subdirectory scan's callers, auditor.runs.scope)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    glob_base: str = ""
    # Seconds the walk's work on one file may take (None: no limit); over it, the file is
    # listed as not audited ("file-deadline") and goes no further.
    file_deadline_s: float | None = defaults.FILE_DEADLINE_S
    max_file_bytes: int = defaults.MAX_FILE_BYTES
    default_excludes: bool = True
    use_gitignore: bool = True


@dataclass(frozen=True)
class WalkResult:
    """The walk's outcome: audited files sorted by path, skipped files by (path, reason)."""

    root: Path
    git_root: Path | None
    files: tuple[FileEntry, ...]
    skipped: tuple[SkippedFile, ...]


def _is_utf8_text(path: str) -> bool:
    """Whether a decoded file name came from valid UTF-8 (no surrogate escapes)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Classifier:
    """Turns one candidate path into a FileEntry or a SkippedFile; never raises for a file."""

    def __init__(self, root: Path, options: WalkOptions, listing: Listing) -> None:
        self._default_excludes = options.default_excludes
        # Inside a work tree, .auditorignore files apply from the top down, like .gitignore:
        # scanning a subdirectory still honours the ones in the directories above it.
        git_root = listing.git_root
        ignore_root, self._ignore_prefix = str(root), ""
        if git_root is not None and root != git_root and root.is_relative_to(git_root):
            ignore_root, self._ignore_prefix = str(git_root), root.relative_to(git_root).as_posix() + "/"
        self._auditorignore = IgnoreTree(ignore_root, AUDITORIGNORE)
        self._include = GlobList(options.include, "--include") if options.include else None
        self._exclude = GlobList(options.exclude, "--exclude") if options.exclude else None
        self._glob_base = options.glob_base
        self._reader = FileReader(str(root), options.max_file_bytes, listing.listed_by_git)
        self._languages: dict[str, str | None] = {}

    def classify(self, path: str) -> FileEntry | SkippedFile:
        """Apply the exclusions in order (user's ignores, globs, defaults, disk), then read."""
        if not path.isascii() and not _is_utf8_text(path):
            # Later stages and reports handle text only; show the raw bytes escaped.
            shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return SkippedFile(shown, SkipReason.NON_UTF8, "file name is not valid UTF-8")
        ignored = self._auditorignore.match(self._ignore_prefix + path, is_dir=False)
        if ignored is not None:
            detail = f"matched pattern '{ignored.text}' in {ignored.source}"
            return SkippedFile(path, SkipReason.AUDITORIGNORE, detail)
        if path.startswith(self._glob_base):
            relative = path[len(self._glob_base):]
            if self._exclude is not None:
                glob = self._exclude.matched(relative)
                if glob is not None:
                    return SkippedFile(path, SkipReason.EXCLUDED, f"matched pattern '{glob}'")
            if self._include is not None and self._include.matched(relative) is None:
                return SkippedFile(path, SkipReason.NOT_INCLUDED, "no --include pattern matched")
        if self._default_excludes:
            excluded = classify_path(path)
            if excluded is not None:
                return excluded
        raw = self._reader.read(path)
        if isinstance(raw, SkippedFile):
            return raw
        decoded = decode_text(raw)
        if isinstance(decoded[0], SkipReason):
            return SkippedFile(path, decoded[0], decoded[1])
        text, encoding = decoded
        if self._default_excludes:
            excluded = classify_content(path, text)
            if excluded is not None:
                return excluded
        return FileEntry(
            path=path,
            size=len(raw),
            language=self._language(path),
            text=text,
            content_hash=hashlib.sha256(raw).hexdigest(),
            encoding=encoding,
        )

    def _language(self, path: str) -> str | None:
        """``language_for_path(path)``, remembered per extension (which alone decides it)."""
        suffix = name_suffix(path.rpartition("/")[2])
        if suffix not in self._languages:
            self._languages[suffix] = language_for_path(path)
        return self._languages[suffix]


def _resolve_root(root: Path) -> Path:
    """The resolved scan root; a missing path or a non-directory is a usage error."""
    path = Path(root)
    if not path.exists():
        if path.is_symlink():
            raise UsageError(f"broken or looping symbolic link: {path} (its target cannot be resolved)")
        raise UsageError(f"path does not exist: {path}")
    if not path.is_dir():
        raise UsageError(f"not a directory: {path}")
    return path.resolve()


def walk(
    root: Path,
    options: WalkOptions = WalkOptions(),
    progress: ProgressCallback = no_progress,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> WalkResult:
    """List the candidates under ``root`` and classify each one.

    Every candidate appears exactly once, either in ``files`` (decoded UTF-8, BOM stripped)
    or in ``skipped`` with its reason; gitignored paths are not candidates. A file whose
    work (read, decode, classify, stand-in checks, timed by ``clock``) took over
    ``options.file_deadline_s`` is skipped as "file-deadline". Raises
    :class:`UsageError` for a missing or non-directory root, an invalid glob, a
    non-positive size limit or deadline; a single bad file never raises.
    """
    if options.max_file_bytes <= 0:
        raise UsageError(f"the file size limit must be positive, not {options.max_file_bytes}")
    if options.file_deadline_s is not None and options.file_deadline_s <= 0:
        raise UsageError(f"the per-file deadline must be positive, not {options.file_deadline_s}")
    scan_root = _resolve_root(root)
    listing = list_candidates(scan_root, options.use_gitignore, progress)
    classifier = _Classifier(scan_root, options, listing)
    total = len(listing.candidates)
    progress(ProgressEvent(_STAGE, completed=0, total=total))
    files: list[FileEntry] = []
    skipped: list[SkippedFile] = list(listing.skipped)
    deadline = options.file_deadline_s
    for completed, path in enumerate(listing.candidates, start=1):
        started = clock()
        outcome = classifier.classify(path)
        stand_in = placeholders.recognise_stand_in(scan_root, outcome)
        if stand_in is not None:
            outcome = SkippedFile(outcome.path, SkipReason(stand_in.reason), stand_in.detail)
        elapsed = clock() - started
        if deadline is not None and elapsed > deadline and isinstance(outcome, FileEntry):
            outcome = SkippedFile(outcome.path, SkipReason.FILE_DEADLINE, (
                f"reading and classifying it took {elapsed:.1f} s, over the per-file deadline of {deadline:g} s "
                "(--file-deadline)"
            ))
        if isinstance(outcome, FileEntry):
            files.append(outcome)
        else:
            skipped.append(outcome)
        if completed % _PROGRESS_EVERY == 0 and completed < total:
            progress(ProgressEvent(_STAGE, completed=completed, total=total))
    progress(ProgressEvent(_STAGE, completed=total, total=total))
    return WalkResult(
        root=scan_root,
        git_root=listing.git_root,
        files=tuple(sorted(files, key=lambda entry: entry.path)),
        skipped=tuple(sorted(skipped, key=lambda item: (item.path, item.reason.value))),
    )
