"""Metadata filters: one small language every backend speaks the same way.

A filter is a dict, the form LangChain, Chroma and MongoDB users already write::

    {"lang": "en"}                                   # equality
    {"year": {"$gte": 2020, "$lt": 2025}}            # ranges (numbers only)
    {"lang": {"$in": ["en", "de"]}, "draft": False}  # several keys: all must hold
    {"$or": [{"lang": "en"}, {"year": {"$gt": 2024}}]}

Operators: ``$eq $ne $in $nin $gt $gte $lt $lte`` on a key, ``$and $or`` over lists of filters.
The semantics are the same on every backend (one test suite checks them): numbers compare by
value (``3 == 3.0``), a bool is not a number, ``$ne``/``$nin`` also match documents that lack
the key, ranges and ``$in`` never match a missing key.

:func:`parse_filter` checks a filter once and turns it into a small tree (:data:`FilterNode`);
each backend translates the tree (:func:`to_chroma_where` here, :func:`to_qdrant_filter` through
the store's own filter classes). A Qdrant ``models.Filter`` is passed through to the Qdrant
backends (:class:`NativeFilter`) for users who already write them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypeVar

from ..errors import InvalidInputError, InvalidTypeError

if TYPE_CHECKING:
    from qdrant_client.http.models import Filter as QdrantFilter

Scalar = str | int | float | bool
ValueKind = Literal["bool", "number", "str"]
EQUALITY_OPERATORS = ("$eq", "$ne")
SET_OPERATORS = ("$in", "$nin")
RANGE_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
FIELD_OPERATORS = EQUALITY_OPERATORS + SET_OPERATORS + RANGE_OPERATORS
LOGICAL_OPERATORS = ("$and", "$or")
# Every backend stores and filters such keys alike (Qdrant quotes them in its JSON paths, where '"'
# and '\' cannot go).
METADATA_KEY_RULE = "metadata keys must be non-empty str, without '\"' or '\\', not starting with '_lmk'"
# Every backend compares numbers as 64-bit floats, which hold every int up to 2**53 exactly: a larger
# int would match its neighbours, so it is refused (stored and filtered as a str, it stays exact).
INT_RANGE = (-(2**53), 2**53)
# Limits every filter meets before any backend sees it: nesting (Python's recursion, Chroma's parser),
# values in one filter, and values of mixed types in one $in / $nin (Chroma needs one condition each).
MAX_FILTER_DEPTH = 32
MAX_FILTER_VALUES = 10_000
MAX_MIXED_SET_VALUES = 100
FILTER_EXAMPLE = '{"lang": "en", "year": {"$gte": 2020}} or {"$or": [{"lang": "en"}, {"lang": "de"}]}'


@dataclass(frozen=True)
class Condition:
    """``key <op> value``: ``value`` is a tuple for ``$in``/``$nin``, a number for ranges."""

    key: str
    op: str
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class Junction:
    """All (``$and``) or any (``$or``) of ``parts``."""

    op: Literal["$and", "$or"]
    parts: tuple[FilterNode, ...]


@dataclass(frozen=True)
class NativeFilter:
    """A backend's own filter object, passed through untouched (``backend`` names who can run it)."""

    backend: Literal["qdrant"]
    value: QdrantFilter


FilterNode = Condition | Junction
#: What a search accepts: a dict filter (checked by :func:`parse_filter`), a Qdrant ``models.Filter``
#: (Qdrant indexes), or None for no filter.
FilterArg: TypeAlias = "Mapping[str, object] | QdrantFilter | None"
ParsedFilter = FilterNode | NativeFilter | None


def valid_metadata_key(key: object) -> bool:
    """True for a key every backend stores and filters alike (see METADATA_KEY_RULE)."""
    return isinstance(key, str) and bool(key) and not key.startswith("_lmk") and '"' not in key and "\\" not in key


def check_int_range(value: int, name: str) -> None:
    """Refuse an int the stores would not compare exactly (beyond +-2**53), naming ``name``."""
    if not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise InvalidInputError(
            f"{name} is {value}: integers must lie within +-2**53 (every store compares numbers as 64-bit "
            "floats, exact up to there); store and filter it as a str"
        )


