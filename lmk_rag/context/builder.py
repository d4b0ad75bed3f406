"""The context builder: from landmark scores to passages within a token budget (see :mod:`lmk_rag.context`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..passages import passage_scores
from .boundaries import clip, snap
from .counting import BatchCounter, check_max_tokens
from .model import DEFAULT_RULE, Candidate, ContextRule, Passage
from .scores import landmark_scores, spans_of

#: A ``min_score`` for the packaged model at which most off-topic questions get an empty context
#: and few answerable ones lose their answer (chosen on the dev sets: docs/results.md).
OFF_TOPIC_MIN_SCORE = 0.35


def build_context(
    query: str,
    candidates: Sequence[Candidate],
    max_tokens: int,
    count_tokens: BatchCounter,
    rule: ContextRule | None = None,
    *,
    min_score: float | None = None,
) -> list[Passage]:
    """The passages, best first, that the candidates' landmark scores select within ``max_tokens``
    (their token counts, by ``count_tokens``, sum to at most ``max_tokens``); ``rule`` defaults to
    :data:`DEFAULT_RULE`. With ``min_score``, a passage starts only at a landmark whose similarity
    to the query (the candidate's ``landmark_scores``, a cosine) is at least ``min_score``: an
    off-topic query gets a short or empty context."""
    check_max_tokens(max_tokens)
    floor = check_min_score(min_score)
    rule = DEFAULT_RULE if rule is None else rule
    docs = [c for c in candidates if c.text and c.text.strip()]
    if not docs:
        return []
    spans = [spans_of(c) for c in docs]
    scores = landmark_scores(query, docs, spans, rule)
    # Approximate tokens per character from each document's first landmarks (exact counts are
    # taken on the passages chosen).
    per_char = _tokens_per_char(docs, spans, count_tokens)
    values = _seed_values(docs, scores, rule)
    allowed = [_seedable(c, s, floor) for c, s in zip(docs, spans)]
    chosen = _choose(docs, spans, values, allowed, per_char, max_tokens, rule)
    for d, mask in enumerate(chosen):
        _widen_small(docs[d].text, spans[d], mask, values[d], per_char[d], rule)
    regions = _assemble(docs, spans, chosen, values, rule)
    return _fit(regions, docs, spans, max_tokens, count_tokens, rule)


def check_min_score(min_score: object) -> float | None:
    """``min_score`` as a float in [-1, 1] (a cosine), None for no floor; else an error naming it."""
    if min_score is None:
        return None
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float, np.floating, np.integer)):
        raise InvalidInputError(
            f"min_score must be a number in [-1, 1] (a cosine similarity) or None, got {type(min_score).__name__}"
        )
    value = float(min_score)
    if not -1.0 <= value <= 1.0:  # NaN fails this too
        raise InvalidInputError(
            f"min_score must be a number in [-1, 1] (a cosine similarity) or None, got {min_score!r}"
        )
    return value


def _seedable(c: Candidate, spans: np.ndarray, floor: float | None) -> np.ndarray:
    """Which landmarks may start a passage: all, or those whose cosine reaches ``floor``."""
    if floor is None:
        return np.ones(len(spans), dtype=bool)
    sims = c.landmark_scores
    if sims is None or len(sims) != len(spans):
        return np.full(len(spans), float(c.score) >= floor)
    return np.asarray(sims, dtype=np.float64) >= floor


def _choose(
    docs: Sequence[Candidate],
    spans: list[np.ndarray],
    values: list[np.ndarray],
    allowed: list[np.ndarray],
    per_char: list[float],
    max_tokens: int,
    rule: ContextRule,
) -> list[np.ndarray]:
    """Which landmarks the context covers. Best first by value: the first ``rule.seeds`` picks are
    new passages (cover); after them a landmark next to a chosen passage counts ``widen_bonus``
    more (widen), up to ``width`` landmarks a passage. A pick is taken when the passage it makes,
    snapped to sentence ends, still fits the estimated budget."""
    chosen = [np.zeros(len(s), dtype=bool) for s in spans]
    heap = [(-float(v), d, j) for d, vs in enumerate(values) for j, v in enumerate(vs) if allowed[d][j]]
    heapq.heapify(heap)
    used = 0.0
    picks = 0
    widening = False
    smallest = max(1, min(rule.min_passage_tokens, max_tokens))
    while heap and max_tokens - used >= smallest:
        _, d, j = heapq.heappop(heap)
        if chosen[d][j]:
            continue
        if not widening and _touches(chosen[d], j):
            continue  # covering places new passages; widening comes back to this one
        lo, hi = _merged(chosen[d], j)
        if hi - lo + 1 > rule.width:
            continue
        own = (spans[d][j, 1] - spans[d][j, 0]) * per_char[d]
        if used > 0 and used + own > max_tokens:
            continue  # not even the landmark itself fits: no need to snap it
        added = _cost(docs[d].text, spans[d], chosen[d], j, per_char[d], rule.snap_chars)
        if used + added > max_tokens and used > 0:
            continue
        chosen[d][j] = True
        used += added
        picks += 1
        if picks < rule.seeds and used < rule.cover_share * max_tokens:
            continue
        # Widening: the neighbours of every passage once the seeds are placed, then of each pick.
        around = [(e, n) for e, mask in enumerate(chosen) for n in _frontier(mask)] if not widening else []
        around += [(d, n) for n in (j - 1, j + 1) if widening and 0 <= n < len(chosen[d])]
        widening = True
        for e, n in around:
            if not chosen[e][n]:
                heapq.heappush(heap, (-(float(values[e][n]) + rule.widen_bonus), e, n))
    return chosen


def _widen_small(
    text: str, spans: np.ndarray, mask: np.ndarray, values: np.ndarray, per_char: float, rule: ContextRule
) -> None:
    """Passages estimated under ``min_passage_tokens`` (a short last landmark, a heading) grown in
    ``mask`` by their better neighbour at a time (merging with a passage they reach) until long
    enough or their whole document; what still falls short once counted is dropped by the fit."""
    j = 0
    while j < len(mask):
        if not mask[j]:
            j += 1
            continue
        lo, hi = _merged(mask, j)
        while (lo > 0 or hi < len(mask) - 1) and _snapped_chars(
            text, spans, lo, hi, rule.snap_chars
        ) * per_char < rule.min_passage_tokens:
            left = values[lo - 1] if lo > 0 else -np.inf
            right = values[hi + 1] if hi < len(mask) - 1 else -np.inf
            mask[hi + 1 if right >= left else lo - 1] = True
            lo, hi = _merged(mask, lo)
        j = hi + 1


def _snapped_chars(text: str, spans: np.ndarray, lo: int, hi: int, reach: int) -> int:
    """Characters of landmarks ``lo..hi`` once their ends are snapped to sentence boundaries."""
    start, end = snap(text, int(spans[lo, 0]), int(spans[hi, 1]), 0, len(text), reach)
    return end - start


def _merged(mask: np.ndarray, j: int) -> tuple[int, int]:
    """The run of chosen landmarks ``j`` would belong to, ``j`` included."""
    lo = hi = j
    while lo > 0 and mask[lo - 1]:
        lo -= 1
    while hi < len(mask) - 1 and mask[hi + 1]:
        hi += 1
    return lo, hi


def _touches(mask: np.ndarray, j: int) -> bool:
    return bool((j > 0 and mask[j - 1]) or (j < len(mask) - 1 and mask[j + 1]))


def _frontier(mask: np.ndarray) -> list[int]:
    """Unchosen landmarks next to a chosen one."""
    near = np.zeros(len(mask), dtype=bool)
    near[:-1] |= mask[1:]
    near[1:] |= mask[:-1]
    found: list[int] = np.flatnonzero(near & ~mask).tolist()
    return found


def _cost(text: str, spans: np.ndarray, mask: np.ndarray, j: int, per_char: float, reach: int) -> float:
    """Estimated tokens that choosing landmark ``j`` adds: the snapped passage it joins, less the
    passages it merges (their snapped lengths), at the document's tokens per character."""
    lo, hi = _merged(mask, j)
    old = sum(_snapped_chars(text, spans, a, b, reach) for a, b in ((lo, j - 1), (j + 1, hi)) if a <= b)
    return max(1.0, (_snapped_chars(text, spans, lo, hi, reach) - old) * per_char)


def _tokens_per_char(docs: Sequence[Candidate], spans: list[np.ndarray], count_tokens: BatchCounter) -> list[float]:
    samples = [c.text[: max(int(s[min(len(s), 2) - 1, 1]), 1)] for c, s in zip(docs, spans)]
    counts = count_tokens(samples)
    return [max(n, 1) / max(len(t), 1) for n, t in zip(counts, samples)]


def _seed_values(docs: Sequence[Candidate], scores: list[np.ndarray], rule: ContextRule) -> list[np.ndarray]:
    """Each landmark's value: its score blended with its neighbourhood's, and, through
    ``rank_weight``, its document's place in the ranking (0 for the best document, -1 the worst)."""
    doc_scores = np.array([float(c.score) for c in docs])
    spread = float(doc_scores.max() - doc_scores.min()) if len(docs) > 1 else 0.0
    out = []
    for d, s in enumerate(scores):
        prior = (doc_scores[d] - doc_scores.max()) / spread if spread > 0 else 0.0
        out.append((1 - rule.rank_weight) * passage_scores(s, peak_weight=rule.peak_weight) + rule.rank_weight * prior)
    return out


@dataclass
class _Region:
    """Contiguous chosen landmarks ``lo..hi`` of document ``doc``, each with its value;
    ``start``/``end``: the passage's characters once snapped to boundaries."""

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
    priority: list[np.ndarray],
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
            values = {j: float(priority[d][j]) for j in range(lo, hi + 1)}
            out.append(_Region(d, lo, hi, values, start, end))
    out.sort(key=lambda g: -g.score)
    return out


def _fit(
    regions: list[_Region],
    docs: Sequence[Candidate],
    spans: list[np.ndarray],
    max_tokens: int,
    count_tokens: BatchCounter,
    rule: ContextRule,
) -> list[Passage]:
    """Exact token counts; regions kept best first while they fit. One that does not loses its
    lowest-scoring edge landmarks until it fits (a single landmark left is clipped at a sentence
    end where one is near); it is dropped instead when that leaves under ``min_passage_tokens``
    (unless its whole document is that short), and later regions may still fill the budget."""
    if not regions:
        return []
    counts = count_tokens([docs[g.doc].text[g.start : g.end] for g in regions])
    out: list[Passage] = []
    left = max_tokens
    for g, n in zip(regions, counts):
        c = docs[g.doc]
        if n < rule.min_passage_tokens and len(c.text) > g.end - g.start:
            continue  # a fragment of a longer document (its estimate was long enough, its count is not)
        if n <= left:
            out.append(Passage(c.id, (g.start, g.end), c.text[g.start : g.end], g.score, n, dict(c.metadata)))
            left -= n
        elif left >= rule.min_passage_tokens or not out:
            trimmed = _trim(g, c.text, spans[g.doc], left, count_tokens, rule.snap_chars)
            if trimmed is not None and (trimmed[2] >= rule.min_passage_tokens or not out):
                start, end, n = trimmed
                out.append(Passage(c.id, (start, end), c.text[start:end], g.score, n, dict(c.metadata)))
                left -= n
        if left < max(rule.min_passage_tokens, 1):
            break
    return out


def _trim(
    g: _Region, text: str, spans: np.ndarray, budget: int, count_tokens: BatchCounter, reach: int
) -> tuple[int, int, int] | None:
    """``g`` cut down to ``budget`` tokens: edge landmarks of lower score dropped first, then the
    last one clipped. Returns (start, end, tokens), or None when nothing fits."""
    lo, hi, start, end = g.lo, g.hi, g.start, g.end
    while True:
        # The cut end snapped to a sentence boundary inside what was chosen, else the landmark's own.
        for a, b in dict.fromkeys([snap(text, start, end, g.start, g.end, reach), (start, end)]):
            n = count_tokens([text[a:b]])[0]
            if n <= budget:
                return a, b, n
        if hi == lo:
            break
        if g.values[lo] < g.values[hi]:  # ties keep the beginning
            lo += 1
            start = int(spans[lo, 0])
        else:
            hi -= 1
            end = int(spans[hi, 1])
    return clip(text, start, end, budget, count_tokens)
