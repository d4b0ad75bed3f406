"""Keep resident memory flat while one huge input is encoded.

Encoding a multi-megabyte document runs hundreds of forward passes whose large temporary tensors
are freed and allocated again in slightly different sizes. glibc raises its mmap threshold after
the first such free and serves later ones from its heap, which fragments: peak RSS then grows with
the number of batches, not with the data in use (measured with benchmarks/bench_huge_files.py:
+191 MB from 0.5 to 1.5 MB of text; with the threshold pinned, +47 MB, of which 10 MB are the
vectors). Pinning the threshold costs some speed (each large temporary is its own mapping), so it
is done only once an input that large is seen, for the rest of the process. Elsewhere (macOS,
Windows, musl) this is a no-op; ``MALLOC_MMAP_THRESHOLD_`` set by the user is left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from typing import Any

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
PINNED_THRESHOLD = 128 * 1024


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def pin_mmap_threshold() -> bool:
    """Serve large allocations from mmap from now on (once per process); True where it was done."""
    libc = _libc()
    if libc is None or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, PINNED_THRESHOLD))
