"""What the context builder takes and gives: candidates, its rule, passages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import InvalidInputError


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
