"""Turn laid-out texts into model-sized sequences: whole texts, or overlapping windows.

A text longer than the model's window is split into windows of whole chunks that each
start with CLS and end on a landmark, overlap by ``overlap`` chunks, and give every
landmark (and every token, for mean pooling) to exactly one window: the one where it sits
most centrally. Nothing is dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from .inputs import check_int
from .landmarks import Layout, assign_landmarks, plan_windows, ranges

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sequences:
    """Model inputs, flat. Sequence s is ``ids[offsets[s]:offsets[s+1]]`` of text ``text[s]``.

    ``segment`` marks, per position, the chunk whose states this sequence owns (-1 for CLS
    and for overlap context); ``lmk_pos``/``lmk_chunk`` (split by ``lmk_offsets``) are the
    positions of the landmarks it owns and their global chunk indices.
    """

    ids: np.ndarray
    segment: np.ndarray
    offsets: np.ndarray
    text: np.ndarray
    first: np.ndarray
    lmk_pos: np.ndarray
    lmk_chunk: np.ndarray
    lmk_offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """Tokens of each sequence."""
        return np.diff(self.offsets)

    @property
    def windows_per_text(self) -> np.ndarray:
        """Sequences (windows) each text was split into."""
        return np.bincount(self.text, minlength=int(self.text.max(initial=-1)) + 1)


def build_sequences(layout: Layout, max_length: int, overlap: int) -> Sequences:
    """Whole sequences for texts that fit ``max_length``; windows for the others."""
    lengths = layout.lengths
    n_chunks = np.diff(layout.chunk_offsets)
    fits = lengths <= max_length
    short = np.flatnonzero(fits)

    # Texts that fit: their layout slices, all landmarks owned (vectorised).
    pos = ranges(layout.seq_offsets[short], lengths[short])
    lmk_idx = ranges(layout.chunk_offsets[short], n_chunks[short])
    parts_ids = [layout.ids[pos]]
    parts_seg = [layout.segment[pos]]
    parts_len = [lengths[short]]
    parts_text = [short]
    parts_first = [np.ones(len(short), dtype=bool)]
    parts_lpos = [layout.lmk_pos[lmk_idx]]
    parts_lchunk = [lmk_idx]
    parts_lcount = [n_chunks[short]]

    p = layout.prefix_len
    capacity = max_length - p
    for i in np.flatnonzero(~fits):
        c0, c1 = layout.chunk_offsets[i], layout.chunk_offsets[i + 1]
        seq = layout.sequence(int(i))
        seg = layout.segment[layout.seq_offsets[i] : layout.seq_offsets[i + 1]]
        chunk_len = layout.chunk_sizes[c0:c1] + 1
        windows = plan_windows(chunk_len, capacity, overlap)
        owner = assign_landmarks(chunk_len, windows)
        lmk_pos = layout.lmk_pos[c0:c1]
        chunk_first_pos = np.concatenate([[p], lmk_pos[:-1] + 1])
        for w, (a, b) in enumerate(windows):
            body = slice(int(chunk_first_pos[a]), int(lmk_pos[b - 1]) + 1)
            owned = np.flatnonzero(owner[a:b] == w) + a
            w_seg = seg[body].copy()
            w_seg[~np.isin(w_seg, owned + c0)] = -1
            shift = chunk_first_pos[a] - p
            parts_ids.append(np.concatenate([seq[:p], seq[body]]))
            parts_seg.append(np.concatenate([np.full(p, -1), w_seg]))
            parts_len.append(np.array([p + body.stop - body.start]))
            parts_text.append(np.array([i]))
            parts_first.append(np.array([w == 0]))
            parts_lpos.append(lmk_pos[owned] - shift)
            parts_lchunk.append(owned + c0)
            parts_lcount.append(np.array([len(owned)]))

    seq_len = np.concatenate(parts_len).astype(np.int64)
    lcount = np.concatenate(parts_lcount).astype(np.int64)
    return Sequences(
        ids=np.concatenate(parts_ids).astype(np.int64),
        segment=np.concatenate(parts_seg).astype(np.int64),
        offsets=np.concatenate([[0], np.cumsum(seq_len)]).astype(np.int64),
        text=np.concatenate(parts_text).astype(np.int64),
        first=np.concatenate(parts_first).astype(bool),
        lmk_pos=np.concatenate(parts_lpos).astype(np.int64),
        lmk_chunk=np.concatenate(parts_lchunk).astype(np.int64),
        lmk_offsets=np.concatenate([[0], np.cumsum(lcount)]).astype(np.int64),
    )


def largest_chunk(granularity: int | str | list[int] | None, sentence_max_tokens: int) -> int | None:
    """Content tokens of the longest chunk a granularity makes (None: one chunk per window)."""
    if granularity == "sentence":
        return sentence_max_tokens
    if isinstance(granularity, list):
        return max(granularity)
    return granularity if isinstance(granularity, int) else None


def default_overlap(max_length: int, prefix_len: int, largest: int | None) -> int:
    """Chunks neighbouring windows share when ``window_overlap`` is unset: about a quarter of a
    window, and at least one chunk when a window holds three or more."""
    if largest is None:
        return 0
    capacity = max_length - prefix_len
    per_window = capacity // (largest + 1)
    return max(1 if per_window >= 3 else 0, capacity // 4 // (largest + 1))


def check_max_length(max_length: int | None, trained: int, rotary: bool) -> int:
    """The window length: the model's trained limit when unset; beyond it only for rotary positions."""
    if max_length is None:
        return trained
    check_int("max_length", max_length, 4)
    if max_length > trained and not rotary:
        raise InvalidInputError(
            f"max_length={max_length} exceeds this model's {trained} positions, and its "
            "position embeddings are absolute, so it cannot extrapolate; leave max_length unset "
            "(long texts are encoded in windows) or use a rotary-position model"
        )
    if max_length > trained:
        logger.info("max_length=%d is beyond the trained %d positions (rotary extrapolation)", max_length, trained)
    return max_length


def check_chunks_fit(
    largest: int | None, max_length: int, prefix_len: int, granularity: int | str | list[int] | None
) -> None:
    """A chunk plus CLS and its landmark must fit one window."""
    if largest is None:
        return
    room = max_length - prefix_len - 1
    if largest > room:
        name = "sentence_max_tokens" if granularity == "sentence" else "granularity"
        raise InvalidInputError(
            f"{name}={largest} does not fit a window of max_length={max_length} "
            f"(room for {room} tokens plus CLS and landmark); use at most {room}"
        )
