"""From landmark scores to what the LLM reads: passages that fit a token budget.

A search ranks documents and scores every landmark of each against the query. The context
builder turns those scores into passages:

1. **Scores per landmark**: the query's similarity to each landmark, z-normalised over all the
   candidates' landmarks, fused with a lexical score of the landmark's own text (BM25 of the
   query's words over the candidates' landmarks; ``lexical_weight``), so an exact term the
   embedding blurs still pulls its passage up.
2. **Seeds**: every landmark is ranked by its score blended with its neighbourhood's
   (:func:`lmk_rag.passages.passage_scores`), and, through ``rank_weight``, by its document's
   place in the ranking. Seeds are taken best first; several peaks of one document become several
   passages.
3. **Growth**: each seed grows to ``width`` landmarks, one at a time toward the better-scoring
   neighbour; regions of one document that overlap or touch are merged, so no text is repeated.
4. **Boundaries**: a passage's ends move out to the nearest sentence or paragraph boundary
   within ``snap_chars`` characters, so the LLM reads whole sentences.
5. **Budget**: passages are added until ``max_tokens`` is reached; the last one is clipped at a
   token (and, where one is near, a sentence) boundary. A budget smaller than one landmark still
   gives one clipped passage.

The defaults (width 4, lexical weight 0.2, rank weight 0.9, 200 characters of snapping) were
chosen on the six out-of-domain *dev* documentation domains among 72 candidates, by answer recall
of a 512-token context, from the Qdrant index's hybrid ranking: 0.466 against 0.402 for the best
chunk-then-embed row (LangChain's splitter), ahead on all six domains and at 256 and 1024 tokens
too (``research/results/context-dev``; ``lmk-rag eval --context-tokens``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .errors import InvalidInputError, InvalidTypeError
from .passages import passage_scores
from .tokenization import load_token_counter


@dataclass(frozen=True)
class Passage:
    """One piece of the context: ``text`` is ``document_text[span[0]:span[1]]`` of document ``id``."""

    id: str
    span: tuple[int, int]
    text: str
    score: float
    tokens: int
    metadata: dict[str, Any] = field(default_factory=dict)


class Candidate(Protocol):
    """What the builder needs of a retrieved document (an index :class:`~lmk_rag.index.Hit` is one)."""

    @property
    def id(self) -> str:
        """The document's id."""

    @property
    def score(self) -> float:
        """The document's ranking score (higher is better)."""

    @property
    def text(self) -> str:
        """The document's whole text."""

    @property
    def metadata(self) -> dict[str, Any]:
        """The document's metadata, returned with its passages."""

    @property
    def landmark_spans(self) -> tuple[tuple[int, int], ...]:
        """Each landmark's ``(start, end)`` characters in ``text``."""

    @property
    def landmark_scores(self) -> np.ndarray | None:
        """Each landmark's similarity to the query (None: the builder computes them)."""


