"""The Qdrant store behind ``qdrant-client``: a server or cluster (``url=``), memory
(``location=":memory:"``), or any ``QdrantClient`` given (the benchmarks' reference: its local
mode on a folder). Same collection layout as the embedded Edge store;
the fingerprint lives in the point of a ``<collection>__lmk_meta`` collection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...encoding.inputs import check_int
from ...errors import IncompatibleIndexError, IndexUnavailableError, InvalidInputError
from ...types import Fingerprint
from ..filters import NativeFilter, ParsedFilter, ValueKind, field_kinds, to_qdrant_filter
from .journal import MetaJournal
from .layout import (
    BM25,
    BM25_SETTINGS,
    LANDMARK_DOC,
    LANDMARK_EF_CONSTRUCT,
    LANDMARK_HNSW_M,
    LANDMARK_VECTOR,
    LANDMARKS,
    OVERSAMPLING,
    POOLED,
    Found,
    Plan,
    PointData,
    Quantization,
    found,
    landmark_point_ids,
    landmark_search,
    payload_key,
    point_id,
    unique_documents,
)

if TYPE_CHECKING:
    from qdrant_client import models

from .store import ALL_DOCUMENTS, LandmarkVectors, Record, reconcile_landmarks, stored_landmarks

_UPSERT_BATCH = 64
#: A Qdrant server refuses a multivector of this many floats or more (rows x dimension; a hard
#: limit of its vector storage), so a document may hold fewer landmarks than this / dimension.
MULTIVECTOR_FLOAT_LIMIT = 1_048_576
#: Collection settings a Qdrant cluster needs, fixed when the collection is created.
CLUSTER_OPTIONS = ("shard_number", "replication_factor", "write_consistency_factor", "on_disk")


def check_cluster_options(options: Mapping[str, object]) -> tuple[dict[str, int], bool | None]:
    """The options that were given (not None), checked: (the counts, each an int >= 1; on_disk, a
    bool or None)."""
    counts: dict[str, int] = {}
    on_disk: bool | None = None
    for name, value in options.items():
        if value is None:
            continue
        if name not in CLUSTER_OPTIONS:
            raise InvalidInputError(f"unknown Qdrant collection option {name!r}; use one of {CLUSTER_OPTIONS}")
        if name == "on_disk":
            if not isinstance(value, bool):
                raise InvalidInputError(f"on_disk must be True or False, got {value!r}")
            on_disk = value
        else:
            counts[name] = check_int(name, value)
    return counts, on_disk


def stored_fingerprint(client: Any, collection: str) -> Fingerprint | None:
    """The fingerprint kept beside ``collection``, or None where there is none yet."""
    meta = f"{collection}__lmk_meta"
    if not client.collection_exists(meta):
        return None
    points = client.retrieve(meta, ids=[point_id("fingerprint")], with_payload=True)
    return Fingerprint.from_dict(points[0].payload["fingerprint"]) if points and points[0].payload else None


def server_fingerprint(url: str, api_key: str | None, collection: str) -> Fingerprint | None:
    """The fingerprint a collection on the Qdrant server at ``url`` records (None: no such collection),
    with errors that say what to change when the server refuses or cannot be reached."""
    from qdrant_client import QdrantClient

    client = QdrantClient(url=url, api_key=api_key)
    try:
        return stored_fingerprint(client, collection)
    except Exception as exc:
        refused = auth_error(exc, url)
        if refused is not None:
            raise refused from exc
        if is_connection_error(exc):
            raise IndexUnavailableError(
                f"cannot reach the Qdrant server at {url} ({exc}); start it, or check the URL"
            ) from exc
        raise
    finally:
        client.close()


def is_connection_error(exc: BaseException) -> bool:
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


def auth_error(exc: BaseException, url: str | None) -> IndexUnavailableError | None:
    """The one-line error for a server that refused the API key (HTTP 401 / 403), else None."""
    status = getattr(exc, "status_code", None)
    if status not in (401, 403):
        return None
    reason = "Unauthorized" if status == 401 else "Forbidden"
    return IndexUnavailableError(
        f"the Qdrant server at {url} refused the request ({status} {reason}): "
        "give its API key (QDRANT_API_KEY for the command line, api_key= in Python)"
    )


def _quantization(quantization: Quantization | None) -> Any:
    from qdrant_client import models

    if quantization == "int8":
        return models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
        )
    if quantization == "binary":
        return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))
    return None


def _check_existing(params: Any, cluster: dict[str, int], collection: str) -> None:
    """Refuse cluster options that differ from those the collection was created with (a server
    reports them; local mode and memory do not record them)."""
    for name, wanted in cluster.items():
        have = getattr(params, name, None)
        if have is not None and have != wanted:
            raise IncompatibleIndexError(
                f"collection {collection!r} was created with {name}={have}, not {wanted}; open it without "
                f"{name}=, or copy it into a new collection with the setting (lmk-rag copy)"
            )


def _check_layout(params: Any, collection: str) -> None:
    """Refuse a collection lmk-rag did not create: it needs named vectors ``pooled`` and
    ``landmarks`` (a multivector) and the sparse ``bm25``; say what the collection has instead and what to do."""
    vectors = params.vectors
    names = sorted(vectors) if isinstance(vectors, dict) else []
    landmarks = vectors.get(LANDMARKS) if isinstance(vectors, dict) else None
    sparse = params.sparse_vectors or {}
    if POOLED in names and getattr(landmarks, "multivector_config", None) is not None and BM25 in sparse:
        return
    found = f"named vectors {names}" if names else f"one unnamed vector of size {getattr(vectors, 'size', '?')}"
    raise IncompatibleIndexError(
        f"collection {collection!r} was not created by lmk-rag: it has {found}, where lmk-rag needs "
        f"'{POOLED}', a '{LANDMARKS}' multivector and a '{BM25}' sparse vector; give another collection name "
        "(lmk-rag creates it), or copy its documents' text into one"
    )


class ClientStore:
    """One collection through a ``QdrantClient``."""

    def __init__(
        self,
        client: Any,
        collection: str,
        dimension: int,
        quantization: Quantization | None,
        cluster_options: dict[str, Any] | None = None,
    ) -> None:
        """``cluster_options`` (:data:`CLUSTER_OPTIONS`): shard_number, replication_factor and
        write_consistency_factor of a new collection, on_disk for its dense vectors (originals
        on disk, served through the page cache); an existing collection keeps its own, and one
        that records different values is refused."""
        from qdrant_client import models

        self.client, self.collection = client, collection
        self.quantization = quantization
        self.landmark_scores_exact = True  # a server's landmark index keeps float32 vectors
        cluster, on_disk = check_cluster_options(dict(cluster_options or {}))
        if not client.collection_exists(collection):
            quantized = _quantization(quantization)
            client.create_collection(
                collection,
                vectors_config={
                    POOLED: models.VectorParams(size=dimension, distance=models.Distance.COSINE, on_disk=on_disk),
                    LANDMARKS: models.VectorParams(
                        size=dimension,
                        distance=models.Distance.COSINE,
                        multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
                        hnsw_config=models.HnswConfigDiff(m=0),
                        quantization_config=quantized,
                        on_disk=True if quantized is not None or on_disk else None,
                    ),
                },
                sparse_vectors_config={BM25: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                **cluster,
            )
        info = client.get_collection(collection)
        _check_layout(info.config.params, collection)
        _check_existing(info.config.params, cluster, collection)
        if quantization is None:
            landmarks = (info.config.params.vectors or {}).get(LANDMARKS)
            self.quantization = "int8" if getattr(landmarks, "quantization_config", None) is not None else None
            if isinstance(getattr(landmarks, "quantization_config", None), models.BinaryQuantization):
                self.quantization = "binary"
        meta = f"{collection}__lmk_meta"
        if not client.collection_exists(meta):
            client.create_collection(meta, vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT))
        self._indexed = set((info.payload_schema or {}).keys())
        # Local mode scans payloads and warns that indexes have no effect there: make none.
        self._payload_indexes = type(getattr(client, "_client", None)).__name__ != "QdrantLocal"
        self.landmarks = f"{collection}__lmk_landmarks"
        self._dimension, self._cluster = dimension, cluster
        self._journal = MetaJournal(client, meta)
        pending = self._journal.pending()
        if not client.collection_exists(self.landmarks) or ALL_DOCUMENTS in pending:
            self._create_landmark_index(dimension, cluster)
            self.landmarks_ok = True
        else:
            self.landmarks_ok = reconcile_landmarks(self, f"collection {collection!r}", pending)

    def _create_landmark_index(self, dimension: int, cluster: dict[str, Any]) -> None:
        """The landmark index collection (one point per landmark, HNSW), filled from the stored
        landmark vectors when the collection holds documents already; listed in the journal as a
        whole rebuild until it is done, so an interrupted build is redone at the next open."""
        from qdrant_client import models

        self._journal.mark([ALL_DOCUMENTS])
        if self.client.collection_exists(self.landmarks):
            self.client.delete_collection(self.landmarks)
        self.client.create_collection(
            self.landmarks,
            vectors_config={
                LANDMARK_VECTOR: models.VectorParams(
                    size=dimension,
                    distance=models.Distance.COSINE,
                    hnsw_config=models.HnswConfigDiff(m=LANDMARK_HNSW_M, ef_construct=LANDMARK_EF_CONSTRUCT),
                    quantization_config=_quantization(self.quantization),
                ),
            },
            **cluster,
        )
        if self._payload_indexes:
            self.client.create_payload_index(
                self.landmarks, field_name=LANDMARK_DOC, field_schema=models.PayloadSchemaType.KEYWORD
            )
        for documents in stored_landmarks(self):
            self.write_landmarks(documents)
        self._journal.clear()

    # ---------------------------------------------------------------- settings
    def fingerprint(self) -> Fingerprint | None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        return stored_fingerprint(self.client, self.collection)

    def write_fingerprint(self, fp: Fingerprint) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        from qdrant_client import models

        self.client.upsert(
            f"{self.collection}__lmk_meta",
            points=[
                models.PointStruct(
                    id=point_id("fingerprint"),
                    vector=[1.0],
                    payload={"fingerprint": fp.to_dict(), "quantization": self.quantization, "bm25": BM25_SETTINGS},
                )
            ],
        )

    # ---------------------------------------------------------------- writes
    def upsert(self, points: list[PointData]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        from qdrant_client import models

        for p in points:  # before any write: a refused document leaves the batch unwritten, not half
            if p.landmarks.size >= MULTIVECTOR_FLOAT_LIMIT:
                most = (MULTIVECTOR_FLOAT_LIMIT - 1) // max(p.landmarks.shape[-1], 1)
                raise InvalidInputError(
                    f"document {p.payload.get('doc_id')!r} has {len(p.landmarks)} landmarks; a Qdrant server stores "
                    f"at most {most} per document ({MULTIVECTOR_FLOAT_LIMIT:,} floats per multivector): split it "
                    "into parts, or keep it in the embedded index (qdrant:PATH), which has no such limit"
                )
        structs = []
        for p in points:
            vector: dict[str, Any] = {POOLED: p.pooled.tolist(), LANDMARKS: p.landmarks.tolist()}
            if p.sparse is not None:
                vector[BM25] = models.SparseVector(indices=p.sparse[0], values=p.sparse[1])
            structs.append(models.PointStruct(id=p.id, vector=vector, payload=p.payload))
        # Journal, documents, then their landmarks: a crash anywhere leaves the documents listed,
        # and the next open re-derives their landmarks from what the collection holds.
        ids = [p.id for p in points]
        self._journal.mark(ids)
        for start in range(0, len(structs), _UPSERT_BATCH):
            self.client.upsert(self.collection, points=structs[start : start + _UPSERT_BATCH], wait=True)
        self.forget_landmarks(ids)
        self.write_landmarks([(p.id, p.landmarks) for p in points])
        self._journal.clear()

    def delete(self, ids: list[str]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        from qdrant_client import models

        self._journal.mark(list(ids))
        self.client.delete(self.collection, points_selector=models.PointIdsList(points=list(ids)), wait=True)
        self.forget_landmarks(list(ids))
        self._journal.clear()

    def write_landmarks(self, documents: list[tuple[str, LandmarkVectors]]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        from qdrant_client import models

        structs = [
            models.PointStruct(
                id=point,
                vector={LANDMARK_VECTOR: np.asarray(v, dtype=np.float32).tolist()},
                payload={LANDMARK_DOC: doc},
            )
            for doc, vectors in documents
            for point, v in zip(landmark_point_ids(doc, len(vectors)), vectors)
        ]
        for start in range(0, len(structs), 8 * _UPSERT_BATCH):
            self.client.upsert(self.landmarks, points=structs[start : start + 8 * _UPSERT_BATCH], wait=True)

    def forget_landmarks(self, doc_points: list[str]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        from qdrant_client import models

        if not doc_points:
            return
        selector = models.FilterSelector(
            filter=models.Filter(
                must=[models.FieldCondition(key=LANDMARK_DOC, match=models.MatchAny(any=list(doc_points)))]
            )
        )
        self.client.delete(self.landmarks, points_selector=selector, wait=True)

    def rebuild_landmarks(self) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        self._create_landmark_index(self._dimension, self._cluster)
        self.landmarks_ok = True

    def landmark_points(self, ids: list[str]) -> dict[str, tuple[str, list[float]]]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        points = self.client.retrieve(self.landmarks, ids=ids, with_payload=True, with_vectors=[LANDMARK_VECTOR])
        out: dict[str, tuple[str, list[float]]] = {}
        for p in points:
            vector = p.vector.get(LANDMARK_VECTOR) if isinstance(p.vector, dict) else p.vector
            out[str(p.id)] = (str((p.payload or {}).get(LANDMARK_DOC)), list(vector or []))
        return out

    def landmark_count(self) -> int:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        return int(self.client.count(self.landmarks, exact=True).count)

    def journal(self) -> MetaJournal:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        return self._journal

    def landmark_candidates(self, vector: list[float], limit: int, corpus_size: int) -> list[tuple[str, float]] | None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        from qdrant_client import models

        if not self.landmarks_ok:
            return None
        fetched, ef = landmark_search(limit, corpus_size)
        hits = self.client.query_points(
            self.landmarks,
            query=vector,
            using=LANDMARK_VECTOR,
            limit=fetched,
            with_payload=[LANDMARK_DOC],
            search_params=models.SearchParams(hnsw_ef=ef) if self._payload_indexes else None,  # local mode: exact
        ).points
        return unique_documents([(str(h.payload[LANDMARK_DOC]), float(h.score)) for h in hits], limit)

    def ensure_field_index(self, key: str, kind: ValueKind) -> None:
        """A payload index on a metadata key the first time a filter uses it: float for numbers
        (every number is matched by a range), keyword for str, bool. A key indexed already keeps
        its index (the engine still checks other kinds of values from the payload)."""
        from qdrant_client import models

        path = payload_key(key)
        if not self._payload_indexes or path in self._indexed or path.replace('"', "") in self._indexed:
            return
        schema = {
            "bool": models.PayloadSchemaType.BOOL,
            "number": models.PayloadSchemaType.FLOAT,
            "str": models.PayloadSchemaType.KEYWORD,
        }[kind]
        self.client.create_payload_index(self.collection, field_name=path, field_schema=schema)
        self._indexed.add(path)

    # ---------------------------------------------------------------- reads
    def retrieve(self, ids: list[str], with_vectors: bool) -> list[Record]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        points = self.client.retrieve(
            self.collection, ids=ids, with_payload=True, with_vectors=[POOLED, LANDMARKS] if with_vectors else False
        )
        return [Record.of(p) for p in points]

    def scroll(
        self, offset: object, limit: int, with_vectors: bool, where: ParsedFilter = None
    ) -> tuple[list[Record], object]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        points, nxt = self.client.scroll(
            self.collection,
            limit=limit,
            offset=offset,
            scroll_filter=self._filter(where),
            with_payload=True if with_vectors else ["doc_id"],
            with_vectors=[POOLED, LANDMARKS] if with_vectors else False,
        )
        return [Record.of(p) for p in points], nxt

    def count(self) -> int:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        return int(self.client.count(self.collection, exact=True).count)

    def _filter(self, where: ParsedFilter) -> Any:
        if where is None:
            return None
        if isinstance(where, NativeFilter):
            return where.value
        for key, kind in field_kinds(where):
            self.ensure_field_index(key, kind)
        return to_qdrant_filter(where, _ClientFilters(), payload_key)

    def _request(self, plan: Plan) -> Any:
        from qdrant_client import models

        flt = self._filter(plan.where)
        if plan.ids is not None:
            flt = models.Filter(
                must=[models.HasIdCondition(has_id=list(plan.ids)), *([flt] if flt is not None else [])]
            )
        params = (
            models.SearchParams(
                quantization=models.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING[self.quantization])
            )
            if self.quantization
            else None
        )
        prefetch = None
        if plan.kind == "bm25":
            assert plan.sparse is not None
            query: Any = models.SparseVector(indices=plan.sparse[0], values=plan.sparse[1])
            using = BM25
        elif plan.kind == "pooled":
            query, using = plan.vector, POOLED
        else:
            query, using = [plan.vector], LANDMARKS
            if plan.kind == "prefetch":
                prefetch = models.Prefetch(query=plan.vector, using=POOLED, limit=plan.prefetch, filter=flt)
        return models.QueryRequest(
            query=query,
            using=using,
            prefetch=prefetch,
            filter=flt,
            limit=plan.limit,
            with_payload=plan.payload,
            with_vector=[LANDMARKS] if plan.landmarks else False,
            params=params,
        )

    def search(self, plans: list[Plan]) -> list[list[Found]]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        responses = self.client.query_batch_points(self.collection, requests=[self._request(p) for p in plans])
        return [[found(p.id, p.payload, p.score, p.vector) for p in response.points] for response in responses]

    def optimize(self) -> None:
        """A server optimizes on its own."""

    def warm(self) -> int:
        """A server keeps its own memory: nothing to read ahead here."""
        return 0

    def close(self) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        self.client.close()


class _ClientFilters:
    """qdrant-client's filter classes, for :func:`~lmk_rag.index.filters.to_qdrant_filter`."""

    def __init__(self) -> None:
        from qdrant_client import models

        self.models = models

    def match(self, key: str, value: str | bool) -> models.FieldCondition:
        return self.models.FieldCondition(key=key, match=self.models.MatchValue(value=value))

    def match_any(self, key: str, values: list[str]) -> models.FieldCondition:
        return self.models.FieldCondition(key=key, match=self.models.MatchAny(any=values))

    def range(self, key: str, **bounds: float) -> models.FieldCondition:
        return self.models.FieldCondition(key=key, range=self.models.Range(**bounds))

    def filter(
        self,
        must: Sequence[models.FieldCondition | models.Filter] | None = None,
        should: Sequence[models.FieldCondition | models.Filter] | None = None,
        must_not: Sequence[models.FieldCondition | models.Filter] | None = None,
    ) -> models.Filter:
        def conditions(given: Sequence[models.FieldCondition | models.Filter] | None) -> list[models.Condition] | None:
            return None if given is None else list(given)

        return self.models.Filter(must=conditions(must), should=conditions(should), must_not=conditions(must_not))
