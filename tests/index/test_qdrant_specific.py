"""Qdrant details: UUIDv5 point ids, payload, folder lock message, prefetch mode."""

from __future__ import annotations

import uuid

import pytest

from lmk_rag.index import QdrantIndex
from lmk_rag.index.qdrant import point_id


def test_point_ids_are_uuid5_and_payload_keeps_the_original(tmp_path, base_encoder):
    idx = QdrantIndex(location=":memory:", encoder=base_encoder)
    idx.add(["some text about tides"], ids=["docs/tides.md#v1"], metadatas=[{"lang": "en"}])
    pid = point_id("docs/tides.md#v1")
    assert uuid.UUID(pid).version == 5
    point = idx.store.client.retrieve(idx.collection, ids=[pid], with_payload=True, with_vectors=True)[0]
    assert point.payload["doc_id"] == "docs/tides.md#v1" and point.payload["metadata"] == {"lang": "en"}
    assert len(point.vector["landmarks"]) == len(point.payload["spans"])


def test_folder_held_by_another_client_says_so(tmp_path, base_encoder):
    first = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    try:
        with pytest.raises(RuntimeError, match="open in another process"):
            QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    finally:
        first.close()
    QdrantIndex(tmp_path / "idx", encoder=base_encoder).close()


def test_one_location_only(base_encoder):
    with pytest.raises(ValueError, match="one of"):
        QdrantIndex("a", location=":memory:", encoder=base_encoder)
