"""The embedded Qdrant store: Qdrant's own engine in-process (``qdrant-edge-py``).

A folder holds one Edge shard per collection (``PATH/<collection>/``: segments, WAL, HNSW and
payload indexes), its landmark index (``PATH/<collection>.landmarks/``, a second shard) and
``PATH/<collection>.lmk.json`` (the encoder fingerprint and the layout's settings; the files are
:mod:`.edge_files`' business, the filters :mod:`.edge_filters`'). The shard's WAL lock admits one process at a time; a
second one gets :class:`~lmk_rag.errors.IndexUnavailableError`, never a shared write.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import (
    IncompatibleIndexError,
    IndexUnavailableError,
    InsufficientSpaceError,
    MissingDependencyError,
)
from ...types import Fingerprint
from ..filters import NativeFilter, ParsedFilter, ValueKind, field_kinds, to_qdrant_filter
from ..space import check_free_space
from . import layout
from .edge_files import (
    SHARD_MARKER,
    available_memory,
    damaged,
    holds_edge_index,
    is_damage,
    landmark_shard_dir,
    load_shard,
    read_ahead,
    read_meta,
    write_meta,
)
from .edge_filters import EdgeFilters, from_client_filter
from .journal import FileJournal
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
    LandmarkDatatype,
    Plan,
    PointData,
    Quantization,
    check_owner,
    check_quantization,
    found,
    landmark_point_ids,
    landmark_search,
    payload_key,
    unique_documents,
)
from .store import ALL_DOCUMENTS, LandmarkVectors, Record, reconcile_landmarks, stored_landmarks

if TYPE_CHECKING:
    from qdrant_edge import EdgeConfig

LAYOUT_VERSION = 1
logger = logging.getLogger(__name__)
#: Landmark-index points written per engine update.
_LANDMARK_POINTS_PER_UPDATE = 4096


def _edge() -> Any:
    try:
        import qdrant_edge
    except ImportError as exc:  # pragma: no cover - a dependency of the qdrant extra
        raise MissingDependencyError("qdrant:PATH needs qdrant-edge-py: pip install 'lmk-rag[qdrant]'") from exc
    return qdrant_edge


def _quantization_config(quantization: Quantization | None) -> Any:
    e = _edge()
    if quantization == "int8":
        return e.ScalarQuantizationConfig(e.ScalarType.Int8, quantile=0.99, memory=e.Memory.Pinned)
    if quantization == "binary":
        return e.BinaryQuantizationConfig(memory=e.Memory.Pinned)
    return None


def edge_config(dimension: int, quantization: Quantization | None) -> EdgeConfig:
    """Pooled vector with HNSW; landmarks as a MAX_SIM multivector without a graph (rerank only),
    mapped from disk (``Memory.Cold``: a search reads the few documents it rescores, so RAM does
    not grow with every landmark of the index), quantized in RAM when asked; BM25 sparse vectors
    with IDF."""
    e = _edge()
    quantized = _quantization_config(quantization)
    config: EdgeConfig = e.EdgeConfig(
        vectors={
            POOLED: e.EdgeVectorParams(size=dimension, distance=e.Distance.Cosine),
            LANDMARKS: e.EdgeVectorParams(
                size=dimension,
                distance=e.Distance.Cosine,
                multivector_config=e.MultiVectorConfig(e.MultiVectorComparator.MaxSim),
                hnsw_config=e.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10000),
                quantization_config=quantized,
                memory=e.Memory.Cold,
            ),
        },
        sparse_vectors={BM25: e.EdgeSparseVectorParams(modifier=e.Modifier.Idf)},
    )
    return config


_DATATYPE_NAMES = {"float16": "Float16", "turbo8": "Turbo8", "turbo4": "Turbo4"}


def landmark_config(
    dimension: int, quantization: Quantization | None, datatype: LandmarkDatatype | None = None
) -> EdgeConfig:
    """The landmark index: one vector per landmark with an HNSW graph, stored as ``datatype``
    (see :data:`~.layout.LANDMARK_DATATYPE`); float32 ones are quantized like the collection's
    landmarks when asked (compressed ones are smaller than any quantized copy already)."""
    e = _edge()
    datatype = datatype or layout.LANDMARK_DATATYPE  # read per call: a benchmark may set it
    compressed = datatype != "float32"
    config: EdgeConfig = e.EdgeConfig(
        vectors={
            LANDMARK_VECTOR: e.EdgeVectorParams(
                size=dimension,
                distance=e.Distance.Cosine,
                datatype=getattr(e.VectorStorageDatatype, _DATATYPE_NAMES[datatype]) if compressed else None,
                hnsw_config=e.HnswIndexConfig(
                    m=LANDMARK_HNSW_M, ef_construct=LANDMARK_EF_CONSTRUCT, full_scan_threshold=10000
                ),
                quantization_config=None if compressed else _quantization_config(quantization),
            ),
        },
    )
    return config


def stored_datatype(shard_dir: Path, vector: str) -> str:
    """How a shard stores ``vector`` (``float32`` unless its configuration names another datatype),
    read from the configuration file the engine wrote (its API does not tell)."""
    try:
        params = json.loads((shard_dir / SHARD_MARKER).read_text())["vectors"][vector]
    except (OSError, ValueError, KeyError, TypeError):
        return "float32"
    return str(params.get("datatype") or "float32").lower() if isinstance(params, dict) else "float32"


class EdgeStore:
    """One collection as an Edge shard in ``folder``, and its landmark index as a second shard."""

    def __init__(self, folder: Path, collection: str, dimension: int, quantization: Quantization | None) -> None:
        e = _edge()
        if folder.exists() and not folder.is_dir():
            raise IndexUnavailableError(f"the index path {str(folder)!r} is a file; give a folder for qdrant:PATH")
        self.folder, self.collection = folder, collection
        meta = read_meta(folder, collection)
        if meta is not None and meta.get("quantization") != quantization and quantization is not None:
            raise IncompatibleIndexError(
                f"this index stores landmarks with quantization={meta.get('quantization')!r}, not "
                f"{quantization!r}; open it without quantization= or copy it into a new folder with the setting"
            )
        # qdrant-edge-py's EdgeShard (its stub types point ids narrower than the str ids used here).
        self.shard: Any = None
        self.quantization = check_quantization(meta.get("quantization")) if meta is not None else quantization
        shard_dir = folder / collection
        check_free_space(folder, opening=True)
        try:
            if holds_edge_index(folder, collection):
                self.shard = load_shard(shard_dir)
            else:
                shard_dir.mkdir(parents=True, exist_ok=True)
                self.shard = e.EdgeShard.create(str(shard_dir), edge_config(dimension, quantization))
        except OSError as exc:
            raise IndexUnavailableError(f"cannot open the index folder {str(folder)!r}: {exc}") from exc
        except BaseException as exc:  # an engine panic is a BaseException
            if not isinstance(exc, Exception) and not is_damage(exc):
                raise
            if _is_lock_error(exc):
                raise IndexUnavailableError(
                    f"the index folder {str(folder)!r} is open in another process or in another QdrantIndex "
                    "not yet closed (an embedded Qdrant shard admits one writer); close it, or serve the index "
                    "from a Qdrant server via url="
                ) from exc
            if is_damage(exc):
                raise damaged(folder, exc) from exc
            raise IndexUnavailableError(f"cannot open the index folder {str(folder)!r}: {exc}") from exc
        self._indexed = set(self.shard.info().payload_schema)
        self._wrote = False
        self.dimension = dimension
        self._open_landmarks()

    def _open_landmarks(self) -> None:
        """Open the landmark index shard (or build it from the stored landmark vectors), then bring
        it in line with the collection (:func:`~.store.reconcile_landmarks`): it holds nothing the
        collection does not, so a damaged or stale one is rebuilt from the collection, never trusted."""
        lm_dir = landmark_shard_dir(self.folder, self.collection)
        self.landmark_shard: Any = None
        #: Whether the landmark index's scores are exact cosines (float32 vectors), see the store contract.
        self.landmark_scores_exact = True
        self._journal = FileJournal(self.folder, self.collection)
        self._landmarks_ok = True
        pending = self._journal.pending()
        rebuilding = ALL_DOCUMENTS in pending
        try:
            if lm_dir.is_file() or lm_dir.is_symlink():
                aside = lm_dir.with_name(f"{lm_dir.name}.moved-{int(time.time())}")
                logger.warning("%s is not a landmark index; moved it to %s and building one", lm_dir, aside)
                lm_dir.rename(aside)
            if (lm_dir / SHARD_MARKER).is_file() and not rebuilding:
                try:
                    self.landmark_shard = load_shard(lm_dir)
                    self._read_landmark_datatype(lm_dir)
                except BaseException as exc:  # an engine panic is a BaseException
                    if not (isinstance(exc, Exception) or is_damage(exc)) or _is_lock_error(exc):
                        raise
                    logger.warning("the landmark index %s is damaged (%s); rebuilding it from the index", lm_dir, exc)
            elif rebuilding:
                logger.warning("the landmark index %s was being built when it stopped; rebuilding it", lm_dir)
            elif lm_dir.is_dir() and self.count():
                logger.warning("the landmark index %s has lost its configuration; rebuilding it", lm_dir)
            if self.landmark_shard is None:
                self._build_landmarks()
            else:
                self._landmarks_ok = reconcile_landmarks(self, f"qdrant:{self.folder}", pending)
        except BaseException as exc:
            self._release()
            if is_damage(exc):
                raise damaged(self.folder, exc) from exc
            raise

    def _read_landmark_datatype(self, lm_dir: Path) -> None:
        """Whether the landmark shard just opened or made scores exactly: float32 vectors only."""
        self.landmark_scores_exact = stored_datatype(lm_dir, LANDMARK_VECTOR) == "float32"

    def _build_landmarks(self) -> None:
        """Make the landmark index anew from the collection, listed in the journal as a whole
        rebuild until it is done, so an interrupted build is redone at the next open."""
        e = _edge()
        lm_dir = landmark_shard_dir(self.folder, self.collection)
        if self.landmark_shard is not None:
            self.landmark_shard.close()
            self.landmark_shard = None
        check_free_space(self.folder)  # a new shard maps its first pieces: room to write, not only to open
        self._journal.mark([ALL_DOCUMENTS])
        if lm_dir.exists():
            shutil.rmtree(lm_dir)
        lm_dir.mkdir(parents=True)
        self.landmark_shard = e.EdgeShard.create(str(lm_dir), landmark_config(self.dimension, self.quantization))
        self._read_landmark_datatype(lm_dir)
        self.landmark_shard.update(e.UpdateOperation.create_field_index(LANDMARK_DOC, e.PayloadSchemaType.Keyword))
        filled = False
        for documents in stored_landmarks(self):
            floats = sum(len(v) for _, vectors in documents for v in vectors)
            check_free_space(self.folder, extra=8 * 4 * floats)  # as a write of these landmarks would
            self.write_landmarks(documents)
            filled = True
        if filled:
            self.landmark_shard.optimize()
        self.landmark_shard.flush()
        self._journal.clear()
        self._landmarks_ok = True

    def write_landmarks(self, documents: list[tuple[str, LandmarkVectors]]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        e = _edge()
        points = [
            (point, v, doc)
            for doc, vectors in documents
            for point, v in zip(landmark_point_ids(doc, len(vectors)), vectors)
        ]
        # In slices: each engine point holds a copy of its vector until the update returns.
        for start in range(0, len(points), _LANDMARK_POINTS_PER_UPDATE):
            batch = [
                e.Point(p, {LANDMARK_VECTOR: v}, {LANDMARK_DOC: d})
                for p, v, d in points[start : start + _LANDMARK_POINTS_PER_UPDATE]
            ]
            self.landmark_shard.update(e.UpdateOperation.upsert_points(batch))

    def forget_landmarks(self, doc_points: list[str]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        e = _edge()
        if doc_points:
            self.landmark_shard.update(e.UpdateOperation.delete_points_by_filter(self._of_documents(doc_points)))

    def landmark_points(self, ids: list[str]) -> dict[str, tuple[str, list[float]]]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        records = self.landmark_shard.retrieve(ids, with_payload=True, with_vector=[LANDMARK_VECTOR])
        return {
            str(r.id): (str((r.payload or {}).get(LANDMARK_DOC)), list((r.vector or {}).get(LANDMARK_VECTOR) or []))
            for r in records
        }

    def landmark_count(self) -> int:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        return int(self.landmark_shard.count(_edge().CountRequest(exact=True)))

    def warm(self) -> int:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`: the landmark index's files first
        (graph, codes, owners), then the collection's (its mapped landmark vectors, which every
        search rescores, and payloads), read in a thread; at most half the memory available, so
        that the read-ahead does not push out what it read first."""
        free = available_memory()
        size, read = read_ahead(
            [landmark_shard_dir(self.folder, self.collection), self.folder / self.collection],
            limit=None if free is None else free // 2,
            first=f"vector_storage-{LANDMARKS}",  # what a search rescores, before text and the rest
        )
        threading.Thread(target=read, name="lmk-rag warm", daemon=True).start()
        return size

    def journal(self) -> FileJournal:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        return self._journal

    # ---------------------------------------------------------------- settings
    def fingerprint(self) -> Fingerprint | None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        meta = read_meta(self.folder, self.collection)
        return Fingerprint.from_dict(meta["fingerprint"]) if meta and meta.get("fingerprint") else None

    def write_fingerprint(self, fp: Fingerprint) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        write_meta(
            self.folder,
            self.collection,
            {
                "format": "lmk-rag qdrant-edge",
                "layout": LAYOUT_VERSION,
                "fingerprint": fp.to_dict(),
                "quantization": self.quantization,
                "bm25": BM25_SETTINGS,
            },
        )

    # ---------------------------------------------------------------- writes
    def upsert(self, points: list[PointData]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        e = _edge()
        batch = []
        for p in points:
            vector: dict[str, Any] = {POOLED: p.pooled, LANDMARKS: p.landmarks}
            if p.sparse is not None:
                vector[BM25] = e.SparseVector(*p.sparse)
            batch.append(e.Point(p.id, vector, p.payload))
        # Room for the points (vectors, text and spans, landmarks twice) before any of it reaches a mapped page.
        check_free_space(self.folder, extra=8 * sum(_point_bytes(p) for p in points))
        # Journal, documents, then their landmarks: a crash anywhere leaves the documents listed,
        # and the next open re-derives their landmarks from what the collection holds.
        ids = [p.id for p in points]
        self._journal.mark(ids)
        self.shard.update(e.UpdateOperation.upsert_points(batch))
        self._wrote = True
        self.forget_landmarks(ids)
        self.write_landmarks([(p.id, p.landmarks) for p in points])
        self._journal.clear()

    def delete(self, ids: list[str]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        e = _edge()
        self._journal.mark(list(ids))
        self.shard.update(e.UpdateOperation.delete_points(ids))
        self._wrote = True
        self.forget_landmarks(list(ids))
        self._journal.clear()

    def _of_documents(self, doc_points: list[str]) -> Any:
        e = _edge()
        return e.Filter(must=[e.FieldCondition(key=LANDMARK_DOC, match=e.MatchAny(list(doc_points)))])

    def landmark_candidates(self, vector: list[float], limit: int, corpus_size: int) -> list[tuple[str, float]] | None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        if not self._landmarks_ok:
            return None
        e = _edge()
        fetched, ef = landmark_search(limit, corpus_size)
        try:
            hits = self.landmark_shard.query(
                e.QueryRequest(
                    limit=fetched,
                    query=e.Query.Nearest(vector, using=LANDMARK_VECTOR),
                    with_payload=[LANDMARK_DOC],
                    params=e.SearchParams(hnsw_ef=ef),
                )
            )
        except Exception as exc:
            if not is_damage(exc):
                raise
            # Derived data: searches go on with pooled candidates until --verify rebuilds it.
            logger.warning(
                "the landmark index of %s is damaged (%s); searching with pooled candidates instead. "
                "Rebuild it with: lmk-rag ingest YOUR_FOLDERS --index qdrant:%s --verify",
                self.folder,
                str(exc).splitlines()[0],
                self.folder,
            )
            self._landmarks_ok = False
            return None
        return unique_documents([(str(h.payload[LANDMARK_DOC]), float(h.score)) for h in hits], limit)

    def rebuild_landmarks(self) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        self._build_landmarks()

    def ensure_field_index(self, key: str, kind: ValueKind) -> None:
        """A payload index on a metadata key the first time a filter uses it: float for numbers
        (every number is matched by a range), keyword for str, bool. A key indexed already keeps
        its index (the engine still checks other kinds of values from the payload)."""
        path = payload_key(key)
        if path in self._indexed or path.replace('"', "") in self._indexed:
            return
        e = _edge()
        schema = {
            "bool": e.PayloadSchemaType.Bool,
            "number": e.PayloadSchemaType.Float,
            "str": e.PayloadSchemaType.Keyword,
        }[kind]
        self.shard.update(e.UpdateOperation.create_field_index(path, schema))
        self._indexed.add(path)

    # ---------------------------------------------------------------- reads
    def retrieve(self, ids: list[str], with_vectors: bool) -> list[Record]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        records = self.shard.retrieve(
            ids, with_payload=True, with_vector=[POOLED, LANDMARKS] if with_vectors else False
        )
        out = []
        for r in records:
            check_owner(r.id, r.payload)
            out.append(Record.of(r))
        return out

    def scroll(
        self, offset: object, limit: int, with_vectors: bool, where: ParsedFilter = None
    ) -> tuple[list[Record], object]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        e = _edge()
        records, nxt = self.shard.scroll(
            e.ScrollRequest(
                offset=offset,
                limit=limit,
                filter=self._filter(where),
                with_payload=True if with_vectors else ["doc_id"],
                with_vector=[POOLED, LANDMARKS] if with_vectors else False,
            )
        )
        return [Record.of(r) for r in records], nxt

    def count(self) -> int:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        return int(self.shard.count(_edge().CountRequest(exact=True)))

    def _filter(self, where: ParsedFilter) -> Any:
        if where is None:
            return None
        vocab = EdgeFilters()
        if isinstance(where, NativeFilter):
            return from_client_filter(where.value, vocab)
        for key, kind in field_kinds(where):
            self.ensure_field_index(key, kind)
        return to_qdrant_filter(where, vocab, payload_key)

    def _request(self, plan: Plan) -> Any:
        e = _edge()
        flt = self._filter(plan.where)
        if plan.ids is not None:
            flt = e.Filter(must=[e.HasIdCondition(set(plan.ids)), *([flt] if flt is not None else [])])
        params = (
            e.SearchParams(
                quantization=e.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING[self.quantization])
            )
            if self.quantization
            else None
        )
        prefetches = None
        if plan.kind == "bm25":
            assert plan.sparse is not None
            query = e.Query.Nearest(e.SparseVector(*plan.sparse), using=BM25)
        elif plan.kind == "pooled":
            query = e.Query.Nearest(plan.vector, using=POOLED)
        else:
            query = e.Query.Nearest([plan.vector], using=LANDMARKS)
            if plan.kind == "prefetch":
                prefetches = [
                    e.Prefetch(limit=plan.prefetch, query=e.Query.Nearest(plan.vector, using=POOLED), filter=flt)
                ]
        return e.QueryRequest(
            limit=plan.limit,
            query=query,
            prefetches=prefetches,
            filter=flt,
            with_payload=plan.payload,
            with_vector=[LANDMARKS] if plan.landmarks else False,
            params=params,
        )

    def search(self, plans: list[Plan]) -> list[list[Found]]:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        e = _edge()
        requests = [self._request(p) for p in plans]
        results = (
            [self.shard.query(requests[0])]
            if len(requests) == 1
            else self.shard.query_batch(e.QueryBatchRequest(requests))
        )
        return [[found(p.id, p.payload, p.score, p.vector) for p in points] for points in results]

    # ---------------------------------------------------------------- life cycle
    def optimize(self) -> None:
        """Merge segments and build the HNSW and payload indexes the data has grown into."""
        for shard in (self.shard, self.landmark_shard):
            self._optimize(shard)

    def _optimize(self, shard: Any) -> None:
        """``shard.optimize()``; the engine's refusal for want of disk (merging segments writes
        a new copy of them first) becomes :class:`InsufficientSpaceError` saying what to do."""
        try:
            shard.optimize()
        except Exception as exc:
            if "not enough space" not in str(exc).lower():
                raise
            raise InsufficientSpaceError(
                f"the index at {str(self.folder)!r} could not be optimized: merging its segments writes a new "
                f"copy of them first, and the disk is short ({str(exc).split('optimization, ')[-1]}); every "
                "document is stored and searchable, only slower until merged: free that much space (or move "
                "the index to a larger disk) and call optimize() again (closing after a write tries too)"
            ) from exc

    def _release(self) -> None:
        """Close the shards without flushing (an open that failed part-way)."""
        for shard in (getattr(self, "shard", None), getattr(self, "landmark_shard", None)):
            if shard is not None:
                try:
                    shard.close()
                except Exception:  # releasing what a failed open held
                    logger.debug("closing a shard after a failed open", exc_info=True)
        self.shard = self.landmark_shard = None

    def close(self) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.QdrantStore`."""
        shards = [s for s in (getattr(self, "shard", None), getattr(self, "landmark_shard", None)) if s is not None]
        try:
            for shard in shards:
                if self._wrote:
                    try:
                        self._optimize(shard)
                    except InsufficientSpaceError as exc:  # the writes are safe; merging can wait
                        logger.warning("%s", exc)
                shard.flush()
        finally:
            for shard in shards:
                shard.close()
            self.shard = self.landmark_shard = None


def _is_lock_error(exc: BaseException) -> bool:
    """Whether the engine refused a shard because another process (or index object) holds it."""
    return "WouldBlock" in str(exc) or "lock" in str(exc).lower()


def _point_bytes(point: PointData) -> int:
    """About how many bytes a point takes: its vectors as float32 and its payload as JSON."""
    floats = point.pooled.size + point.landmarks.size
    return 4 * floats + len(json.dumps(point.payload, default=str))
