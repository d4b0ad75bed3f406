"""The context builder: from landmark scores to passages within a token budget (see :mod:`lmk_rag.context`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..passages import passage_scores
from .boundaries import clip, snap
from .counting import BatchCounter, check_max_tokens
from .model import DEFAULT_RULE, Candidate, ContextRule, Passage
from .scores import landmark_scores, spans_of


def build_context(
    query: str,
    candidates: Sequence[Candidate],
    max_tokens: int,
    count_tokens: BatchCounter,
    rule: ContextRule | None = None,
) -> list[Passage]:
    """The passages, best first, that the candidates' landmark scores select within ``max_tokens``
    (their token counts, by ``count_tokens``, sum to at most ``max_tokens``); ``rule`` defaults to
    :data:`DEFAULT_RULE`."""
    check_max_tokens(max_tokens)
    rule = DEFAULT_RULE if rule is None else rule
    docs = [c for c in candidates if c.text and c.text.strip()]
    if not docs:
        return []
    spans = [spans_of(c) for c in docs]
    scores = landmark_scores(query, docs, spans, rule)
    # Approximate tokens per landmark from the document's characters per token (counted once per
    # document, on its first two landmarks): exact counts are taken on the passages chosen.
    per_char = _tokens_per_char(docs, spans, count_tokens)
    cost = [np.maximum(1.0, (s[:, 1] - s[:, 0]) * r) for s, r in zip(spans, per_char)]
    seeds = _seed_order(docs, scores, rule)

    covered = [np.zeros(len(s), dtype=bool) for s in spans]
    priority: list[dict[int, float]] = [{} for _ in docs]  # landmark -> the score of the seed that took it
    used = 0.0
    for d, i, value in seeds:
        if used >= max_tokens:
            break
        if covered[d][i]:
            continue
        lo, hi = _grow(scores[d], i, rule.width)
        # Take the region's landmarks, nearest the seed first, while the estimated budget lasts
        # (the very first seed is taken whatever its size: it is clipped to the budget at the end).
        take = [j for j in _by_closeness(lo, hi, i) if not covered[d][j]]
        for j in take:
            if used + cost[d][j] > max_tokens and (used > 0 or j != i):
                continue
            covered[d][j] = True
            used += cost[d][j]
            priority[d][j] = value
    regions = _assemble(docs, spans, covered, priority, rule)
    return _fit(regions, docs, spans, max_tokens, count_tokens, rule.snap_chars)


def _tokens_per_char(docs: Sequence[Candidate], spans: list[np.ndarray], count_tokens: BatchCounter) -> list[float]:
    samples = [c.text[: max(int(s[min(len(s), 2) - 1, 1]), 1)] for c, s in zip(docs, spans)]
    counts = count_tokens(samples)
    return [max(n, 1) / max(len(t), 1) for n, t in zip(counts, samples)]


def _seed_order(docs: Sequence[Candidate], scores: list[np.ndarray], rule: ContextRule) -> list[tuple[int, int, float]]:
    """Every (document, landmark, priority), best first: neighbourhood-blended score, plus the
    document's rank share when ``rank_weight`` > 0."""
    doc_scores = np.array([float(c.score) for c in docs])
    spread = float(doc_scores.max() - doc_scores.min()) if len(docs) > 1 else 0.0
    items = []
    for d, s in enumerate(scores):
        blended = passage_scores(s)
        prior = (doc_scores[d] - doc_scores.max()) / spread if spread > 0 else 0.0
        value = (1 - rule.rank_weight) * blended + rule.rank_weight * prior
        items += [(d, j, float(v)) for j, v in enumerate(value)]
    items.sort(key=lambda t: -t[2])
    return items


def _grow(scores: np.ndarray, seed: int, width: int) -> tuple[int, int]:
    """Landmarks [lo, hi] around ``seed``, grown one at a time toward the better neighbour, until
    ``width`` landmarks (already covered ones count: the region merges with them)."""
    lo = hi = seed
    n = len(scores)
    while hi - lo + 1 < width and (lo > 0 or hi < n - 1):
        left = scores[lo - 1] if lo > 0 else -math.inf
        right = scores[hi + 1] if hi < n - 1 else -math.inf
        if right >= left:
            hi += 1
        else:
            lo -= 1
    return lo, hi


