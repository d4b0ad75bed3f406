"""Pooling over hidden states by position: ``lmk``, ``mean``, ``cls`` and ``lmk+mean``.

``lmk+mean`` reads each chunk as its landmark state plus the mean of its tokens in context
(each unit-length first, so neither dominates): the landmark's summary and the tokens' own
evidence in one vector; the document vector is the mean of those.

The single vector of ``lmk`` and ``lmk+mean`` is a mean over the text's landmarks, each weighing
the same (``landmark_weights="equal"``, the paper's readout) or as much as its chunk's content
tokens (``"tokens"``: a 40-token text at k=32 is not read as half its last 8 tokens, as mean
pooling gives each token the same weight). Long texts barely change: only a last chunk is short.

Batches of windows arrive in any order; :class:`PoolingAccumulator` scatters each batch's
states into per-chunk and per-text sums, so results never depend on batch size, padding
or order. Positions come from the layout, never from token ids.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from ..errors import InvalidInputError

Pooling = Literal["lmk", "mean", "cls", "lmk+mean"]
LandmarkWeights = Literal["equal", "tokens"]
POOLING_MODES: tuple[Pooling, ...] = typing.get_args(Pooling)
# Poolings that need the per-chunk token means.
NEEDS_MEANS = ("mean", "lmk+mean")
LANDMARK_WEIGHTS: tuple[LandmarkWeights, ...] = typing.get_args(LandmarkWeights)


def check_pooling(pooling: str) -> Pooling:
    """``pooling`` if it is one of :data:`POOLING_MODES`, else an error naming them."""
    if pooling not in POOLING_MODES:
        raise InvalidInputError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
    return pooling


def check_landmark_weights(weights: str) -> LandmarkWeights:
    """``weights`` if it is one of :data:`LANDMARK_WEIGHTS`, else an error naming them."""
    if weights not in LANDMARK_WEIGHTS:
        raise InvalidInputError(f"landmark_weights must be one of {LANDMARK_WEIGHTS}, got {weights!r}")
    return weights


def landmark_weights_of(chunk_sizes: np.ndarray, weights: str) -> np.ndarray:
    """Each landmark's weight in its text's single vector: 1, or its chunk's content tokens
    (at least 1, so an empty text's one landmark and a trailing landmark still count)."""
    if check_landmark_weights(weights) == "equal":
        return np.ones(len(chunk_sizes), dtype=np.float32)
    return np.maximum(np.asarray(chunk_sizes, dtype=np.float32), 1.0)


def weighted_text_means(
    vectors: torch.Tensor, text_of_chunk: torch.Tensor, weights: torch.Tensor, n_texts: int
) -> torch.Tensor:
    """(n_texts, d) each text's weighted mean of its chunks' vectors: the single vector of ``lmk``
    and ``lmk+mean``. Out of place, so training differentiates through the same readout it serves."""
    total = torch.zeros(n_texts, vectors.shape[-1], device=vectors.device, dtype=vectors.dtype)
    total = total.index_add(0, text_of_chunk, vectors * weights[:, None])
    count = torch.zeros(n_texts, device=weights.device, dtype=weights.dtype).index_add(0, text_of_chunk, weights)
    return total / count.clamp(min=1e-12)[:, None]


@dataclass
class BatchIndex:
    """Where to read one padded batch: landmarks owned by its rows, segments, CLS rows."""

    lmk_rows: torch.Tensor  # (L,) row of each owned landmark
    lmk_cols: torch.Tensor  # (L,) position of each owned landmark
    lmk_chunks: torch.Tensor  # (L,) global chunk index of each owned landmark
    segment: torch.Tensor  # (R, T) owned chunk index per position, -1 elsewhere
    row_texts: torch.Tensor  # (R,) text index of each row
    first_window: torch.Tensor  # (R,) bool: row is its text's first window
    has_cls: bool


class PoolingAccumulator:
    """Collects per-chunk and per-text sums over batches, then pools."""

    def __init__(
        self,
        n_texts: int,
        text_of_chunk: np.ndarray,
        dim: int,
        need_means: bool,
        chunk_weights: np.ndarray,
    ) -> None:
        """``chunk_weights``: each landmark's weight in its text's single vector
        (:func:`landmark_weights_of`)."""
        n_chunks = len(text_of_chunk)
        self.text_of_chunk = torch.as_tensor(text_of_chunk, dtype=torch.long)
        if len(chunk_weights) != n_chunks:
            raise ValueError(f"chunk_weights has {len(chunk_weights)} entries for {n_chunks} chunks")
        self.chunk_weights = torch.as_tensor(chunk_weights, dtype=torch.float32)
        self.lmk = torch.zeros(n_chunks, dim, dtype=torch.float32)
        self.cls_sum = torch.zeros(n_texts, dim, dtype=torch.float32)
        self.cls_count = torch.zeros(n_texts, dtype=torch.float32)
        self.cls_first = torch.zeros(n_texts, dim, dtype=torch.float32)
        self.need_means = need_means
        if need_means:
            self.chunk_sum = torch.zeros(n_chunks, dim, dtype=torch.float32)
            self.chunk_count = torch.zeros(n_chunks, dtype=torch.float32)
        self.has_cls = False

    def add(self, hidden: torch.Tensor, index: BatchIndex) -> None:
        """Take one batch's hidden states: landmark states, CLS states and token sums per text."""
        hidden = hidden.float().cpu()
        self.lmk[index.lmk_chunks] = hidden[index.lmk_rows, index.lmk_cols]
        cls_states = hidden[:, 0]
        self.has_cls = index.has_cls
        if index.has_cls:
            self.cls_sum.index_add_(0, index.row_texts, cls_states)
            self.cls_count.index_add_(0, index.row_texts, torch.ones(len(index.row_texts)))
            first = index.first_window
            self.cls_first[index.row_texts[first]] = cls_states[first]
        if self.need_means:
            owned = index.segment >= 0
            seg = index.segment[owned]
            self.chunk_sum.index_add_(0, seg, hidden[owned])
            self.chunk_count.index_add_(0, seg, torch.ones(len(seg)))

    def landmark_vectors(self) -> torch.Tensor:
        """(n_chunks, d) landmark hidden states."""
        return self.lmk

    def chunk_means(self) -> torch.Tensor:
        """(n_chunks, d) mean of each chunk's tokens and its landmark, in context."""
        return self.chunk_sum / self.chunk_count.clamp(min=1)[:, None]

    def mixed_vectors(self) -> torch.Tensor:
        """(n_chunks, d) unit landmark state + unit chunk mean (the ``lmk+mean`` readout)."""
        return l2_normalize(self.lmk) + l2_normalize(self.chunk_means())

    def chunk_vectors(self, pooling: str) -> torch.Tensor:
        """The per-landmark vectors of ``pooling``."""
        if pooling == "mean":
            return self.chunk_means()
        if pooling == "lmk+mean":
            return self.mixed_vectors()
        return self.lmk

    def pooled(self, pooling: str) -> torch.Tensor:
        """One vector per text for ``pooling`` (lmk, lmk+mean, mean or cls)."""
        n_texts = len(self.cls_sum)
        if pooling in ("lmk", "lmk+mean"):
            vectors = self.lmk if pooling == "lmk" else self.mixed_vectors()
            return weighted_text_means(vectors, self.text_of_chunk, self.chunk_weights, n_texts)
        if pooling == "mean":
            total = torch.zeros_like(self.cls_sum).index_add_(0, self.text_of_chunk, self.chunk_sum)
            count = torch.zeros(n_texts).index_add_(0, self.text_of_chunk, self.chunk_count)
            if self.has_cls:
                total += self.cls_first
                count += 1
            return total / count.clamp(min=1)[:, None]
        if pooling == "cls":
            if not self.has_cls:
                raise InvalidInputError("pooling='cls' needs a tokenizer with a CLS or BOS token; use 'lmk' or 'mean'")
            return self.cls_sum / self.cls_count.clamp(min=1)[:, None]
        raise InvalidInputError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit length (zero rows stay zero)."""
    return torch.nn.functional.normalize(x, p=2, dim=-1, eps=1e-12)
