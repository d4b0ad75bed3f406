"""Choosing the default search mode of the shipped model (issue #36): benchmarks/bench_hybrid.py
on the dev domains, its encodings taken from the context sweep's cache (no second encoding).

    LMK_DOCS_ROOT=... python research/scripts/hybrid_default.py --domains dev --weights 0.3 0.5 0.7
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "research" / "scripts")]

import bench_hybrid  # noqa: E402
from context_sweep import cached_encoder  # noqa: E402

from lmk_rag import LMKEncoder  # noqa: E402

bench_hybrid.LMKEncoder = lambda **kw: cached_encoder(  # type: ignore[assignment,misc]
    LMKEncoder(**kw, show_progress=False), ROOT / ".cache" / "context-sweep", "lmk-v4"
)

if __name__ == "__main__":
    bench_hybrid.main()
