"""What the context builder takes and gives: candidates, its rule, passages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..encoding.inputs import check_int, check_number
from ..types import Metadata, PagedSpan


@dataclass(frozen=True)
class Passage(PagedSpan):
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
    def metadata(self) -> Metadata:
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
    """How passages are chosen from landmark scores (see :mod:`lmk_rag.context`).

    Cover: up to ``seeds`` passages are placed, best landmark first, before any passage widens
    (while they take under ``cover_share`` of the budget). Widen: a landmark next to a chosen
    passage then counts ``widen_bonus`` more (in standard deviations of the candidates' landmark
    scores) than a new seed, up to ``width`` landmarks a passage. A landmark's value blends its own
    score with its neighbourhood's (``peak_weight``, see :func:`lmk_rag.passages.passage_scores`)
    and, by ``rank_weight``, its document's place in the ranking; ``lexical_weight`` fuses BM25 of
    its text. Ends move to sentence boundaries within ``snap_chars``. No passage is shorter than
    ``min_passage_tokens`` unless its whole document is, or it is the context's only one."""

    width: int = 8
    lexical_weight: float = 0.2
    rank_weight: float = 0.6
    snap_chars: int = 200
    seeds: int = 12
    cover_share: float = 0.6
    widen_bonus: float = 1.5
    min_passage_tokens: int = 16
    peak_weight: float = 0.5

    def __post_init__(self) -> None:
        for name in ("width", "seeds", "min_passage_tokens", "snap_chars"):
            value = getattr(self, name)
            low = 0 if name in ("snap_chars", "seeds", "min_passage_tokens") else 1
            check_int(name, value, low)
        for name in ("lexical_weight", "rank_weight", "peak_weight", "cover_share"):
            check_number(name, getattr(self, name), 0, 1)
        check_number("widen_bonus", self.widen_bonus)


DEFAULT_RULE = ContextRule()
#: The context's token budget when none is given: a few passages, a small share of an LLM's window.
DEFAULT_MAX_TOKENS = 512
#: Documents searched for a context when ``k`` is not given.
CONTEXT_DOCUMENTS = 10
