"""Length-sorted batches under a token budget, padded with masks built from lengths."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from .landmarks import ranges
from .pooling import BatchIndex
from .windows import Sequences


@dataclass
class Batch:
    """One padded forward batch: token ids, attention mask (from lengths, never from ids), where
    its landmarks sit (``index``) and its real (unpadded) token count."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    index: BatchIndex
    n_tokens: int


def plan_batches(lengths: np.ndarray, batch_size: int, max_batch_tokens: int) -> list[np.ndarray]:
    """Sequence indices per batch: longest first, at most ``batch_size`` rows and
    ``max_batch_tokens`` padded tokens (a single over-long sequence still gets its own batch)."""
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    i = 0
    while i < len(order):
        longest = int(lengths[order[i]])
        rows = max(1, min(batch_size, max_batch_tokens // max(longest, 1)))
        batches.append(order[i : i + rows])
        i += rows
    return batches


def make_batch(seqs: Sequences, rows: np.ndarray, pad_id: int, has_cls: bool) -> Batch:
    """Pad the chosen sequences into tensors; the attention mask comes from lengths."""
    lens = seqs.lengths[rows]
    width = int(lens.max())
    n_rows = len(rows)
    row_idx = np.repeat(np.arange(n_rows), lens)
    col_idx = ranges(np.zeros(n_rows, dtype=np.int64), lens)
    flat = ranges(seqs.offsets[rows], lens)
    ids = np.full((n_rows, width), pad_id, dtype=np.int64)
    ids[row_idx, col_idx] = seqs.ids[flat]
    segment = np.full((n_rows, width), -1, dtype=np.int64)
    segment[row_idx, col_idx] = seqs.segment[flat]
    mask = (np.arange(width)[None, :] < lens[:, None]).astype(np.int64)

    counts = np.diff(seqs.lmk_offsets)[rows]
    lflat = ranges(seqs.lmk_offsets[rows], counts)
    index = BatchIndex(
        lmk_rows=torch.from_numpy(np.repeat(np.arange(n_rows), counts)),
        lmk_cols=torch.from_numpy(seqs.lmk_pos[lflat]),
        lmk_chunks=torch.from_numpy(seqs.lmk_chunk[lflat]),
        segment=torch.from_numpy(segment),
        row_texts=torch.from_numpy(seqs.text[rows]),
        first_window=torch.from_numpy(seqs.first[rows]),
        has_cls=has_cls,
    )
    return Batch(torch.from_numpy(ids), torch.from_numpy(mask), index, int(lens.sum()))


def iter_batches(
    seqs: Sequences, batch_size: int, max_batch_tokens: int, pad_id: int, has_cls: bool
) -> Iterator[Batch]:
    """The sequences as length-sorted batches of at most ``batch_size`` rows and ``max_batch_tokens``
    padded tokens, padded with ``pad_id``; ``has_cls``: each sequence starts with a CLS token."""
    for rows in plan_batches(seqs.lengths, batch_size, max_batch_tokens):
        yield make_batch(seqs, rows, pad_id, has_cls)