def parse_filter(where: object) -> ParsedFilter:
    """The checked tree of a filter (see the module docstring); None for no filter.

    Raises :class:`InvalidInputError` / :class:`InvalidTypeError` naming the part that is wrong and
    what is allowed there."""
    if where is None:
        return None
    if _is_qdrant_filter(where):
        return NativeFilter("qdrant", where)  # type: ignore[arg-type]  # its class checked by name: the module is optional
    if not isinstance(where, Mapping):
        raise InvalidTypeError(
            f"filter must be a dict such as {FILTER_EXAMPLE} (or a Qdrant models.Filter on a Qdrant index), "
            f"got {type(where).__name__}"
        )
    if not where:
        return None
    node = _parse_mapping(where, "filter", 1)
    values = sum(len(c.value) if isinstance(c.value, tuple) else 1 for c in conditions(node))
    if values > MAX_FILTER_VALUES:
        raise InvalidInputError(
            f"filter holds {values} values; at most {MAX_FILTER_VALUES} are allowed in one filter: narrow it, or "
            "filter on a metadata key the documents share"
        )
    return node


def _is_qdrant_filter(value: object) -> bool:
    kind = type(value)
    return kind.__name__ == "Filter" and kind.__module__.startswith("qdrant_client")


def _parse_mapping(where: Mapping[Any, Any], at: str, depth: int) -> FilterNode:
    if depth > MAX_FILTER_DEPTH:
        raise InvalidInputError(
            f"filter is nested more than {MAX_FILTER_DEPTH} levels deep (at {at[:80]}...); write it flatter: "
            "$and / $or take lists of any length"
        )
    parts: list[FilterNode] = []
    for key, value in where.items():
        if key in LOGICAL_OPERATORS:
            parts.append(_parse_junction(key, value, f"{at}[{key!r}]", depth))
        elif isinstance(key, str) and key.startswith("$"):
            raise InvalidInputError(
                f"{at} has the operator {key!r} where a metadata key or one of {LOGICAL_OPERATORS} goes; "
                f"operators on a key go inside its dict: {{'key': {{'$in': [...]}}}}"
            )
        elif not valid_metadata_key(key):
            raise InvalidInputError(f"{at}: {METADATA_KEY_RULE}, got {key!r}")
        elif isinstance(value, Mapping):
            parts.extend(_parse_operators(key, value, f"{at}[{key!r}]"))
        else:
            parts.append(Condition(key, "$eq", _scalar(value, f"{at}[{key!r}]")))
    if not parts:
        raise InvalidInputError(f"{at} is empty; give at least one condition, e.g. {FILTER_EXAMPLE}")
    return parts[0] if len(parts) == 1 else Junction("$and", tuple(parts))


def _parse_junction(op: Literal["$and", "$or"], value: object, at: str, depth: int) -> FilterNode:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or not value:
        raise InvalidTypeError(f"{at} must be a non-empty list of filters, got {value!r}")
    parts = []
    for i, part in enumerate(value):
        if not isinstance(part, Mapping) or not part:
            raise InvalidTypeError(f"{at}[{i}] must be a non-empty dict filter, got {part!r}")
        parts.append(_parse_mapping(part, f"{at}[{i}]", depth + 1))
    return parts[0] if len(parts) == 1 else Junction(op, tuple(parts))


def _parse_operators(key: str, ops: Mapping[Any, Any], at: str) -> list[FilterNode]:
    if not ops:
        raise InvalidInputError(f"{at} is an empty dict; give an operator, one of {FIELD_OPERATORS}")
    out: list[FilterNode] = []
    for op, value in ops.items():
        where = f"{at}[{op!r}]"
        if op in EQUALITY_OPERATORS:
            out.append(Condition(key, op, _scalar(value, where)))
        elif op in SET_OPERATORS:
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or not value:
                raise InvalidTypeError(f"{where} must be a non-empty list of str, int, float or bool, got {value!r}")
            values = tuple(_scalar(v, f"{where}[{i}]") for i, v in enumerate(value))
            if len({value_kind(v) for v in values}) > 1 and len(values) > MAX_MIXED_SET_VALUES:
                raise InvalidInputError(
                    f"{where} mixes value types ({len(values)} values); a list of mixed types may hold at most "
                    f"{MAX_MIXED_SET_VALUES}: give one list per type, e.g. {{'$or': [{{'{key}': {{'{op}': [strs]}}}}, "
                    f"{{'{key}': {{'{op}': [numbers]}}}}]}}"
                )
            out.append(Condition(key, op, values))
        elif op in RANGE_OPERATORS:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidTypeError(f"{where} compares numbers; give an int or float, got {value!r}")
            out.append(Condition(key, op, _scalar(value, where)))
        else:
            raise InvalidInputError(f"{where}: unknown operator {op!r}; allowed: {', '.join(FIELD_OPERATORS)}")
    return out


def _scalar(value: object, at: str) -> Scalar:
    if not isinstance(value, (str, int, float, bool)):
        raise InvalidTypeError(f"{at} must be str, int, float or bool, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{at} is {value}; give a finite number")
    if isinstance(value, int):
        check_int_range(value, at)
    return value


