"""Metadata filters: one language, the same answers from every backend, clear refusals."""

from __future__ import annotations

from typing import Any

import pytest

from lmk_rag.index.filters import Condition, Junction, NativeFilter, parse_filter, to_chroma_where

DOCS = {
    "a": {"lang": "en", "price": 3, "draft": False, "year": 2024},
    "b": {"lang": "de", "price": 2.5, "draft": True},
    "c": {"lang": "fr"},
    "d": {"lang": "en", "price": 10, "draft": False, "year": 2025},
    "e": {"lang": "de", "price": 0.5, "year": 2023},
    "f": {"lang": None, "price": True},  # None is "no value"; a bool is not a number
}
TEXT = "Notes on item {} for the catalogue."

FILTERS: list[dict[str, Any]] = [
    {"price": 3},  # first a filter with an int: the payload index must still find floats after it
    {"price": 2.5},
    {"price": 3.0},
    {"lang": "en"},
    {"lang": {"$eq": "en"}, "draft": False},
    {"lang": {"$ne": "en"}},
    {"lang": {"$in": ["en", "fr"]}},
    {"lang": {"$nin": ["en"]}},
    {"lang": {"$in": ["fr"]}},
    {"price": {"$gt": 2}},
    {"price": {"$gte": 2.5, "$lt": 10}},
    {"price": {"$lte": 3}},
    {"price": {"$in": [3, 2.5]}},
    {"price": {"$nin": [3, 0.5]}},
    {"price": {"$ne": 3}},
    {"price": True},
    {"draft": False},
    {"draft": {"$ne": True}},
    {"year": {"$in": [2024, 2025]}},
    {"lang": {"$in": ["en", 3]}},
    {"$or": [{"lang": "fr"}, {"price": {"$gt": 5}}]},
    {"$and": [{"lang": "en"}, {"price": {"$lt": 5}}]},
    {"$or": [{"$and": [{"lang": "de"}, {"draft": True}]}, {"year": 2023}]},
    {"$or": [{"lang": "fr"}]},
    {"lang": "it"},
]


def _kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "str" if isinstance(value, str) else "number"


def _equal(meta: dict[str, Any], key: str, value: Any) -> bool:
    have = meta.get(key)
    return have is not None and _kind(have) == _kind(value) and have == value


def reference(node: Any, meta: dict[str, Any]) -> bool:
    """What a filter means, written plainly: the answer every backend must give."""
    if isinstance(node, Junction):
        results = [reference(p, meta) for p in node.parts]
        return all(results) if node.op == "$and" else any(results)
    values = node.value if isinstance(node.value, tuple) else (node.value,)
    if node.op in ("$eq", "$in"):
        return any(_equal(meta, node.key, v) for v in values)
    if node.op in ("$ne", "$nin"):
        return not any(_equal(meta, node.key, v) for v in values)
    have = meta.get(node.key)
    if have is None or _kind(have) != "number":
        return False
    return {"$gt": have > node.value, "$gte": have >= node.value, "$lt": have < node.value, "$lte": have <= node.value}[
        node.op
    ]


@pytest.fixture()
def catalogue(make_index):
    idx = make_index()
    idx.add([TEXT.format(i) for i in DOCS], ids=list(DOCS), metadatas=list(DOCS.values()))
    return idx


def test_every_backend_gives_the_reference_answer(catalogue):
    for where in FILTERS:
        expected = {doc for doc, meta in DOCS.items() if reference(parse_filter(where), meta)}
        for mode in catalogue.modes:
            found = {h.id for h in catalogue.search("catalogue notes", k=10, filter=where, mode=mode)}
            assert found == expected, (where, mode)
        assert set(catalogue.ids(where)) == expected, where
    assert {p.id for p in catalogue.context("catalogue", 256, filter={"lang": {"$in": ["de"]}})} == {"b", "e"}
    assert sorted(catalogue.ids()) == sorted(DOCS)


def test_filters_are_parsed_into_one_tree():
    assert parse_filter(None) is None and parse_filter({}) is None
    assert parse_filter({"lang": "en"}) == Condition("lang", "$eq", "en")
    assert parse_filter({"n": {"$gte": 1, "$lt": 3}}) == Junction(
        "$and", (Condition("n", "$gte", 1), Condition("n", "$lt", 3))
    )
    assert parse_filter({"$or": [{"a": 1}, {"b": {"$in": ["x", "y"]}}]}) == Junction(
        "$or", (Condition("a", "$eq", 1), Condition("b", "$in", ("x", "y")))
    )
    assert to_chroma_where(Condition("p", "$in", (3, 2.5))) == {"$or": [{"p": {"$eq": 3}}, {"p": {"$eq": 2.5}}]}
    assert to_chroma_where(Condition("p", "$nin", ("a", "b"))) == {"p": {"$nin": ["a", "b"]}}


