"""The embedded index's files: the folder's locks, its metadata file (``PATH/<collection>.lmk.json``:
the encoder fingerprint and the layout's settings, written atomically), what a damaged file looks
like, an emptied write-ahead-log piece, and read-only copies. No engine calls beyond loading a shard."""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import DamagedIndexError, IndexUnavailableError, InsufficientSpaceError, MissingDependencyError
from ...types import Fingerprint
from ..space import OPEN_MARGIN_BYTES

if TYPE_CHECKING:
    from qdrant_edge import EdgeShard

SHARD_MARKER = "edge_config.json"
logger = logging.getLogger(__name__)
# A write-ahead-log piece younger than this may be one another process is making: never removed.
_EMPTY_WAL_AGE_S = 10.0


@contextmanager
def opening_lock(folder: Path, collection: str) -> Iterator[None]:
    """Hold an exclusive lock while ``collection`` in ``folder`` is created or loaded and its
    fingerprint checked or written, so racing creators of one new index never see it half made."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    if folder.exists() and not folder.is_dir():
        raise IndexUnavailableError(f"the index path {str(folder)!r} is a file; give a folder for qdrant:PATH")
    lock = folder / f".{collection}.open.lock"
    if not lock.exists():
        if holds_edge_index(folder, collection):  # made before this lock existed: no creator left to race
            yield
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock.touch()
        except OSError:  # a folder no one can write to: no creator to race with (opening it says what is wrong)
            yield
            return
    with open(lock, "rb") as handle:  # read-only: a search on read-only media can take it too
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# What the engine says when a file holds less, or other, than it wrote there.
_DAMAGE_SIGNS = (
    "out of bounds",
    "io error",
    "gridstore",
    "corrupt",
    "unexpected end of file",
    "failed to fill",
    "is not readable",
    "lz4",
    "decompress",
    "failed to decode",
    "failed to load segment",
    "failed to read segment",
    "failed to load id tracker",
    "panicked",
)


def is_damage(exc: BaseException) -> bool:
    """Whether an engine error means a damaged file (truncated or overwritten storage)."""
    if type(exc).__name__ == "PanicException":  # the engine's Rust code gave up on what it read
        return True
    text = str(exc).lower()
    return type(exc).__name__ == "Exception" and any(sign in text for sign in _DAMAGE_SIGNS)


def damaged(folder: Path, exc: BaseException) -> DamagedIndexError:
    """The :class:`DamagedIndexError` for ``exc`` on the index in ``folder``, saying how to rebuild."""
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DamagedIndexError(
        f"the index at {str(folder)!r} is damaged: a file in it holds less than was written ({detail}); rebuild it "
        f"(lmk-rag ingest YOUR_FOLDERS --index qdrant:NEW_PATH), or move {str(folder)!r} away and ingest again"
    )


def load_shard(shard_dir: Path) -> EdgeShard:
    """Load a shard; a write-ahead-log piece emptied to 0 bytes (it holds nothing: a copy or a
    crash cut it) is removed and the load tried again, instead of the index being unopenable."""
    from qdrant_edge import EdgeShard

    try:
        return EdgeShard.load(str(shard_dir))
    except Exception as exc:
        if "invalid segment capacity: 0" not in str(exc):
            raise
        now = time.time()
        empty = [
            p
            for p in (shard_dir / "wal").glob("open-*")
            if p.stat().st_size == 0 and now - p.stat().st_mtime > _EMPTY_WAL_AGE_S  # not one being made now
        ]
        if not empty:
            raise
        for piece in empty:
            logger.warning("removed the empty write-ahead-log file %s (it held nothing) to open the index", piece)
            piece.unlink()
        return EdgeShard.load(str(shard_dir))


def read_only_copy(folder: Path) -> Path:
    """A private copy of an index that lives where nothing may be written (read-only media, a
    folder of another user): the engine rewrites its own files when it opens a shard, so searches
    run on the copy, which is removed at close. Returns the temporary folder holding the copy."""
    import shutil
    import tempfile

    size = tree_bytes(folder)
    scratch = Path(tempfile.mkdtemp(prefix="lmk-rag-read-only-"))
    try:
        if shutil.disk_usage(scratch).free < size + 2 * OPEN_MARGIN_BYTES:
            raise InsufficientSpaceError(
                f"the index at {str(folder)!r} cannot be written to (read-only), so lmk-rag opens a copy of it, but "
                f"the temporary folder {str(scratch)!r} has too little space for its {size / 2**20:.0f} MB; set "
                "TMPDIR to a folder with room, or copy the index somewhere writable"
            )
        logger.warning("the index at %s cannot be written to; opening a copy in %s (removed at close)", folder, scratch)
        try:
            shutil.copytree(folder, scratch / folder.name, symlinks=True)
        except (OSError, shutil.Error) as exc:  # shutil.Error gathers every file that could not be copied
            detail = exc.args[0][0][2] if isinstance(exc, shutil.Error) and exc.args and exc.args[0] else exc
            raise InsufficientSpaceError(
                f"the index at {str(folder)!r} cannot be written to (read-only), so lmk-rag opens a copy of it, but "
                f"copying it into {str(scratch)!r} failed ({detail}); set TMPDIR to a folder with room, or copy the "
                "index somewhere writable"
            ) from exc
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return scratch


def tree_bytes(folder: Path, only: str = "") -> int:
    """The bytes the files under ``folder`` (those whose path holds ``only``) take on disk (0 when
    it does not exist)."""
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file() and only in str(p))


def read_ahead(folders: list[Path], limit: int | None = None, first: str = "") -> tuple[int, Callable[[], None]]:
    """The bytes to read and a function that reads them once, so that they sit in the OS page cache
    when searches map them: the files under ``folders``, in that order (within a folder those whose
    path holds ``first`` before the others; write-ahead logs left out: replayed at open, never
    searched), up to ``limit`` bytes (the files that fit whole). It reads (not ``WILLNEED`` advice,
    which Linux caps at its read-ahead window per file) and skips the holes of the engine's sparse
    files."""
    files: list[Path] = []
    size = 0
    for folder in folders:
        # os.walk passes over folders a merge removes while it lists (rglob would raise).
        listed = [Path(root) / name for root, _, names in os.walk(folder) for name in names]
        for path in sorted(listed, key=lambda p: (not first or first not in str(p), p)):
            if "wal" in path.relative_to(folder).parts:
                continue
            try:
                status = path.stat()
            except OSError:  # removed by a merge since it was listed
                continue
            on_disk = status.st_blocks * 512
            if not stat.S_ISREG(status.st_mode) or (limit is not None and size + on_disk > limit):
                continue
            files.append(path)
            size += on_disk

    def read() -> None:
        buffer = memoryview(bytearray(1 << 20))
        for path in files:
            try:
                with open(path, "rb", buffering=0) as f:
                    for start, end in _data_ranges(f.fileno()):
                        f.seek(start)
                        while start < end and (n := f.readinto(buffer[: min(len(buffer), end - start)])):
                            start += n
            except OSError:  # a file a merge replaced since it was listed: nothing to read
                continue

    return size, read


def available_memory() -> int | None:
    """Bytes of memory the kernel says new work can take without swapping (``MemAvailable``), or
    None where it does not say (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _data_ranges(fd: int) -> Iterator[tuple[int, int]]:
    """The stretches of data of the open file ``fd``, from each ``SEEK_DATA`` to the next
    ``SEEK_HOLE`` (the whole file where the OS or file system tells no holes)."""
    end = os.fstat(fd).st_size
    if not hasattr(os, "SEEK_DATA"):  # pragma: no cover - Windows
        yield 0, end
        return
    offset = 0
    while offset < end:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # no data after offset
            return
        offset = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, offset


def meta_path(folder: Path, collection: str) -> Path:
    """The JSON file beside the shard that records the collection's fingerprint and settings."""
    return folder / f"{collection}.lmk.json"


def holds_edge_index(folder: Path, collection: str) -> bool:
    """Whether ``folder`` holds an embedded collection named ``collection``."""
    return (folder / collection / SHARD_MARKER).is_file()


def folder_fingerprint(folder: Path, collection: str) -> Fingerprint | None:
    """The fingerprint an embedded index in ``folder`` records, without opening (or creating) it."""
    if not holds_edge_index(folder, collection):
        return None
    meta = read_meta(folder, collection)
    return Fingerprint.from_dict(meta["fingerprint"]) if meta and meta.get("fingerprint") else None


def read_meta(folder: Path, collection: str) -> dict[str, Any] | None:
    """The collection's recorded fingerprint and settings (None: not written yet)."""
    path = meta_path(folder, collection)
    if not path.is_file():
        return None
    try:
        meta: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return meta
    except (OSError, ValueError) as exc:
        raise IndexUnavailableError(f"cannot read the index settings {str(path)!r}: {exc}") from exc


def write_meta(folder: Path, collection: str, meta: dict[str, Any]) -> None:
    """Write the collection's metadata file atomically (a temporary file, fsync, then rename)."""
    path = meta_path(folder, collection)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _edge() -> Any:
    try:
        import qdrant_edge
    except ImportError as exc:  # pragma: no cover - a dependency of the qdrant extra
        raise MissingDependencyError("qdrant:PATH needs qdrant-edge-py: pip install 'lmk-rag[qdrant]'") from exc
    return qdrant_edge


def landmark_shard_dir(folder: Path, collection: str) -> Path:
    """Where the collection's landmark index lives: a second shard beside the collection's."""
    return folder / f"{collection}.landmarks"
