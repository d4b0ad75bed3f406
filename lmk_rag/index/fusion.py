"""Hybrid search: BM25 and MaxSim candidates fused into one ranking.

Both lists are fused over the union of their candidates, whose MaxSim score is computed exactly
from their landmark vectors (a BM25-only candidate is not left without a dense score):

- ``rrf``: reciprocal rank fusion, sum of ``1 / (rrf_k + rank)`` over the lists a document is in;
- ``weighted``: ``(1 - w) * maxsim + w * bm25`` with MaxSim min-max normalised over the
  candidates and BM25 divided by its best score (BM25 of a document not in its list counts 0).
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..encoding.inputs import check_number
from ..errors import InvalidInputError

Fusion = Literal["weighted", "rrf"]
FUSIONS: tuple[Fusion, ...] = typing.get_args(Fusion)
RRF_K = 60


def check_fusion(fusion: str, weight: float) -> None:
    """Refuse an unknown ``hybrid_fusion`` or a ``hybrid_weight`` outside [0, 1], naming the argument."""
    if fusion not in FUSIONS:
        raise InvalidInputError(f"hybrid_fusion must be one of {FUSIONS}, got {fusion!r}")
    check_number("hybrid_weight", weight, 0, 1)


def fuse(maxsim: np.ndarray, bm25: Sequence[float | None], fusion: str = "weighted", weight: float = 0.5) -> np.ndarray:
    """Fused scores of n candidates from their MaxSim scores and BM25 scores (None: not in BM25's list)."""
    dense = np.asarray(maxsim, dtype=np.float64)
    if fusion == "rrf":
        dense_rank = np.empty(len(dense), dtype=np.int64)
        dense_rank[np.argsort(-dense, kind="stable")] = np.arange(1, len(dense) + 1)
        scored = [(i, s) for i, s in enumerate(bm25) if s is not None]
        sparse_rank = {i: r for r, (i, _) in enumerate(sorted(scored, key=lambda t: -t[1]), 1)}
        return np.array(
            [
                1.0 / (RRF_K + dense_rank[i]) + (1.0 / (RRF_K + sparse_rank[i]) if i in sparse_rank else 0.0)
                for i in range(len(dense))
            ]
        )
    lo, hi = (float(dense.min()), float(dense.max())) if len(dense) else (0.0, 0.0)
    dense_n = (dense - lo) / (hi - lo) if hi > lo else np.ones_like(dense)
    sparse = np.array([s if s is not None else 0.0 for s in bm25], dtype=np.float64)
    top = float(sparse.max()) if len(sparse) else 0.0
    sparse_n = sparse / top if top > 0 else sparse
    return (1.0 - weight) * dense_n + weight * sparse_n
