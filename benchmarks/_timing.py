"""Timing helpers shared by the benchmarks: best-of-N wall time and the machine line each prints."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

import torch


def timed(fn: Callable[[], object], repeats: int = 2, warm: Callable[[], object] | None = None) -> float:
    """Best of ``repeats`` runs of ``fn`` in seconds, after one warm-up run (``warm``, else ``fn``)."""
    (warm or fn)()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def machine_line() -> str:
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
