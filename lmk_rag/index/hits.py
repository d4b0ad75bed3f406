"""What a search returns: :class:`Hit` (a document, its score and the passage that matched), built
from a :class:`StoredDocument` and its landmark similarities as a :class:`PassageRequest` asks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..passages import DEFAULT_PASSAGE_RULE, locate_passage
from ..types import PagedSpan


@dataclass(frozen=True)
class StoredDocument:
    """A document as stored: its id, text, metadata and each landmark's character span."""

    id: str
    text: str
    metadata: dict[str, Any]
    spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Hit(PagedSpan):
    """A search result: the document, its score, and the landmark passage that matched best.

    ``score`` ranks the hits of one search (in ``hybrid`` mode a fusion relative to the other hits:
    the best is 1.0); ``similarity`` is on an absolute scale: the cosine of the query with the
    document's best landmark (its MaxSim), comparable across queries, what thresholds use.
    ``span`` is the character span of ``passage`` in ``text`` (the matched landmark widened by
    ``neighbours``), ``landmark_span`` the matched landmark's own. ``landmark_spans`` are the
    character spans of all the document's landmarks and ``landmark_scores`` the query's similarity
    to each (None where the backend did not compute them): what the context builder grows passages
    from (:mod:`lmk_rag.context`)."""

    id: str
    score: float
    text: str
    metadata: dict[str, Any]
    landmark: int
    span: tuple[int, int]
    passage: str
    landmark_spans: tuple[tuple[int, int], ...] = field(default=(), repr=False, compare=False)
    landmark_scores: np.ndarray | None = field(default=None, repr=False, compare=False)
    landmark_span: tuple[int, int] = field(default=(0, 0), compare=False)
    similarity: float = 0.0


@dataclass(frozen=True)
class PassageRequest:
    """How a hit's passage is chosen (``rule``, see :mod:`lmk_rag.passages`) and widened
    (``neighbours`` landmarks each side)."""

    rule: str = DEFAULT_PASSAGE_RULE
    neighbours: int = 0


def hit_from_vectors(
    doc: StoredDocument, score: float, q: np.ndarray, vectors: np.ndarray, passage: PassageRequest
) -> Hit:
    """The hit of ``doc`` for query vector ``q``, its passage located among its landmark ``vectors``."""
    sims = vectors @ q if len(vectors) else None
    landmark = locate_passage(sims, passage.rule) if sims is not None else 0
    return make_hit(doc, score, landmark, passage, sims)


def make_hit(
    doc: StoredDocument, score: float, landmark: int, passage: PassageRequest, sims: np.ndarray | None = None
) -> Hit:
    """The hit of ``doc`` with its passage at ``landmark`` (widened by ``passage.neighbours``)
    and, when known, the landmark scores ``sims``."""
    spans = doc.spans or [(0, len(doc.text))]
    landmark = min(landmark, len(spans) - 1)
    lo, hi = max(0, landmark - passage.neighbours), min(len(spans) - 1, landmark + passage.neighbours)
    span = (int(spans[lo][0]), int(spans[hi][1]))
    if sims is not None and len(sims) != len(spans):
        sims = None  # vectors that do not match the stored spans name no landmark scores
    # Without landmark scores the backend's score is the MaxSim itself (maxsim / prefetch / pooled).
    similarity = float(np.max(sims)) if sims is not None and len(sims) else float(score)
    return Hit(
        doc.id,
        float(score),
        doc.text,
        doc.metadata,
        landmark,
        span,
        doc.text[span[0] : span[1]],
        tuple((int(a), int(b)) for a, b in spans),
        None if sims is None else np.asarray(sims, dtype=np.float32),
        (int(spans[landmark][0]), int(spans[landmark][1])),
        similarity,
    )
