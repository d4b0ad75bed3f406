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
from ..errors import IndexUnavailableError, InvalidInputError, MissingDependencyError
from ..types import Fingerprint, MultiVector
from .base import Hit, MultiVectorIndex, StoredDocument, best_landmark, make_hit

_NAMESPACE = uuid.UUID("6c6d6b2d-7261-6700-8000-000000000001")
POOLED, LANDMARKS = "pooled", "landmarks"
_UPSERT_BATCH = 64


DEFAULT_PATH = "./lmk_index"


def point_id(doc_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, doc_id))


def _open_folder(folder: Path) -> Any:
    """qdrant-client local mode on ``folder``, with errors that say what to change."""
    from qdrant_client import QdrantClient

    if folder.exists() and not folder.is_dir():
        raise IndexUnavailableError(f"the index path {str(folder)!r} is a file; give a folder for qdrant:PATH")
    try:
        return QdrantClient(path=str(folder))
    except RuntimeError as exc:
        if "already accessed" in str(exc):
            raise IndexUnavailableError(
                f"the index folder {str(folder)!r} is open in another process (qdrant local mode allows one); "
                "close that process, or use a Qdrant server via url="
            ) from exc
        raise
    except OSError as exc:
        raise IndexUnavailableError(f"cannot open the index folder {str(folder)!r}: {exc}") from exc


def stored_fingerprint(client: Any, collection: str) -> Fingerprint | None:
    """The fingerprint kept beside ``collection``, or None where there is none yet."""
    meta = f"{collection}__lmk_meta"
    if not client.collection_exists(meta):
        return None
    points = client.retrieve(meta, ids=[point_id("fingerprint")], with_payload=True)
    return Fingerprint.from_dict(points[0].payload["fingerprint"]) if points and points[0].payload else None


def _is_connection_error(exc: BaseException) -> bool:
    """True for the transport errors qdrant-client raises when no server answers."""
    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (httpx.TransportError, ConnectionError)) or type(seen).__name__ in (
            "ResponseHandlingException",
            "_InactiveRpcError",
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def payload_key(key: str) -> str:
    """The JSON path of a metadata key, quoted so '.', '[', ':' and spaces are part of the name."""
    return f'metadata."{key}"'


class QdrantIndex(MultiVectorIndex):
    """LMK documents in Qdrant. Search modes: ``maxsim`` (exact MaxSim over landmarks),
    ``prefetch`` (pooled-vector candidates, then MaxSim rerank) and ``pooled``."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        location: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        collection: str = "lmk",
        encoder: LMKEncoder | None = None,
        prefetch_limit: int = 100,
        client: Any = None,
    ) -> None:
        try:
            from qdrant_client import QdrantClient
        except ImportError as exc:  # pragma: no cover
            raise MissingDependencyError("QdrantIndex needs qdrant-client: pip install 'lmk-rag[qdrant]'") from exc
        if sum(x is not None for x in (path, location, url, client)) > 1:
            raise InvalidInputError("give one of path=, location=, url= or client=")
        super().__init__(encoder)
        self.collection = collection
        self.prefetch_limit = prefetch_limit
        self.where = url or location or ("a given client" if client is not None else str(path or DEFAULT_PATH))
        self.folder = Path(path or DEFAULT_PATH) if url is None and location is None and client is None else None
        if client is not None:
            self.client = client
        elif url is not None:
            self.client = QdrantClient(url=url, api_key=api_key)
        elif location is not None:
            self.client = QdrantClient(location=location)
        else:
            self.client = _open_folder(Path(path or DEFAULT_PATH))
        try:
            self._ensure_collections()
        except Exception as exc:
            if url is not None and _is_connection_error(exc):
                self.client.close()
                raise IndexUnavailableError(
                    f"cannot reach the Qdrant server at {url} ({type(exc).__name__}: {exc}); start it, "
                    "or check the URL and API key"
                ) from exc
            raise

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
                        size=dim,
                        distance=models.Distance.COSINE,
                        multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
                    ),
                },
            )
        meta = f"{self.collection}__lmk_meta"
        stored = stored_fingerprint(self.client, self.collection)
        if not self.client.collection_exists(meta):
            self.client.create_collection(
                meta, vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT)
            )
        self._check_fingerprint(stored)

    def _write_fingerprint(self, fp: Fingerprint) -> None:
        from qdrant_client import models

        self.client.upsert(
            f"{self.collection}__lmk_meta",
            points=[
                models.PointStruct(id=point_id("fingerprint"), vector=[1.0], payload={"fingerprint": fp.to_dict()})
            ],
        )

    def _translate_error(self, exc: Exception) -> Exception:
        if _is_connection_error(exc):
            return IndexUnavailableError(f"lost the Qdrant server at {self.where} ({exc}); start it and run again")
        return exc

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
        return StoredDocument(
            payload["doc_id"],
            payload["text"],
            payload.get("metadata") or {},
            [tuple(s) for s in payload.get("spans", [])],
        )

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
        return models.Filter(
            must=[
                models.FieldCondition(key=payload_key(key), match=models.MatchValue(value=value))
                for key, value in where.items()
            ]
        )

    def _search(self, q: np.ndarray, k: int, where: dict, mode: str, neighbours: int) -> list[Hit]:
        from qdrant_client import models

        flt = self._filter(where)
        if mode == "pooled":
            result = self.client.query_points(
                self.collection,
                query=q.tolist(),
                using=POOLED,
                limit=k,
                query_filter=flt,
                with_payload=True,
                with_vectors=[LANDMARKS],
            )
        else:
            prefetch = None
            if mode == "prefetch":
                prefetch = models.Prefetch(
                    query=q.tolist(), using=POOLED, limit=max(self.prefetch_limit, k), filter=flt
                )
            result = self.client.query_points(
                self.collection,
                query=[q.tolist()],
                using=LANDMARKS,
                limit=k,
                prefetch=prefetch,
                query_filter=flt,
                with_payload=True,
                with_vectors=[LANDMARKS],
            )
        hits = []
        for point in result.points:
            vectors = np.asarray(point.vector[LANDMARKS], dtype=np.float32)
            hits.append(make_hit(self._document(point.payload), point.score, best_landmark(q, vectors), neighbours))
        return hits
