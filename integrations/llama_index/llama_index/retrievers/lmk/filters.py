"""LlamaIndex ``MetadataFilters`` in lmk-rag's filter language (:mod:`lmk_rag.index.filters`)."""

from __future__ import annotations

from collections.abc import Mapping

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from lmk_rag.errors import InvalidInputError, InvalidTypeError
from lmk_rag.index import FilterArg

_OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
_CONDITIONS = {FilterCondition.AND: "$and", FilterCondition.OR: "$or"}


def to_lmk_filter(filters: MetadataFilters | Mapping[str, object] | None) -> FilterArg:
    """lmk-rag's filter (:mod:`lmk_rag.index.filters`) for LlamaIndex ``MetadataFilters``; a dict
    (or a Qdrant ``models.Filter``) is passed on as it is. EQ, NE, GT, GTE, LT, LTE, IN, NIN under
    AND / OR, nested; other operators are refused with the list of those that work."""
    if filters is None or not isinstance(filters, MetadataFilters):
        return filters
    parts = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            parts.append(to_lmk_filter(item))
            continue
        if not isinstance(item, MetadataFilter):
            raise InvalidTypeError(f"filters hold MetadataFilter or MetadataFilters, got {type(item).__name__}")
        if item.operator not in _OPERATORS:
            allowed = ", ".join(op.name for op in _OPERATORS)
            raise InvalidInputError(
                f"filter operator {item.operator.name} ({item.key!r}) is not supported by lmk-rag; allowed: {allowed}"
            )
        parts.append({item.key: {_OPERATORS[item.operator]: item.value}})
    if filters.condition not in _CONDITIONS:
        raise InvalidInputError(
            f"filter condition {filters.condition} is not supported by lmk-rag; use AND or OR "
            "(negate single filters with NE / NIN)"
        )
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {_CONDITIONS[filters.condition]: parts}
