"""Finding the files to ingest under the paths given, and each one's document id (its absolute
path, links resolved); links out of a folder, FIFOs, devices and the index's own folder are passed
over with the reason."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidInputError, PathNotFoundError
from ..inputs import find_unencodable
from .readers import TEXT_SUFFIXES

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


def _walk(root: Path, follow_symlinks: bool, excluded: set[Path], ignored: dict[str, str]) -> Iterator[Path]:
    """Every entry below ``root`` in sorted order, hidden ones and excluded folders left out;
    folder links are entered only when following links, each real folder once (no loops). A
    folder that cannot be read (no permission, a path longer than the system allows) is listed
    in ``ignored`` with the reason, and the walk goes on."""
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
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (Path(top) / d).resolve() not in excluded)
            links = [d for d in dirs if (Path(top) / d).is_symlink() and not follow_symlinks]
        except OSError as exc:
            dirs[:] = []
            ignored[_shown(top)] = f"folder not read: {exc.strerror or exc}"
            continue
        for name in sorted(names + links):
            if not name.startswith("."):
                yield Path(top) / name


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
    suffixes: Iterable[str] = TEXT_SUFFIXES | {".pdf"},
    *,
    follow_symlinks: bool = False,
    exclude: Iterable[str | Path] = (),
    max_file_mb: float | None = DEFAULT_MAX_FILE_MB,
) -> Discovery:
    """(document id, file) pairs: ids are the files' absolute paths, links resolved (see the
    module docstring), so one file reached twice (overlapping roots, a link) is one document.
    Links leading out of a root are passed over unless ``follow_symlinks``; folders in ``exclude``
    (the index's own) are not entered; files over ``max_file_mb`` MB (None: no limit) are passed
    over with their size and how to raise the limit.
    """
    limit = check_max_file_mb(max_file_mb)
    wanted = {s.lower() for s in suffixes}
    excluded = {Path(e).resolve() for e in exclude}
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
        for path in _walk(root, follow_symlinks, excluded, ignored):
            shown = _shown(path)
            try:
                if path.suffix.lower() not in wanted and not (path.is_symlink() and path.is_dir()):
                    continue
                reason = _regular_file(path, real_root, follow_symlinks)
                if reason is not None:
                    ignored[shown] = reason
                elif path.suffix.lower() in wanted:
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


def document_id(path: Path) -> str:
    """A file's document id: its absolute path with links resolved, in POSIX form."""
    return path.resolve().as_posix()


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)
