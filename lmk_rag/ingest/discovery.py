"""Finding the files to ingest under the paths given, and each one's document id (its absolute
path, links resolved); every entry passed over (hidden, binary by suffix, outside the globs asked
for, links out of a folder, FIFOs, devices, the index's own folder) is listed with the reason."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from ..encoding.inputs import find_unencodable
from ..errors import InvalidInputError, PathNotFoundError
from .readers import binary_suffix

#: Files larger than this many MB are passed over unless ``max_file_mb`` says otherwise: encoding
#: holds a file's tokens and landmark vectors in memory at once (a 150 MB text took 6 GB and hours).
DEFAULT_MAX_FILE_MB = 10.0


def check_max_file_mb(value: object) -> float | None:
    """``max_file_mb`` checked: a number > 0, or None / 0 for no limit."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise InvalidInputError(f"max_file_mb must be a number of MB > 0 (or 0 for no limit), got {value!r}")
    return float(value)


@dataclass
class Discovery:
    """What :func:`discover` found: (id, file) pairs to read, and paths passed over with why."""

    files: list[tuple[str, Path]]
    ignored: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Globs:
    """The user's globs as one gitignore-style matcher, and as they are named in messages."""

    spec: pathspec.GitIgnoreSpec
    shown: str

    def match(self, relative: str) -> bool:
        """Whether a path below the folder given (POSIX, folders ending in ``/``) matches."""
        return self.spec.match_file(relative)


def check_globs(patterns: Iterable[str] | str | None, name: str) -> _Globs | None:
    """``include`` / ``exclude`` patterns checked (non-empty strings) and compiled; None when there
    are none. InvalidInputError names the argument and the bad item."""
    if patterns is None:
        return None
    items = [patterns] if isinstance(patterns, str) else list(patterns)
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise InvalidInputError(f"{name}[{i}] must be a non-empty glob such as '*.md' or 'build/**', got {item!r}")
    return _Globs(pathspec.GitIgnoreSpec.from_lines(items), " ".join(map(repr, items))) if items else None


class _Filter:
    """Which entries below a root are read: not hidden, not in a folder never to enter, and as the
    user's ``include`` / ``exclude`` globs say (matched against the path relative to the root)."""

    def __init__(self, root: Path, include: _Globs | None, exclude: _Globs | None) -> None:
        self.root, self.include, self.exclude = root, include, exclude

    def folder(self, path: Path) -> str | None:
        """Why the folder ``path`` is not entered, or None."""
        if path.name.startswith("."):
            return "hidden folder (its name starts with '.'), not entered"
        if self.exclude is not None and self.exclude.match(self._relative(path) + "/"):
            return f"excluded by --exclude {self.exclude.shown}"
        return None

    def file(self, path: Path) -> str | None:
        """Why the file ``path`` is not read, or None."""
        rel = self._relative(path)
        if path.name.startswith("."):
            return "hidden file (its name starts with '.'); give its path to read it"
        if self.exclude is not None and self.exclude.match(rel):
            return f"excluded by --exclude {self.exclude.shown}"
        if self.include is not None and not self.include.match(rel):
            return f"not matched by --include {self.include.shown}"
        suffix = binary_suffix(path)
        if suffix is not None:
            return f"not a text format ({suffix} files hold no text lmk-rag reads)"
        return None

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def _walk(
    root: Path, follow_symlinks: bool, excluded: set[Path], ignored: dict[str, str], keep: _Filter
) -> Iterator[Path]:
    """Every file below ``root`` in sorted order that ``keep`` lets through (the others are listed
    in ``ignored`` with why); folder links are entered only when following links, each real folder
    once (no loops). A folder that cannot be read (no permission, a path longer than the system
    allows) is listed in ``ignored`` with the reason, and the walk goes on."""
    seen: set[Path] = set()

    def unreadable(exc: OSError) -> None:
        ignored[_shown(exc.filename or root)] = f"folder not read: {exc.strerror or exc}"

    for top, dirs, names in os.walk(root, followlinks=follow_symlinks, onerror=unreadable):
        try:
            real = Path(top).resolve()
            if real in seen or real in excluded:
                dirs[:] = []
                continue
            seen.add(real)
            entered = []
            for d in sorted(dirs):
                path = Path(top) / d
                if path.resolve() in excluded:
                    ignored[_shown(path)] = "the index's own folder, not read"
                    continue
                if path.is_symlink() and not follow_symlinks:
                    names.append(d)  # reported as a link to a folder below
                    continue
                reason = keep.folder(path)
                if reason is not None:
                    ignored[_shown(path)] = reason
                else:
                    entered.append(d)
            dirs[:] = entered
        except OSError as exc:
            dirs[:] = []
            ignored[_shown(top)] = f"folder not read: {exc.strerror or exc}"
            continue
        for name in sorted(names):
            path = Path(top) / name
            reason = keep.file(path)
            if reason is None:
                yield path
            else:
                ignored[_shown(path)] = reason


