"""qdrant-edge-py's filter classes behind the vocabulary :func:`~lmk_rag.index.filters.to_qdrant_filter`
speaks, and the embedded twin of a qdrant-client ``models.Filter``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidInputError

if TYPE_CHECKING:
    from qdrant_client.http.models import Filter as QdrantFilter
    from qdrant_edge import ConditionType, FieldCondition, Filter


class EdgeFilters:
    """qdrant-edge-py's filter classes, for :func:`~lmk_rag.index.filters.to_qdrant_filter`."""

    def match(self, key: str, value: str | int | bool) -> FieldCondition:
        """A condition: ``key`` equals ``value``."""
        from qdrant_edge import FieldCondition, MatchValue

        # qdrant-edge-py 0.9 reads a Python bool as the int 1/0 (matching nothing); numpy's stays a bool.
        exact = np.bool_(value) if isinstance(value, bool) else value
        return FieldCondition(key=key, match=MatchValue(exact))  # type: ignore[arg-type]  # np.bool_, see above

    def match_any(self, key: str, values: list[str] | list[int]) -> FieldCondition:
        """A condition: ``key`` equals one of ``values``."""
        from qdrant_edge import FieldCondition, MatchAny

        return FieldCondition(key=key, match=MatchAny(values))

    def range(self, key: str, **bounds: float) -> FieldCondition:
        """A condition: ``key`` within the bounds given (gt, gte, lt, lte)."""
        from qdrant_edge import FieldCondition, RangeFloat

        return FieldCondition(key=key, range=RangeFloat(**bounds))

    def filter(
        self,
        must: Sequence[FieldCondition | Filter] | None = None,
        should: Sequence[FieldCondition | Filter] | None = None,
        must_not: Sequence[FieldCondition | Filter] | None = None,
    ) -> Filter:
        """A filter of conditions that must all, should (one of) and must not hold."""
        from qdrant_edge import Filter

        def conditions(given: Sequence[FieldCondition | Filter] | None) -> list[ConditionType] | None:
            return None if given is None else list(given)

        return Filter(must=conditions(must), should=conditions(should), must_not=conditions(must_not))


def from_client_filter(flt: QdrantFilter, vocab: EdgeFilters) -> Filter:
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
                return vocab.match_any(c.key, c.match.any)
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
