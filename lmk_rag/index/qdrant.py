"""Qdrant backend: one point per document, a pooled dense vector and a MAX_SIM multivector.

Embedded by default (qdrant-client local mode on a folder), ``location=":memory:"``, or a
server / cluster by ``url`` (+ ``api_key``). Point ids are UUIDv5 of the user's id, which is
kept in the payload with the text, metadata and landmark spans. One point per document makes
every write atomic: a document is visible with all its landmarks or not at all.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..encoder import LMKEncoder
from ..types import Fingerprint, MultiVector
from .base import Hit, MultiVectorIndex, StoredDocument, best_landmark, make_hit

_NAMESPACE = uuid.UUID("6c6d6b2d-7261-6700-8000-000000000001")
POOLED, LANDMARKS = "pooled", "landmarks"
_UPSERT_BATCH = 64


def point_id(doc_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, doc_id))


class QdrantIndex(MultiVectorIndex):
    """LMK documents in Qdrant. Search modes: ``maxsim`` (exact MaxSim over landmarks),
    ``prefetch`` (pooled-vector candidates, then MaxSim rerank) and ``pooled``."""

    def __init__(self, path: str | Path | None = None, *, location: str | None = None, url: str | None = None,
                 api_key: str | None = None, collection: str = "lmk", encoder: LMKEncoder | None = None,
                 prefetch_limit: int = 100, client: Any = None) -> None:
        try:
            from qdrant_client import QdrantClient
        except ImportError as exc:  # pragma: no cover
            raise ImportError("QdrantIndex needs qdrant-client: pip install 'lmk-rag[qdrant]'") from exc
        if sum(x is not None for x in (path, location, url, client)) > 1:
            raise ValueError("give one of path=, location=, url= or client=")
        super().__init__(encoder)
        self.collection = collection
        self.prefetch_limit = prefetch_limit
        try:
            if client is not None:
                self.client = client
            elif url is not None:
                self.client = QdrantClient(url=url, api_key=api_key)
            elif location is not None:
                self.client = QdrantClient(location=location)
            else:
                self.client = QdrantClient(path=str(path or "./lmk_index"))
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise RuntimeError(
                    f"the index folder {str(path)!r} is open in another process (qdrant local mode allows one); "
                    "close that process, or use a Qdrant server via url="
                ) from exc
            raise
        self._ensure_collections()

    # ---------------------------------------------------------------- set-up
    def _ensure_collections(self) -> None:
        from qdrant_client import models

        dim = self.encoder.dimension
        if not self.client.collection_exists(self.collection):
            self.client.create_collection(
                self.collection,
                vectors_config={
                    POOLED: models.VectorParams(size=dim, distance=models.Distance.COSINE),
                    LANDMARKS: models.VectorParams(
                        size=dim, distance=models.Distance.COSINE,
                        multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
                    ),
                },
            )
        meta = f"{self.collection}__lmk_meta"
        stored = None
        if self.client.collection_exists(meta):
            points = self.client.retrieve(meta, ids=[point_id("fingerprint")], with_payload=True)
            if points:
                stored = Fingerprint.from_dict(points[0].payload["fingerprint"])
        else:
            self.client.create_collection(meta, vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT))
        self._check_fingerprint(stored)

    def _write_fingerprint(self, fp: Fingerprint) -> None:
        from qdrant_client import models

        self.client.upsert(f"{self.collection}__lmk_meta", points=[
            models.PointStruct(id=point_id("fingerprint"), vector=[1.0], payload={"fingerprint": fp.to_dict()})
        ])

    def close(self) -> None:
        self.client.close()

    # ---------------------------------------------------------------- writes
    def _upsert(self, ids: list[str], texts: list[str], metas: list[dict], multis: list[MultiVector]) -> None:
        from qdrant_client import models

        points = [
            models.PointStruct(
                id=point_id(doc_id),
                vector={POOLED: mv.pooled.tolist(), LANDMARKS: mv.vectors.tolist()},
                payload={"doc_id": doc_id, "text": text, "metadata": meta, "spans": [list(s) for s in mv.spans]},
            )
            for doc_id, text, meta, mv in zip(ids, texts, metas, multis)
        ]
        for start in range(0, len(points), _UPSERT_BATCH):
            self.client.upsert(self.collection, points=points[start : start + _UPSERT_BATCH], wait=True)

    def _delete(self, ids: list[str]) -> None:
        from qdrant_client import models

        self.client.delete(self.collection, points_selector=models.PointIdsList(points=[point_id(i) for i in ids]))

    # ---------------------------------------------------------------- reads
    @staticmethod
    def _document(payload: dict[str, Any]) -> StoredDocument:
        return StoredDocument(payload["doc_id"], payload["text"], payload.get("metadata") or {},
                              [tuple(s) for s in payload.get("spans", [])])

    def _get(self, ids: list[str]) -> list[StoredDocument]:
        points = self.client.retrieve(self.collection, ids=[point_id(i) for i in ids], with_payload=True)
        by_id = {p.payload["doc_id"]: self._document(p.payload) for p in points}
        return [by_id[i] for i in ids if i in by_id]

    def _ids(self) -> list[str]:
        out, offset = [], None
        while True:
            points, offset = self.client.scroll(self.collection, limit=1000, offset=offset, with_payload=["doc_id"])
            out += [p.payload["doc_id"] for p in points]
            if offset is None:
                return out

    def _count(self) -> int:
        return self.client.count(self.collection, exact=True).count

    def _filter(self, where: dict):
        from qdrant_client import models

        if not where:
            return None
        return models.Filter(must=[
            models.FieldCondition(key=f"metadata.{key}", match=models.MatchValue(value=value))
            for key, value in where.items()
        ])

    def _search(self, q: np.ndarray, k: int, where: dict, mode: str, neighbours: int) -> list[Hit]:
        from qdrant_client import models

        flt = self._filter(where)
        if mode == "pooled":
            result = self.client.query_points(self.collection, query=q.tolist(), using=POOLED, limit=k,
                                              query_filter=flt, with_payload=True, with_vectors=[LANDMARKS])
        else:
            prefetch = None
            if mode == "prefetch":
                prefetch = models.Prefetch(query=q.tolist(), using=POOLED, limit=max(self.prefetch_limit, k),
                                           filter=flt)
            result = self.client.query_points(self.collection, query=[q.tolist()], using=LANDMARKS, limit=k,
                                              prefetch=prefetch, query_filter=flt, with_payload=True,
                                              with_vectors=[LANDMARKS])
        hits = []
        for point in result.points:
            vectors = np.asarray(point.vector[LANDMARKS], dtype=np.float32)
            hits.append(make_hit(self._document(point.payload), point.score, best_landmark(q, vectors), neighbours))
        return hits