def _shown(path: str | os.PathLike[str]) -> str:
    """A path as text for messages, whatever bytes its name holds."""
    return os.fsencode(os.fspath(path)).decode("utf-8", "backslashreplace")


def _regular_file(path: Path, root: Path | None, follow_symlinks: bool) -> str | None:
    """None when ``path`` may be read, else why not (link out of the folder, loop, FIFO, ...)."""
    try:
        target = path.resolve(strict=True)
        mode = target.stat().st_mode
    except (OSError, RuntimeError) as exc:
        return f"broken or looping symlink ({exc.__class__.__name__})" if path.is_symlink() else f"unreadable ({exc})"
    if path.is_symlink() and not follow_symlinks and root is not None and not target.is_relative_to(root):
        return f"symlink to {target}, outside the folder (pass --follow-symlinks to read it)"
    if stat.S_ISDIR(mode):
        return "symlink to a folder (pass --follow-symlinks to enter it)"
    if not stat.S_ISREG(mode):
        return "not a regular file (FIFO, socket or device)"
    return None


def discover(
    paths: Sequence[str | Path],
    *,
    follow_symlinks: bool = False,
    not_entered: Iterable[str | Path] = (),
    max_file_mb: float | None = DEFAULT_MAX_FILE_MB,
    include: Iterable[str] | str | None = None,
    exclude: Iterable[str] | str | None = None,
) -> Discovery:
    """(document id, file) pairs: ids are the files' absolute paths, links resolved (see the
    module docstring), so one file reached twice (overlapping roots, a link) is one document.
    Every other entry under a folder is listed in ``ignored`` with why: hidden names, formats
    that hold no text (by suffix), links out of a root (unless ``follow_symlinks``), files over
    ``max_file_mb`` MB (None: no limit), files that ``include`` globs do not match or ``exclude``
    globs match (gitignore-style, against the path below the folder given). Folders in
    ``not_entered`` (the index's own) are not entered. Files named directly are always read.
    """
    limit = check_max_file_mb(max_file_mb)
    include_globs, exclude_globs = check_globs(include, "include"), check_globs(exclude, "exclude")
    excluded = {Path(e).resolve() for e in not_entered}
    found: dict[str, Path] = {}
    ignored: dict[str, str] = {}

    def text_id(path: Path) -> str | None:
        """The file's document id, None where its path is not valid UTF-8 (an id is text)."""
        doc_id = document_id(path)
        return None if find_unencodable([doc_id]) is not None else doc_id

    for given in paths:
        root = Path(given)
        if not root.exists() and not root.is_symlink():
            raise PathNotFoundError(f"no such file or folder: {given}")
        if not root.is_dir():
            reason = _regular_file(root, None, True)
            if reason is not None:
                raise InvalidInputError(f"cannot read {given}: {reason}")
            doc_id = text_id(root)
            if doc_id is None:
                raise InvalidInputError(f"cannot read {given}: its path is not valid UTF-8 (document ids are text)")
            found.setdefault(doc_id, root)  # the same file reached twice is one document
            continue
        real_root = root.resolve()
        keep = _Filter(root, include_globs, exclude_globs)
        for path in _walk(root, follow_symlinks, excluded, ignored, keep):
            shown = _shown(path)
            try:
                reason = _regular_file(path, real_root, follow_symlinks)
                if reason is not None:
                    ignored[shown] = reason
                    continue
                doc_id = text_id(path)
                if doc_id is None:  # report it, ingest the rest
                    ignored[shown] = "its path is not valid UTF-8 (document ids are text); rename it to ingest it"
                else:
                    found.setdefault(doc_id, path)
            except OSError as exc:  # e.g. a path longer than the system allows
                ignored[shown] = f"not read: {exc.strerror or exc}"
    if limit is not None:
        for doc_id, path in list(found.items()):
            size = path.stat().st_size
            if size > limit * 2**20:
                del found[doc_id]
                ignored[_shown(path)] = (
                    f"too large: {size / 2**20:.1f} MB, over the {limit:g} MB limit (raise it with --max-file-mb "
                    "or max_file_mb=, 0 for none: a file's tokens and vectors are held in memory while it is encoded)"
                )
    return Discovery(sorted(found.items()), ignored)


def sample_folder() -> Path:
    """The demo corpus that ships with lmk-rag (``lmk-rag ingest --sample``): a Markdown file, an
    HTML page with navigation around its article, and a PDF whose pages hits cite."""
    return Path(__file__).resolve().parents[1] / "sample"


def document_id(path: Path) -> str:
    """A file's document id: its absolute path with links resolved, in POSIX form."""
    return path.resolve().as_posix()


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)