def _by_closeness(lo: int, hi: int, seed: int) -> list[int]:
    return sorted(range(lo, hi + 1), key=lambda j: (abs(j - seed), j))


@dataclass
class _Region:
    """Contiguous chosen landmarks ``lo..hi`` of document ``doc``, each with the score of the seed
    that took it; ``start``/``end``: the passage's characters once snapped to boundaries."""

    doc: int
    lo: int
    hi: int
    values: dict[int, float]
    start: int
    end: int

    @property
    def score(self) -> float:
        return max(self.values[j] for j in range(self.lo, self.hi + 1))


def _assemble(
    docs: Sequence[Candidate],
    spans: list[np.ndarray],
    covered: list[np.ndarray],
    priority: list[dict[int, float]],
    rule: ContextRule,
) -> list[_Region]:
    """Contiguous covered landmarks -> one region each, ends snapped to boundaries, best first."""
    out: list[_Region] = []
    for d, c in enumerate(docs):
        mask = covered[d]
        if not mask.any():
            continue
        edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
        regions = [(int(lo), int(hi)) for lo, hi in zip(edges[::2], edges[1::2] - 1)]
        bounds = [(int(spans[d][lo, 0]), int(spans[d][hi, 1])) for lo, hi in regions]
        for r, (lo, hi) in enumerate(regions):
            floor = bounds[r - 1][1] if r > 0 else 0
            ceiling = bounds[r + 1][0] if r + 1 < len(bounds) else len(c.text)
            start, end = snap(c.text, bounds[r][0], bounds[r][1], floor, ceiling, rule.snap_chars)
            bounds[r] = (start, end)
            values = {j: priority[d][j] for j in range(lo, hi + 1)}
            out.append(_Region(d, lo, hi, values, start, end))
    out.sort(key=lambda g: -g.score)
    return out


def _fit(
    regions: list[_Region],
    docs: Sequence[Candidate],
    spans: list[np.ndarray],
    max_tokens: int,
    count_tokens: BatchCounter,
    reach: int,
) -> list[Passage]:
    """Exact token counts; regions kept best first while they fit. The first that does not loses
    its lowest-scoring edge landmarks until it fits (a single landmark left is clipped), and
    nothing after it is taken."""
    if not regions:
        return []
    counts = count_tokens([docs[g.doc].text[g.start : g.end] for g in regions])
    out: list[Passage] = []
    left = max_tokens
    for g, n in zip(regions, counts):
        c = docs[g.doc]
        if n <= left:
            out.append(Passage(c.id, (g.start, g.end), c.text[g.start : g.end], g.score, n, dict(c.metadata)))
            left -= n
            continue
        trimmed = _trim(g, c.text, spans[g.doc], left, count_tokens, reach)
        if trimmed is not None:
            start, end, n = trimmed
            out.append(Passage(c.id, (start, end), c.text[start:end], g.score, n, dict(c.metadata)))
        break
    return out


def _trim(
    g: _Region, text: str, spans: np.ndarray, budget: int, count_tokens: BatchCounter, reach: int
) -> tuple[int, int, int] | None:
    """``g`` cut down to ``budget`` tokens: edge landmarks of lower score dropped first, then the
    last one clipped. Returns (start, end, tokens), or None when nothing fits."""
    lo, hi, start, end = g.lo, g.hi, g.start, g.end
    while hi > lo:
        # The cut end snapped to a sentence boundary inside what was chosen, else the landmark's own.
        for a, b in dict.fromkeys([snap(text, start, end, g.start, g.end, reach), (start, end)]):
            n = count_tokens([text[a:b]])[0]
            if n <= budget:
                return a, b, n
        if g.values[lo] < g.values[hi]:  # ties keep the beginning
            lo += 1
            start = int(spans[lo, 0])
        else:
            hi -= 1
            end = int(spans[hi, 1])
    return clip(text, start, end, budget, count_tokens)
