"""Landmark layout: pure array functions from token ids + char offsets to model inputs.

No model and no tokenizer here. A batch of tokenised texts is held as flat arrays
(:class:`TokenizedBatch`); chunking produces chunk ends; :func:`build_layout` inserts one
landmark after each chunk, all texts at once, with numpy (no per-text Python loop).

Landmarks are identified by the *positions* where they were inserted, never by their ids,
so user text containing a literal "[SEP]" or a tokenizer whose pad/EOS/landmark ids
coincide cannot confuse pooling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError

__all__ = [
    "Layout",
    "TokenizedBatch",
    "add_final_landmark",
    "assign_landmarks",
    "boundary_chunk_ends",
    "build_layout",
    "fixed_chunk_ends",
    "plan_windows",
    "ranges",
    "split_long_chunks",
]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` for each (s, n), without a Python loop."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    run_starts = np.cumsum(lengths) - lengths
    return np.repeat(starts - run_starts, lengths) + np.arange(total, dtype=np.int64)


@dataclass(frozen=True)
class TokenizedBatch:
    """Content tokens of B texts as flat arrays (no special tokens).

    ``ids[offsets[i]:offsets[i+1]]`` are text i's token ids, ``starts``/``ends`` their
    character offsets in the original text, ``text_lengths[i]`` the characters of text i
    that the tokens cover (``len(text)`` unless truncated).
    """

    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    offsets: np.ndarray
    text_lengths: np.ndarray

    @property
    def n_texts(self) -> int:
        """Texts in the batch."""
        return len(self.offsets) - 1

    @property
    def n_tokens(self) -> np.ndarray:
        """Content tokens of each text."""
        return np.diff(self.offsets)

    def truncate(self, max_tokens: int) -> tuple[TokenizedBatch, np.ndarray]:
        """Keep at most ``max_tokens`` tokens per text; returns the batch and tokens dropped."""
        n = self.n_tokens
        kept = np.minimum(n, max_tokens)
        dropped = n - kept
        if not dropped.any():
            return self, dropped
        idx = ranges(self.offsets[:-1], kept)
        new_offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
        # A truncated text's spans end where the first dropped token starts.
        first_dropped = self.offsets[:-1] + kept
        cut = dropped > 0
        text_lengths = self.text_lengths.copy()
        text_lengths[cut] = self.starts[first_dropped[cut]]
        batch = TokenizedBatch(self.ids[idx], self.starts[idx], self.ends[idx], new_offsets, text_lengths)
        return batch, dropped


def fixed_chunk_ends(n_tokens: np.ndarray, k: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ends for chunks of ``k`` tokens (per text, or one k for all).

    Returns (ends, chunk_offsets): ``ends[chunk_offsets[i]:chunk_offsets[i+1]]`` are the
    exclusive local token indices where text i's chunks end. Every text has at least one
    chunk (an empty text gets one empty chunk), and the last chunk may be shorter.
    """
    n = np.asarray(n_tokens, dtype=np.int64)
    k_arr = np.broadcast_to(np.asarray(k, dtype=np.int64), n.shape)
    if (k_arr < 1).any():
        raise InvalidInputError("granularity must be a positive number of tokens")
    m = np.maximum(1, -(-n // k_arr))
    chunk_offsets = np.concatenate([[0], np.cumsum(m)]).astype(np.int64)
    text_of_chunk = np.repeat(np.arange(len(n)), m)
    local = np.arange(chunk_offsets[-1], dtype=np.int64) - chunk_offsets[:-1][text_of_chunk]
    ends = np.minimum((local + 1) * k_arr[text_of_chunk], n[text_of_chunk])
    return ends, chunk_offsets


def split_long_chunks(ends: np.ndarray, chunk_offsets: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Split every chunk longer than ``cap`` tokens into pieces of ``cap`` (last shorter)."""
    if cap < 1:
        raise InvalidInputError("cap must be a positive number of tokens")
    n_texts = len(chunk_offsets) - 1
    text_of_chunk = np.repeat(np.arange(n_texts), np.diff(chunk_offsets))
    prev = np.concatenate([[0], ends[:-1]])
    prev[chunk_offsets[:-1][np.diff(chunk_offsets) > 0]] = 0
    length = ends - prev
    pieces = np.maximum(1, -(-length // cap))
    piece_chunk = np.repeat(np.arange(len(ends)), pieces)
    piece_local = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    new_ends = np.minimum(prev[piece_chunk] + (piece_local + 1) * cap, ends[piece_chunk])
    per_text = np.bincount(text_of_chunk, weights=pieces, minlength=n_texts).astype(np.int64)
    new_offsets = np.concatenate([[0], np.cumsum(per_text)]).astype(np.int64)
    return new_ends.astype(np.int64), new_offsets


def boundary_chunk_ends(batch: TokenizedBatch, boundaries: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ends at character boundaries (e.g. sentence ends), one array per text.

    A token belongs to the segment its first character falls in; empty segments vanish.
    """
    ends_per_text: list[np.ndarray] = []
    for i, bounds in enumerate(boundaries):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        starts = batch.starts[lo:hi]
        n = hi - lo
        # Local index of the first token starting at or after each boundary.
        cut = np.searchsorted(starts, np.asarray(bounds, dtype=np.int64), side="left")
        cut = np.unique(cut[(cut > 0) & (cut < n)])
        ends_per_text.append(np.concatenate([cut, [n]]).astype(np.int64))
    counts = np.array([len(e) for e in ends_per_text], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    ends = np.concatenate(ends_per_text) if ends_per_text else np.zeros(0, dtype=np.int64)
    return ends, offsets


def granularity_chunk_ends(
    batch: TokenizedBatch,
    granularity: int | str | list[int] | None,
    *,
    whole_window: int,
    rng: np.random.Generator,
    sentences: Callable[[], list[np.ndarray]],
    sentence_max_tokens: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ends per text for a granularity: every k tokens, k drawn per text from a list (by
    ``rng``), sentence ends (``sentences()``: each text's sentence starts, longer sentences split
    every ``sentence_max_tokens``), or None: one chunk per ``whole_window`` tokens."""
    n = batch.n_tokens
    if granularity is None:
        return fixed_chunk_ends(n, whole_window)
    if isinstance(granularity, int):
        return fixed_chunk_ends(n, granularity)
    if isinstance(granularity, list):
        return fixed_chunk_ends(n, rng.choice(np.asarray(granularity), size=len(n)))
    ends, offsets = boundary_chunk_ends(batch, sentences())
    return split_long_chunks(ends, offsets, sentence_max_tokens)


def add_final_landmark(
    ends: np.ndarray, chunk_offsets: np.ndarray, n_tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One more, empty chunk at the end of every text: its landmark follows the last chunk's.

    This is the layout of sentence-transformers PR #3642, whose texts keep the tokenizer's final
    [SEP] after the inserted landmarks and pool it with them: ``[CLS] c1 [SEP] ... cn [SEP] [SEP]``.
    Its span is empty, at the end of the text.
    """
    ends = np.insert(ends, chunk_offsets[1:], np.asarray(n_tokens, dtype=np.int64))
    return ends.astype(np.int64), (chunk_offsets + np.arange(len(chunk_offsets))).astype(np.int64)


@dataclass(frozen=True)
class Layout:
    """Laid-out sequences ``[CLS] c1 [LMK] c2 [LMK] ... cn [LMK]`` for a batch, flat.

    ``ids[seq_offsets[i]:seq_offsets[i+1]]`` is text i's full sequence. ``segment`` gives,
    per position, the global chunk index it belongs to (content tokens and their landmark)
    or -1 for the leading CLS. ``lmk_pos[chunk_offsets[i]:chunk_offsets[i+1]]`` are the
    positions (relative to the sequence start) where text i's landmarks were inserted,
    ``spans`` the character span (start, end) each landmark covers, and ``chunk_sizes``
    the content tokens in each chunk.
    """

    ids: np.ndarray
    segment: np.ndarray
    seq_offsets: np.ndarray
    lmk_pos: np.ndarray
    chunk_offsets: np.ndarray
    spans: np.ndarray
    chunk_sizes: np.ndarray
    prefix_len: int

    @property
    def n_texts(self) -> int:
        """Texts laid out."""
        return len(self.seq_offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """Tokens of each text's whole sequence (CLS, chunks and landmarks)."""
        return np.diff(self.seq_offsets)

    def sequence(self, i: int) -> np.ndarray:
        """Text ``i``'s token ids as laid out."""
        return self.ids[self.seq_offsets[i] : self.seq_offsets[i + 1]]

    def landmark_positions(self, i: int) -> np.ndarray:
        """Where text ``i``'s landmarks sit in its sequence."""
        return self.lmk_pos[self.chunk_offsets[i] : self.chunk_offsets[i + 1]]

    def text_spans(self, i: int) -> list[tuple[int, int]]:
        """Text ``i``'s landmarks' ``(start, end)`` character spans."""
        rows = self.spans[self.chunk_offsets[i] : self.chunk_offsets[i + 1]]
        return [(int(a), int(b)) for a, b in rows]


def build_layout(
    batch: TokenizedBatch,
    ends: np.ndarray,
    chunk_offsets: np.ndarray,
    landmark_id: int,
    cls_id: int | None,
) -> Layout:
    """Insert a landmark after each chunk (and CLS first, when the model has one).

    ``ends``/``chunk_offsets`` come from one of the chunking functions above.
    """
    n_texts = batch.n_texts
    n = batch.n_tokens
    m = np.diff(chunk_offsets)
    if len(m) != n_texts or (m < 1).any():
        raise InvalidInputError("every text needs at least one chunk")
    p = 0 if cls_id is None else 1
    seq_len = p + n + m
    seq_offsets = np.concatenate([[0], np.cumsum(seq_len)]).astype(np.int64)
    total = int(seq_offsets[-1])

    text_of_chunk = np.repeat(np.arange(n_texts), m)
    chunk_local = np.arange(len(ends), dtype=np.int64) - chunk_offsets[:-1][text_of_chunk]
    global_ends = ends + batch.offsets[:-1][text_of_chunk]

    # Content tokens: global chunk of each token, then its output position.
    tok = np.arange(len(batch.ids), dtype=np.int64)
    text_of_tok = np.repeat(np.arange(n_texts), n)
    tok_chunk = np.searchsorted(global_ends, tok, side="right")
    tok_local = tok - batch.offsets[:-1][text_of_tok]
    tok_out = seq_offsets[:-1][text_of_tok] + p + tok_local + chunk_local[tok_chunk]

    lmk_pos = p + ends + chunk_local  # relative to the sequence start
    lmk_out = seq_offsets[:-1][text_of_chunk] + lmk_pos

    ids = np.empty(total, dtype=np.int64)
    segment = np.empty(total, dtype=np.int64)
    ids[tok_out] = batch.ids
    segment[tok_out] = tok_chunk
    ids[lmk_out] = landmark_id
    segment[lmk_out] = np.arange(len(ends), dtype=np.int64)
    if cls_id is not None:  # p == 1 exactly when there is a CLS
        ids[seq_offsets[:-1]] = cls_id
        segment[seq_offsets[:-1]] = -1

    # Spans partition [0, text_length): chunk c starts where its first token starts.
    chunk_start_tok = np.concatenate([[0], ends[:-1]])
    chunk_start_tok[chunk_offsets[:-1]] = 0
    sizes = ends - chunk_start_tok
    text_len = batch.text_lengths[text_of_chunk]
    has_tok = chunk_start_tok < n[text_of_chunk]
    first_tok = np.minimum(batch.offsets[:-1][text_of_chunk] + chunk_start_tok, max(len(batch.ids) - 1, 0))
    start = np.where(has_tok, batch.starts[first_tok] if len(batch.ids) else 0, text_len)
    start = np.where(chunk_local == 0, 0, np.clip(start, 0, text_len))
    # Running max within each text keeps spans in order even if offsets overlap.
    big = int(batch.text_lengths.max(initial=0)) + 1
    start = np.maximum.accumulate(start + text_of_chunk * big) - text_of_chunk * big
    end = np.concatenate([start[1:], [0]])
    last = chunk_offsets[1:] - 1
    end[last] = batch.text_lengths
    spans = np.stack([start, end], axis=1).astype(np.int64)

    return Layout(ids, segment, seq_offsets, lmk_pos, chunk_offsets, spans, sizes, p)


def plan_windows(chunk_lengths: np.ndarray, capacity: int, overlap: int) -> list[tuple[int, int]]:
    """Windows of whole chunks, each at most ``capacity`` tokens, overlapping by ``overlap`` chunks.

    ``chunk_lengths`` counts each chunk's tokens including its landmark. Returns half-open
    chunk ranges [a, b) covering every chunk; each window advances by at least one chunk.
    """
    if (chunk_lengths > capacity).any():
        raise InvalidInputError("a chunk is longer than the window; lower the granularity")
    cum = np.concatenate([[0], np.cumsum(chunk_lengths)])
    n = len(chunk_lengths)
    windows: list[tuple[int, int]] = []
    a = 0
    while True:
        b = int(np.searchsorted(cum, cum[a] + capacity, side="right")) - 1
        b = max(min(b, n), a + 1)
        windows.append((a, b))
        if b >= n:
            return windows
        a = max(a + 1, b - overlap)


def assign_landmarks(chunk_lengths: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
    """For each chunk, the window where it sits most centrally (in tokens); ties go first.

    Only (window, chunk) pairs where the chunk lies in the window are scored, so time and memory
    grow with the document (each chunk is in a few windows), not with chunks x windows: a dense
    matrix took GBs on a 5 MB file.
    """
    cum = np.concatenate([[0], np.cumsum(chunk_lengths)])
    a = np.array([w[0] for w in windows], dtype=np.int64)
    b = np.array([w[1] for w in windows], dtype=np.int64)
    window = np.repeat(np.arange(len(windows)), b - a)
    chunk = ranges(a, b - a)
    centrality = np.minimum(cum[chunk] - cum[a[window]], cum[b[window]] - cum[chunk + 1])
    order = np.lexsort((window, -centrality, chunk))  # by chunk, most central first, then first window
    first = np.flatnonzero(np.concatenate([[True], np.diff(chunk[order]) != 0]))
    return window[order][first]
