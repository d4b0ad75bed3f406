"""qdrant-edge-py's filter classes behind the vocabulary :func:`~lmk_rag.index.filters.to_qdrant_filter`
speaks, and the embedded twin of a qdrant-client ``models.Filter``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidInputError


def _edge() -> Any:
    import qdrant_edge

    return qdrant_edge


class EdgeFilters:
    """qdrant-edge-py's filter classes, for :func:`~lmk_rag.index.filters.to_qdrant_filter`."""

    def __init__(self) -> None:
        self.e = _edge()

    def match(self, key: str, value: str | int | bool) -> Any:
        # qdrant-edge-py 0.9 reads a Python bool as the int 1/0 (matching nothing); numpy's stays a bool.
        """A condition: ``key`` equals ``value``."""
        return self.e.FieldCondition(
            key=key, match=self.e.MatchValue(np.bool_(value) if isinstance(value, bool) else value)
        )

    def match_any(self, key: str, values: list[Any]) -> Any:
        """A condition: ``key`` equals one of ``values``."""
        return self.e.FieldCondition(key=key, match=self.e.MatchAny(values))

    def range(self, key: str, **bounds: float) -> Any:
        """A condition: ``key`` within the bounds given (gt, gte, lt, lte)."""
        return self.e.FieldCondition(key=key, range=self.e.RangeFloat(**bounds))

    def filter(
        self, must: list[Any] | None = None, should: list[Any] | None = None, must_not: list[Any] | None = None
    ) -> Any:
        """A filter of conditions that must all, should (one of) and must not hold."""
        return self.e.Filter(must=must, should=should, must_not=must_not)


def from_client_filter(flt: Any, vocab: EdgeFilters) -> Any:
    """The embedded store's twin of a qdrant-client ``models.Filter`` (must / should / must_not,
    nested filters, and field conditions that match a value, any of some values, or a range)."""
    from qdrant_client import models

    def condition(c: Any) -> Any:
        if isinstance(c, models.Filter):
            return from_client_filter(c, vocab)
        if isinstance(c, models.FieldCondition):
            if isinstance(c.match, models.MatchValue) and c.range is None:
                return vocab.match(c.key, c.match.value)
            if isinstance(c.match, models.MatchAny) and c.range is None:
                return vocab.match_any(c.key, list(c.match.any))
            if c.match is None and isinstance(c.range, models.Range):
                bounds = {b: getattr(c.range, b) for b in ("gt", "gte", "lt", "lte") if getattr(c.range, b) is not None}
                return vocab.range(c.key, **bounds)
        raise InvalidInputError(
            f"the embedded Qdrant store runs Filter(must/should/must_not) of nested Filters and FieldConditions "
            f"with MatchValue, MatchAny or Range; got {c!r}. Use a dict filter, or a Qdrant server (url=)"
        )

    def parts(items: Any) -> list[Any] | None:
        if items is None:
            return None
        return [condition(c) for c in (items if isinstance(items, list) else [items])]

    if flt.min_should is not None:
        raise InvalidInputError("the embedded Qdrant store does not run min_should; use a Qdrant server (url=)")
    return vocab.filter(must=parts(flt.must), should=parts(flt.should), must_not=parts(flt.must_not))