@dataclass(frozen=True)
class ScoredDocument:
    """A :class:`Candidate` made without an index: a document, its ranking score, its landmarks'
    character spans and the query's similarity to each (what an index :class:`~lmk_rag.index.Hit`
    carries)."""

    id: str
    score: float
    text: str
    landmark_spans: tuple[tuple[int, int], ...]
    landmark_scores: np.ndarray | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ContextRule:
    """How passages grow from landmark scores (see the module docstring)."""

    width: int = 4
    lexical_weight: float = 0.2
    rank_weight: float = 0.9
    snap_chars: int = 200

    def __post_init__(self) -> None:
        if isinstance(self.width, bool) or not isinstance(self.width, int) or self.width < 1:
            raise InvalidInputError(f"width must be an int >= 1, got {self.width!r}")
        for name in ("lexical_weight", "rank_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise InvalidInputError(f"{name} must be a number in [0, 1], got {value!r}")
        if isinstance(self.snap_chars, bool) or not isinstance(self.snap_chars, int) or self.snap_chars < 0:
            raise InvalidInputError(f"snap_chars must be an int >= 0, got {self.snap_chars!r}")


DEFAULT_RULE = ContextRule()
#: Documents searched for a context when ``k`` is not given.
CONTEXT_DOCUMENTS = 10
BatchCounter = Callable[[list[str]], list[int]]

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
# A sentence ends at . ! ? (closing quotes or brackets may follow) before whitespace, or at a blank
# line (a paragraph's end). A single line break is not a boundary: hard-wrapped text (Markdown, reST,
# plain text at 80 columns) breaks lines inside sentences.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+|\n[ \t]*\n\s*")


def check_max_tokens(max_tokens: Any) -> int:
    """``max_tokens`` if it is a positive int (a token budget), else an error naming it."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be a positive int (a token budget), got {max_tokens!r}")
    return max_tokens


def user_counter(counter: Any) -> BatchCounter:
    """A user's ``str -> int`` token counter as a batch counter whose failures name the counter."""
    if not callable(counter):
        raise InvalidTypeError(f"token_counter must be a callable str -> int, got {type(counter).__name__}")

    def count(texts: list[str]) -> list[int]:
        out = []
        for text in texts:
            try:
                n = counter(text)
            except Exception as exc:
                raise InvalidInputError(
                    f"token_counter raised {type(exc).__name__}: {exc} (on a text of {len(text)} characters); "
                    "it must take a str and return its token count"
                ) from exc
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                raise InvalidInputError(f"token_counter must return an int >= 0, returned {n!r}")
            out.append(int(n))
        return out

    return count


def token_counter_of(encoder: Any, token_counter: Callable[[str], int] | str | None) -> BatchCounter:
    """The budget's counter: the user's ``str -> int`` (checked, see :func:`user_counter`) or the
    tokenizer it names (a folder with ``tokenizer.json``), else the encoder's (``count_tokens``)."""
    if isinstance(token_counter, str):
        token_counter = load_token_counter(token_counter)
    return user_counter(token_counter) if token_counter is not None else encoder.count_tokens


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
    spans = [_spans_of(c) for c in docs]
    scores = _landmark_scores(query, docs, spans, rule)
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


# ---------------------------------------------------------------------- scores
def _spans_of(c: Candidate) -> np.ndarray:
    spans = np.asarray(c.landmark_spans or [(0, len(c.text))], dtype=np.int64).reshape(-1, 2)
    return spans


def _landmark_scores(
    query: str, docs: Sequence[Candidate], spans: list[np.ndarray], rule: ContextRule
) -> list[np.ndarray]:
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
    """BM25 of the query's words in each landmark's text, IDF over all the candidates' landmarks."""
    terms = {w for w in _WORD.findall(query.lower()) if w not in _STOPWORDS}
    if not terms:
        return [np.zeros(len(s)) for s in spans]
    counts: list[list[dict[str, int]]] = []
    lengths: list[np.ndarray] = []
    for c, s in zip(docs, spans):
        rows: list[dict[str, int]] = []
        lens: list[int] = []
        for a, e in s:
            words = _WORD.findall(c.text[a:e].lower())
            lens.append(len(words))
            found: dict[str, int] = {}
            for w in words:
                if w in terms:
                    found[w] = found.get(w, 0) + 1
            rows.append(found)
        counts.append(rows)
        lengths.append(np.asarray(lens, dtype=np.float64))
    n = sum(len(r) for r in counts)
    avg = max(float(np.concatenate(lengths).mean()), 1.0)
    df = {t: sum(1 for rows in counts for r in rows if t in r) for t in terms}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    out = []
    for rows, sizes in zip(counts, lengths):
        scores = np.zeros(len(rows))
        for j, found in enumerate(rows):
            norm = k1 * (1 - b + b * sizes[j] / avg)
            scores[j] = sum(idf[t] * f * (k1 + 1) / (f + norm) for t, f in found.items())
        out.append(scores)
    return out


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


# ---------------------------------------------------------------------- passages
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
            start, end = _snap(c.text, bounds[r][0], bounds[r][1], floor, ceiling, rule.snap_chars)
            bounds[r] = (start, end)
            values = {j: priority[d][j] for j in range(lo, hi + 1)}
            out.append(_Region(d, lo, hi, values, start, end))
    out.sort(key=lambda g: -g.score)
    return out


def _snap(text: str, start: int, end: int, floor: int, ceiling: int, reach: int) -> tuple[int, int]:
    """Move ``start`` back to a sentence or paragraph start, and ``end`` on to a sentence end,
    each at most ``reach`` characters and never past a neighbouring passage (``floor``, ``ceiling``)."""
    if reach <= 0:
        return start, end
    starts = [m.end() for m in _SENTENCE_END.finditer(text, max(floor, start - reach), start + 1)]
    starts = [s for s in starts if s <= start]
    if start > 0 and starts:
        start = starts[-1]
    if end < len(text):
        found = _SENTENCE_END.search(text, max(end - 1, start), min(ceiling, end + reach))
        if found is not None and found.start() + 1 > end:
            end = _past_closers(text, found.start() + (1 if text[found.start()] in ".!?" else 0), ceiling)
    return start, max(min(end, ceiling), start)


def _past_closers(text: str, end: int, hi: int) -> int:
    while end < hi and text[end] in "\"')]":
        end += 1
    return end


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
        for a, b in dict.fromkeys([_snap(text, start, end, g.start, g.end, reach), (start, end)]):
            n = count_tokens([text[a:b]])[0]
            if n <= budget:
                return a, b, n
        if g.values[lo] < g.values[hi]:  # ties keep the beginning
            lo += 1
            start = int(spans[lo, 0])
        else:
            hi -= 1
            end = int(spans[hi, 1])
    return _clip(text, start, end, budget, count_tokens)


def _clip(text: str, start: int, end: int, budget: int, count_tokens: BatchCounter) -> tuple[int, int, int] | None:
    """The longest prefix of ``text[start:end]`` (cut at whitespace, at a sentence end when one is
    in its last third) of at most ``budget`` tokens."""
    piece = text[start:end]
    n = count_tokens([piece])[0]
    if n <= budget:
        return (start, end, n) if piece.strip() else None
    cuts = [m.start() for m in re.finditer(r"\s+", piece)] + [len(piece)]
    lo, hi, best = 0, len(cuts) - 1, -1
    while lo <= hi:  # the last whitespace cut whose prefix fits
        mid = (lo + hi) // 2
        if count_tokens([piece[: cuts[mid]]])[0] <= budget:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best < 0:
        return None
    cut = cuts[best]
    sentence_ends = [m.end() for m in _SENTENCE_END.finditer(piece, 0, cut) if m.end() >= cut * 2 // 3]
    if sentence_ends and sentence_ends[-1] < cut:
        cut = sentence_ends[-1]
    kept = piece[:cut].rstrip()
    if not kept.strip():
        return None
    return start, start + len(kept), count_tokens([kept])[0]
