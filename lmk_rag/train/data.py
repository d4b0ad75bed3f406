"""Training pairs: (query, positive[, negative]) from JSONL, or inverse-cloze pairs from raw text."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInputError
from ..sentences import sentence_starts

if TYPE_CHECKING:
    from ..eval.sections import Page


@dataclass(frozen=True)
class Pair:
    query: str
    positive: str
    negative: str | None = None


def load_pairs(path: str | Path) -> list[Pair]:
    """JSONL lines with ``query`` (or ``anchor``), ``positive`` (or ``pos``), optional ``negative``."""
    pairs = []
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            query = row.get("query", row.get("anchor"))
            positive = row.get("positive", row.get("pos"))
            negative = row.get("negative", row.get("neg"))
            if isinstance(positive, list):
                positive = positive[0] if positive else None
            if isinstance(negative, list):
                negative = negative[0] if negative else None
            if not isinstance(query, str) or not isinstance(positive, str):
                raise InvalidInputError(f"{path}:{n}: each line needs string 'query' and 'positive' fields")
            pairs.append(Pair(query, positive, negative if isinstance(negative, str) else None))
    if not pairs:
        raise InvalidInputError(f"{path}: no training pairs found")
    return pairs


def text_windows(texts: list[str], tokenize, min_tokens: int, max_tokens: int, seed: int) -> list[str]:
    """Cut documents into consecutive windows of min..max tokens (char slices via token offsets)."""
    rng = random.Random(seed)
    batch = tokenize(texts)
    windows = []
    for i, text in enumerate(texts):
        starts = batch.starts[batch.offsets[i] : batch.offsets[i + 1]]
        pos = 0
        while pos < len(starts):
            size = rng.randint(min_tokens, max_tokens)
            end = min(pos + size, len(starts))
            if end - pos >= min_tokens // 2:
                a = int(starts[pos])
                b = int(starts[end]) if end < len(starts) else len(text)
                windows.append(text[a:b].strip())
            pos = end
    return [w for w in windows if w]


def _sentence_starts_of(windows: list[str], workers: int) -> list[list[int]]:
    """Sentence starts of every window; pysbd (~100 KB/s a core) in ``workers`` processes."""
    if workers <= 1 or len(windows) < 1000:
        return [sentence_starts(w).tolist() for w in windows]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: the trainer may hold CUDA and threads by now, which forked children must not inherit
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [s.tolist() for s in pool.map(sentence_starts, windows, chunksize=256)]


def inverse_cloze_pairs(windows: list[str], keep_prob: float, seed: int, workers: int = 1) -> list[Pair]:
    """A sentence of each window as query, the window (without it, most of the time) as positive.

    ``workers`` > 1 splits sentences in that many processes; the pairs are the same.
    """
    rng = random.Random(seed)
    pairs = []
    for window, starts in zip(windows, _sentence_starts_of(windows, workers)):
        bounds = [0, *starts, len(window)]
        sentences = [(a, b) for a, b in zip(bounds, bounds[1:]) if 6 <= len(window[a:b].split()) <= 60]
        if len(sentences) < 2:
            continue
        a, b = sentences[rng.randrange(len(sentences))]
        query = " ".join(window[a:b].split())
        positive = window if rng.random() < keep_prob else (window[:a] + window[b:]).strip()
        pairs.append(Pair(query, positive))
    return pairs


def sample_batch(n_items: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """Indices of the batch for ``step``: a pure function of (seed, step), so resuming is exact."""
    rng = np.random.default_rng([seed, step])
    return rng.choice(n_items, size=min(batch_size, n_items), replace=False)


def section_pairs(pages: Sequence[Page], seed: int, min_chars: int = 1000, max_chars: int = 2000) -> list[Pair]:
    """A section heading as query, a passage of its page (headings removed) holding the section's start.

    The passage begins up to a fifth of its length before the section, so the answer is not
    always at the front; documentation headings are real, human-written statements of need.
    The hard negative is a passage of the same page that does not overlap the positive (so the
    landmarks learn which part of a document answers), when the page has room for one.
    """
    from ..eval.sections import query_sections

    rng = random.Random(seed)

    def passage(text: str, at: int, size: int) -> tuple[int, str]:
        start = max(text.rfind(" ", 0, at), text.rfind("\n", 0, at)) + 1  # whole words
        return start, text[start : start + size].strip()

    pairs = []
    for page, section in query_sections(pages):
        size = rng.randint(min_chars, max_chars)
        start, positive = passage(page.text, max(0, section.start - rng.randint(0, size // 5)), size)
        others = [
            s.start for s in page.sections if s.start + size <= start or s.start >= start + size + 1
        ]  # passages that miss the positive
        negative = passage(page.text, rng.choice(others), size)[1] if others else ""
        if positive:
            pairs.append(Pair(section.title, positive, negative or None))
    return pairs
