"""Which landmark of a retrieved document is the passage that answers the query.

The document's score is MaxSim (its best landmark), as the index ranks it. ``region`` (the
default) scores each landmark by its own similarity blended half and half with the mean over its
neighbourhood (``radius`` landmarks on each side, clipped at the document's ends) and takes the
best of those: a single landmark can peak on a passing mention of the query's words in another
section, while the passage about the query lifts several neighbouring landmarks at once.
``peak`` takes the single best landmark. Passage hit@1 for the packaged model (v4, k=32; research
log, "A passage rule that keeps in-domain"), ``peak`` -> ``region``: five out-of-domain dev
domains 0.317 -> 0.337, in-domain Python-docs sections 0.407 -> 0.398, test domains 0.337 ->
0.349 (128-token chunks 0.344), factoid needles in dev pages 0.637 -> 0.625 (one query of 80);
radius 3 was chosen over radius 2 (dev 0.344 but in-domain 0.390) by a rule fixed before the
run, and both margins are about one query, so ``peak`` stays an option.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np

from .errors import InvalidInputError

if TYPE_CHECKING:
    from .context import ContextRule, Passage
    from .encoder import LMKEncoder
    from .types import MultiVector

#: ``region`` (the default: the landmark whose neighbourhood agrees most) or ``peak`` (the single
#: most similar landmark: for one-sentence answers in short documents).
PASSAGE_RULES = ("peak", "region")
DEFAULT_PASSAGE_RULE: Final = "region"
#: Landmarks on each side that form a landmark's neighbourhood.
PASSAGE_RADIUS = 3
#: Weight of the landmark's own similarity; the rest goes to its neighbourhood's mean.
PEAK_WEIGHT = 0.5


def passage_scores(
    similarities: np.ndarray, radius: int = PASSAGE_RADIUS, peak_weight: float = PEAK_WEIGHT
) -> np.ndarray:
    """Each landmark's passage score: ``peak_weight`` x its similarity + the rest x the mean
    similarity of the landmarks within ``radius`` of it (itself included), in document order."""
    sims = np.asarray(similarities, dtype=np.float64).reshape(-1)
    if radius < 1 or len(sims) < 2:
        return sims
    sums = np.concatenate([[0.0], np.cumsum(sims)])
    idx = np.arange(len(sims))
    lo, hi = np.maximum(idx - radius, 0), np.minimum(idx + radius + 1, len(sims))
    blended: np.ndarray = peak_weight * sims + (1.0 - peak_weight) * (sums[hi] - sums[lo]) / (hi - lo)
    return blended


def check_passage_rule(rule: str) -> str:
    """``rule`` if it is one of :data:`PASSAGE_RULES`; else a ValueError naming them."""
    if rule not in PASSAGE_RULES:
        raise InvalidInputError(f"passage must be one of {PASSAGE_RULES}, got {rule!r}")
    return rule


def locate_passage(similarities: np.ndarray, rule: str = DEFAULT_PASSAGE_RULE) -> int:
    """Index of the landmark that names the passage under ``rule`` (0 for a document without
    landmarks)."""
    check_passage_rule(rule)
    scores = passage_scores(similarities) if rule == "region" else np.asarray(similarities).reshape(-1)
    return int(np.argmax(scores)) if len(scores) else 0


def context(
    query: str,
    texts: Sequence[str],
    encoded: Sequence[MultiVector],
    encoder: LMKEncoder,
    max_tokens: int = 512,
    *,
    ids: Sequence[str] | None = None,
    k: int | None = None,
    token_counter: Callable[[str], int] | str | None = None,
    min_score: float | None = None,
    rule: ContextRule | None = None,
) -> list[Passage]:
    """:meth:`MultiVectorIndex.context <lmk_rag.index.MultiVectorIndex.context>` without an index:
    the passages, best first, for ``query`` within ``max_tokens`` from documents ``texts`` encoded by
    ``encoder.encode_multi`` (``encoded``), ranked by MaxSim. ``ids`` name the documents (default
    their positions as str)."""
    from .context import (
        CONTEXT_DOCUMENTS,
        ScoredDocument,
        build_context,
        check_max_tokens,
        check_min_score,
        token_counter_of,
    )
    from .inputs import check_k, check_texts

    if not isinstance(query, str):
        raise InvalidInputError(f"query must be str, got {type(query).__name__}")
    budget = check_max_tokens(max_tokens)
    floor = check_min_score(min_score)
    items = check_texts(texts)
    if len(encoded) != len(items):
        raise InvalidInputError(f"encoded has {len(encoded)} entries for {len(items)} texts; encode each text once")
    names = [str(i) for i in range(len(items))] if ids is None else check_texts(ids, "ids")
    if any(not name for name in names):
        raise InvalidInputError("ids must be non-empty str")
    if len(names) != len(items):
        raise InvalidInputError(f"ids has {len(names)} entries for {len(items)} texts")
    count = check_k(CONTEXT_DOCUMENTS if k is None else k)
    q = encoder.encode_query(query)
    sims = [m.vectors @ q for m in encoded]
    scores = np.array([float(s.max()) if len(s) else -1.0 for s in sims])  # MaxSim
    candidates = [
        ScoredDocument(names[i], float(scores[i]), items[i], tuple(encoded[i].spans), sims[i])
        for i in np.argsort(-scores, kind="stable")[:count]
    ]
    return build_context(query, candidates, budget, token_counter_of(encoder, token_counter), rule, min_score=floor)


def spans_cover(passages: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """Row-wise: does passage ``[a, b)`` cover answer ``[c, d)`` (both ``(n, 2)``)? They overlap by at
    least half of the shorter of the two (which must not be empty). Evaluation's passage hit@1 uses this
    rule, and training marks the landmarks that hold an answer with it
    (:func:`lmk_rag.train.losses.answer_landmarks`)."""
    passages, answers = np.asarray(passages).reshape(-1, 2), np.asarray(answers).reshape(-1, 2)
    overlap = np.minimum(passages[:, 1], answers[:, 1]) - np.maximum(passages[:, 0], answers[:, 0])
    shorter = np.minimum(passages[:, 1] - passages[:, 0], answers[:, 1] - answers[:, 0])
    covered: np.ndarray = (shorter > 0) & (overlap * 2 >= shorter)
    return covered


def span_covers(passage: tuple[int, int], answer: tuple[int, int]) -> bool:
    """:func:`spans_cover` for one passage and one answer."""
    return bool(spans_cover(np.array([passage]), np.array([answer]))[0])
