"""Free space before an embedded index is opened or written.

Qdrant Edge maps its files into memory in pieces of 32 MB and fills them as it goes (on tmpfs even
opening one fills them). When the disk is full, writing to a mapped page kills the process with
SIGBUS, which no Python code can catch and turn into a message. So lmk-rag checks first: the space
the index's files can still grow into (their holes), plus a margin for the next piece, must be
free, or the user is told, in one line, how much is free, how much is needed and what to do.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import InsufficientSpaceError

# Writing: the next 32 MB piece of a mapped file, a write-ahead-log segment, and room to spare;
# opening: room to spare.
MARGIN_BYTES = 96 * 2**20
OPEN_MARGIN_BYTES = 32 * 2**20


def unfilled_bytes(folder: Path, only: str = "") -> int:
    """How many bytes the files under ``folder`` (those whose path holds ``only``) can still grow
    into without growing in size (apparent size minus the blocks on disk: the holes a mapped
    write fills)."""
    total = 0
    for top, _, names in os.walk(folder):
        if only not in top:
            continue
        for name in names:
            try:
                st = os.stat(os.path.join(top, name))
            except OSError:
                continue
            total += max(0, st.st_size - st.st_blocks * 512)
    return total


def check_free_space(folder: Path, extra: int = 0, opening: bool = False) -> None:
    """Raise :class:`InsufficientSpaceError` unless the file system of ``folder`` (or of its
    nearest existing parent) has room for the index's holes, ``extra`` bytes and the margin.
    ``opening``: only the holes of the vector storage, which opening fills (on tmpfs); a write may
    fill any of them."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return  # cannot tell: let the engine try
    holes = unfilled_bytes(folder, "vector_storage" if opening else "") if folder.is_dir() else 0
    needed = holes + (OPEN_MARGIN_BYTES if opening else MARGIN_BYTES) + extra
    if free < needed:
        doing = "open" if opening else "write"
        raise InsufficientSpaceError(
            f"only {_mb(free)} free on the disk of {str(folder)!r}; the embedded Qdrant index there needs about "
            f"{_mb(needed)} free to {doing} (it maps its files in 32 MB pieces, and a full disk would kill the "
            "process); free some space, or put the index on another disk (qdrant:OTHER_PATH)"
        )


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"