@pytest.mark.parametrize(
    ("where", "error", "message"),
    [
        ({"lang": {"$like": "e%"}}, ValueError, r"unknown operator '\$like'; allowed: \$eq, \$ne, \$in"),
        ({"$not": {"lang": "en"}}, ValueError, r"operator '\$not' where a metadata key or one of \('\$and', '\$or'\)"),
        ({"lang": ["en", "de"]}, TypeError, r"filter\['lang'\] must be str, int, float or bool, got list"),
        ({"lang": {"$in": "en"}}, TypeError, r"\$in'\] must be a non-empty list"),
        ({"lang": {"$in": []}}, TypeError, r"\$in'\] must be a non-empty list"),
        ({"price": {"$gt": "3"}}, TypeError, r"\$gt'\] compares numbers; give an int or float, got '3'"),
        ({"price": {"$lt": True}}, TypeError, "compares numbers"),
        ({"price": float("nan")}, ValueError, "finite number"),
        ({"id": 2**64}, ValueError, r"must lie within \+-2\*\*53"),
        ({"id": 2**53 + 1}, ValueError, r"must lie within \+-2\*\*53"),
        ({"id": {"$in": ["a"] * 60 + [1] * 60}}, ValueError, "mixes value types"),
        ({"id": {"$in": list(range(10_001))}}, ValueError, "filter holds 10001 values"),
        ({"$or": {"lang": "en"}}, TypeError, r"\$or'\] must be a non-empty list of filters"),
        ({"$and": [{}]}, TypeError, r"\$and'\]\[0\] must be a non-empty dict filter"),
        ({"_lmk_doc": "x"}, ValueError, "metadata keys must be"),
        ({"a\\b": "x"}, ValueError, "metadata keys must be"),
        ({"lang": {}}, ValueError, "empty dict; give an operator"),
        ("lang=en", TypeError, "filter must be a dict such as"),
    ],
)
def test_bad_filters_name_what_was_given_and_what_is_allowed(where, error, message):
    with pytest.raises(error, match=message):
        parse_filter(where)


def test_a_qdrant_filter_object_runs_on_qdrant_and_is_refused_elsewhere(catalogue, make_index):
    from qdrant_client import models

    where = models.Filter(
        must=[models.FieldCondition(key="metadata.lang", match=models.MatchAny(any=["en", "fr"]))],
        must_not=[models.FieldCondition(key="metadata.year", range=models.Range(gte=2025))],
    )
    assert isinstance(parse_filter(where), NativeFilter)
    if make_index.kind.startswith("qdrant"):
        assert {h.id for h in catalogue.search("catalogue", k=10, filter=where)} == {"a", "c"}
        assert set(catalogue.ids(where)) == {"a", "c"}
    else:
        with pytest.raises(TypeError, match="a qdrant filter object runs on a qdrant index only; give ChromaIndex"):
            catalogue.search("catalogue", k=10, filter=where)


def test_metadata_the_stores_cannot_keep_faithfully_is_refused_at_add(make_index):
    idx = make_index()
    with pytest.raises(ValueError, match=r"metadatas\[0\]\['big'\] is 9007199254740993: integers must lie"):
        idx.add(["text"], ids=["x"], metadatas=[{"big": 2**53 + 1}])
    with pytest.raises(ValueError, match="metadata keys must be"):
        idx.add(["text"], ids=["x"], metadatas=[{"back\\slash": 1}])
    idx.add(["text", "text"], ids=["x", "y"], metadatas=[{"big": 2**53}, {"big": 2**53 - 1}])
    assert idx.get(["x"])[0].metadata == {"big": 2**53}
    assert idx.ids({"big": 2**53}) == ["x"] and idx.ids({"big": {"$lt": 2**53}}) == ["y"]  # exact, as ints


@pytest.mark.parametrize("depth", [33, 1000])
def test_a_filter_nested_too_deep_is_one_clear_error(depth):
    where: dict = {"lang": "en"}
    for _ in range(depth):
        where = {"$or": [where, {"year": 1}]}
    with pytest.raises(ValueError, match="nested more than 32 levels deep"):
        parse_filter(where)


def test_a_filter_at_the_limits_runs_on_every_backend(make_index):
    idx = make_index()
    idx.add(["alpha text", "beta text"], ids=["a", "b"], metadatas=[{"n": 1, "t": "x"}, {"n": 2, "t": "y"}])
    where: dict = {"n": 1}
    for _ in range(31):  # 32 levels: the deepest allowed
        where = {"$or": [where, {"n": 99}]}
    assert idx.ids(where) == ["a"]
    mixed = {"t": {"$in": [*(f"s{i}" for i in range(50)), *range(100, 150)]}}  # the most mixed values allowed
    assert idx.ids(mixed) == []
    many = {"n": {"$in": list(range(2, 10_002))}}  # the most values allowed
    assert idx.ids(many) == ["b"]
