"""Which landmark of a retrieved document is the passage that answers the query.

The document's score is MaxSim (its best landmark), as the index ranks it. ``region`` (the
default) scores each landmark by its own similarity blended half and half with the mean over its
neighbourhood (``radius`` landmarks on each side, clipped at the document's ends) and takes the
best of those: a single landmark can peak on a passing mention of the query's words in another
section, while the passage about the query lifts several neighbouring landmarks at once.
``peak`` takes the single best landmark (for one-sentence answers). Chosen on out-of-domain dev
domains against in-domain sections; the numbers are in the research log ("A passage rule that
keeps in-domain").
"""

from __future__ import annotations

import typing
from typing import Final, Literal

import numpy as np

from .errors import InvalidInputError

#: ``region`` (the default: the landmark whose neighbourhood agrees most) or ``peak`` (the single
#: most similar landmark: for one-sentence answers in short documents).
PassageRule = Literal["peak", "region"]
PASSAGE_RULES: tuple[PassageRule, ...] = typing.get_args(PassageRule)
DEFAULT_PASSAGE_RULE: Final[PassageRule] = "region"
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


def check_passage_rule(rule: object) -> PassageRule:
    """``rule`` if it is one of :data:`PASSAGE_RULES`; else a ValueError naming them."""
    for known in PASSAGE_RULES:
        if rule == known:
            return known
    raise InvalidInputError(f"passage must be one of {PASSAGE_RULES}, got {rule!r}")


def locate_passage(similarities: np.ndarray, rule: str = DEFAULT_PASSAGE_RULE) -> int:
    """Index of the landmark that names the passage under ``rule`` (0 for a document without
    landmarks)."""
    check_passage_rule(rule)
    scores = passage_scores(similarities) if rule == "region" else np.asarray(similarities).reshape(-1)
    return int(np.argmax(scores)) if len(scores) else 0


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