def conditions(node: ParsedFilter) -> Iterator[Condition]:
    """Every condition in the tree (none for a native filter)."""
    if isinstance(node, Condition):
        yield node
    elif isinstance(node, Junction):
        for part in node.parts:
            yield from conditions(part)


def value_kind(value: Scalar) -> ValueKind:
    """How a value compares: a bool is not a number, an int and a float compare by value."""
    return "bool" if isinstance(value, bool) else "str" if isinstance(value, str) else "number"


def field_kinds(node: ParsedFilter) -> Iterator[tuple[str, ValueKind]]:
    """(key, kind of value) for each condition: what a payload index on the key must hold."""
    for cond in conditions(node):
        values = cond.value if isinstance(cond.value, tuple) else (cond.value,)
        for value in values:
            yield cond.key, value_kind(value)


# ---------------------------------------------------------------- Chroma


def to_chroma_where(node: FilterNode) -> dict[str, Any]:
    """The Chroma ``where`` of a filter (Chroma's own operators; a mixed-type ``$in`` is split,
    since Chroma wants the values of one list to share a type)."""
    if isinstance(node, Junction):
        return {node.op: [to_chroma_where(p) for p in node.parts]}
    if node.op in SET_OPERATORS:
        values = node.value if isinstance(node.value, tuple) else (node.value,)
        kinds = {value_kind(v) for v in values}
        if len(kinds) > 1 or (kinds == {"number"} and len({type(v) for v in values}) > 1):
            single = "$eq" if node.op == "$in" else "$ne"
            return {"$or" if node.op == "$in" else "$and": [{node.key: {single: v}} for v in values]}
        return {node.key: {node.op: list(values)}}
    return {node.key: {node.op: node.value}}


# ---------------------------------------------------------------- Qdrant


Cond = TypeVar("Cond")  # one Qdrant API's field condition class
Flt = TypeVar("Flt")  # and its filter class


class QdrantFilterVocabulary(Protocol[Cond, Flt]):
    """The filter classes of one Qdrant API (qdrant-client models or qdrant-edge-py): conditions
    of type ``Cond`` and filters of type ``Flt``, which nest."""

    def match(self, key: str, value: str | bool) -> Cond:
        """A condition that the payload at ``key`` equals ``value``."""

    def match_any(self, key: str, values: list[str]) -> Cond:
        """A condition that the payload at ``key`` is one of ``values``."""

    def range(self, key: str, **bounds: float) -> Cond:
        """A numeric range condition on ``key`` (``gt``, ``gte``, ``lt``, ``lte``)."""

    def filter(
        self,
        must: Sequence[Cond | Flt] | None = None,
        should: Sequence[Cond | Flt] | None = None,
        must_not: Sequence[Cond | Flt] | None = None,
    ) -> Flt:
        """A filter of conditions that must all, should (any), or must not hold."""


def to_qdrant_filter(node: FilterNode, vocab: QdrantFilterVocabulary[Cond, Flt], path: Callable[[str], str]) -> Flt:
    """A Qdrant filter of the tree; ``path(key)`` gives a metadata key's payload path. Numbers
    are matched by ranges (so 3 finds 3.0, and one float payload index serves every number)."""
    return vocab.filter(must=[_qdrant_condition(node, vocab, path)])


def _qdrant_condition(
    node: FilterNode, vocab: QdrantFilterVocabulary[Cond, Flt], path: Callable[[str], str]
) -> Cond | Flt:
    if isinstance(node, Junction):
        parts = [_qdrant_condition(p, vocab, path) for p in node.parts]
        return vocab.filter(must=parts) if node.op == "$and" else vocab.filter(should=parts)
    key = path(node.key)
    if node.op in RANGE_OPERATORS:
        return vocab.range(key, **{node.op[1:]: float(node.value)})  # type: ignore[arg-type]
    values = node.value if isinstance(node.value, tuple) else (node.value,)
    found: Cond | Flt
    if all(isinstance(v, str) for v in values) and len(values) > 1:
        found = vocab.match_any(key, [str(v) for v in values])
    else:
        options = [_qdrant_equal(key, v, vocab) for v in values]
        found = options[0] if len(options) == 1 else vocab.filter(should=options)
    return vocab.filter(must_not=[found]) if node.op in ("$ne", "$nin") else found


def _qdrant_equal(key: str, value: Scalar, vocab: QdrantFilterVocabulary[Cond, Flt]) -> Cond:
    if value_kind(value) == "number":
        return vocab.range(key, gte=float(value), lte=float(value))
    return vocab.match(key, value)  # type: ignore[arg-type]
