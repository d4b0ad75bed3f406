"""Each candidate landmark's score for a query: dense similarity and BM25 of its text, z-normalised and fused."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from .model import Candidate, ContextRule

_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
    ]
)


def spans_of(c: Candidate) -> np.ndarray:
    """The candidate's landmark spans as an ``(n, 2)`` array (the whole text when it has none)."""
    spans = np.asarray(c.landmark_spans or [(0, len(c.text))], dtype=np.int64).reshape(-1, 2)
    return spans


def landmark_scores(
    query: str, docs: Sequence[Candidate], spans: list[np.ndarray], rule: ContextRule
) -> list[np.ndarray]:
    """Each candidate's landmark scores: dense similarity z-normalised over all candidates, fused
    with the z-normalised BM25 of each landmark's text by ``rule.lexical_weight``."""
    dense = []
    for c, s in zip(docs, spans):
        sims = c.landmark_scores
        if sims is None or len(sims) != len(s):
            sims = np.full(len(s), float(c.score), dtype=np.float64)  # no landmark scores: the document's
        dense.append(np.asarray(sims, dtype=np.float64))
    fused = _zscores(dense)
    if rule.lexical_weight > 0:
        lexical = _zscores(_bm25_per_landmark(query, docs, spans))
        fused = [(1 - rule.lexical_weight) * a + rule.lexical_weight * b for a, b in zip(fused, lexical)]
    return fused


def _zscores(values: list[np.ndarray]) -> list[np.ndarray]:
    flat = np.concatenate(values) if values else np.zeros(0)
    if len(flat) < 2 or float(flat.std()) < 1e-12:
        return [np.zeros_like(v) for v in values]
    mean, std = float(flat.mean()), float(flat.std())
    return [(v - mean) / std for v in values]


def _bm25_per_landmark(
    query: str, docs: Sequence[Candidate], spans: list[np.ndarray], k1: float = 1.2, b: float = 0.75
) -> list[np.ndarray]:
    """BM25 of the query's words in each landmark's text, IDF over all the candidates' landmarks
    (a landmark's length in characters stands for its length in words). Each term is found by one
    regular-expression scan of each document and counted per landmark by its position."""
    terms = sorted({w for w in _WORD.findall(query.lower()) if w not in _STOPWORDS})
    if not terms:
        return [np.zeros(len(s)) for s in spans]
    patterns = {t: re.compile(rf"(?<!\w){re.escape(t)}(?!\w)") for t in terms}
    # freq[d][t]: occurrences of term t in each landmark of document d
    freq: list[dict[str, np.ndarray]] = []
    for c, s in zip(docs, spans):
        lower = c.text.lower()
        row: dict[str, np.ndarray] = {}
        for t, pattern in patterns.items():
            at = np.fromiter((m.start() for m in pattern.finditer(lower)), dtype=np.int64)
            slot = np.searchsorted(s[:, 1], at, side="right")  # the landmark whose span holds it
            inside = slot < len(s)
            inside[inside] &= at[inside] >= s[slot[inside], 0]
            row[t] = np.bincount(slot[inside], minlength=len(s)).astype(np.float64)
        freq.append(row)
    sizes = [np.maximum(s[:, 1] - s[:, 0], 1).astype(np.float64) for s in spans]
    n = sum(len(s) for s in spans)
    avg = max(float(np.concatenate(sizes).mean()), 1.0)
    df = {t: sum(int((row[t] > 0).sum()) for row in freq) for t in terms}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    out = []
    for row, size in zip(freq, sizes):
        norm = k1 * (1 - b + b * size / avg)
        out.append(sum((idf[t] * row[t] * (k1 + 1) / (row[t] + norm) for t in terms), np.zeros(len(size))))
    return out
