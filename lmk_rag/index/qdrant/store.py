"""The contract :class:`~.index.QdrantIndex` holds its store to: the embedded engine
(:class:`~.edge_store.EdgeStore`) and a server through qdrant-client
(:class:`~.client_store.ClientStore`) keep the same collection layout (:mod:`.layout`) and
answer the same calls, so the index never asks which one it has."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

import numpy as np

from ...types import Fingerprint
from ..filters import ParsedFilter, ValueKind
from .layout import LANDMARKS, POOLED, Found, Plan, PointData, Quantization, landmark_point_ids, point_id

logger = logging.getLogger(__name__)

#: The landmark journal's word for "the whole landmark index is being (re)built".
ALL_DOCUMENTS = "*"
#: Documents whose landmark points an open compares with the collection's (a cheap digest of the
#: landmark index: a garbled, zeroed or foreign landmark index disagrees on them).
SAMPLED_DOCUMENTS = 16
#: A landmark index that disagrees with its collection is rebuilt on open up to this many documents
#: (seconds); above, searches use pooled candidates and the user is told to run ``--verify``.
AUTO_REBUILD_DOCUMENTS = 5000


#: A document's landmark vectors as a store hands them over: an array, or the engine's lists.
LandmarkVectors = np.ndarray | list[list[float]]


class EnginePoint(Protocol):
    """A point as qdrant-client or qdrant-edge-py returns it."""

    @property
    def payload(self) -> dict[str, object] | None:
        """Its JSON payload (None when not asked for)."""

    @property
    def vector(self) -> object:
        """Its named vectors: a dict, or None when not asked for."""


class Record(NamedTuple):
    """A stored point as the stores return it: its payload, its pooled vector and its landmark
    vectors (the vectors are None when not asked for)."""

    payload: dict[str, Any]  # the point's JSON payload (:func:`~.layout.to_point`)
    pooled: Any  # the engine's vector (a list or an array), None when not asked for
    landmarks: Any  # the engine's multivector (a list of lists or an array), None when not asked for

    @classmethod
    def of(cls, point: EnginePoint) -> Record:
        """A point as either engine returns it (``payload``, and ``vector``: a dict of the named
        vectors asked for, or None)."""
        vectors = point.vector if isinstance(point.vector, dict) else {}
        return cls(point.payload or {}, vectors.get(POOLED), vectors.get(LANDMARKS))


class QdrantStore(Protocol):
    """One collection of LMK documents, one point each (ids: :func:`~.layout.point_id`)."""

    #: How landmark vectors are quantized in RAM: None, ``"int8"`` or ``"binary"``.
    quantization: Quantization | None
    #: Whether the landmark index scores a landmark by its exact cosine (float32 vectors, not
    #: quantized), so a document's best landmark score is its MaxSim; otherwise its candidates are
    #: rescored from the collection's landmark vectors.
    landmark_scores_exact: bool

    def fingerprint(self) -> Fingerprint | None:
        """The encoder fingerprint the collection records (None: none yet)."""
        ...

    def write_fingerprint(self, fp: Fingerprint) -> None:
        """Record the encoder fingerprint (once, when the first documents arrive)."""
        ...

    def upsert(self, points: list[PointData]) -> None:
        """Write points, replacing any with the same id."""
        ...

    def delete(self, ids: list[str]) -> None:
        """Remove points by id (missing ids are ignored)."""
        ...

    def ensure_field_index(self, key: str, kind: ValueKind) -> None:
        """A payload index on a metadata key, so filters on it stay fast and typed."""
        ...

    def retrieve(self, ids: list[str], with_vectors: bool) -> list[Record]:
        """The points with these ids that exist."""
        ...

    def scroll(
        self, offset: object, limit: int, with_vectors: bool, where: ParsedFilter = None
    ) -> tuple[list[Record], object]:
        """Up to ``limit`` points from ``offset`` (matching ``where``) and the next offset (None at the end)."""
        ...

    def count(self) -> int:
        """Points in the collection."""
        ...

    def landmark_candidates(self, vector: list[float], limit: int, corpus_size: int) -> list[tuple[str, float]] | None:
        """Up to ``limit`` documents ``(point id, best landmark's score)`` whose best landmarks are
        nearest ``vector`` through the landmark index's HNSW graph, best first (the score is the
        document's MaxSim where the index is not quantized); the graph is searched more widely in a
        larger corpus (``corpus_size`` documents, see :func:`.layout.landmark_search`). None when
        the landmark index cannot be read (the caller falls back to pooled candidates)."""
        ...

    def rebuild_landmarks(self) -> None:
        """Rebuild the landmark index from the collection's stored landmark vectors."""
        ...

    def write_landmarks(self, documents: list[tuple[str, LandmarkVectors]]) -> None:
        """One landmark-index point per landmark of each ``(document point id, landmark vectors)``."""
        ...

    def forget_landmarks(self, doc_points: list[str]) -> None:
        """Remove every landmark-index point of these documents."""
        ...

    def landmark_points(self, ids: list[str]) -> dict[str, tuple[str, list[float]]]:
        """The landmark-index points with these ids that exist: ``{id: (document point id, vector)}``."""
        ...

    def landmark_count(self) -> int:
        """Points in the landmark index."""
        ...

    def warm(self) -> int:
        """Start reading what searches read from disk into the OS page cache, in the background;
        the bytes it will read (0 where the engine is a server, which keeps its own memory)."""
        ...

    def journal(self) -> LandmarkJournal:
        """Where the documents whose landmark points may disagree with the collection are written
        down before a write, and crossed out after it (see :func:`reconcile_landmarks`)."""
        ...

    def search(self, plans: list[Plan]) -> list[list[Found]]:
        """Each plan's results, best first, in one round trip."""
        ...

    def optimize(self) -> None:
        """Merge segments and build the indexes now rather than on the engine's schedule."""
        ...

    def close(self) -> None:
        """Flush and release the collection."""
        ...


def stored_landmarks(store: QdrantStore, batch: int = 256) -> Iterator[list[tuple[str, LandmarkVectors]]]:
    """The collection's documents as ``(point id, landmark vectors)``, a batch at a time: what a
    landmark index is built from (it holds nothing the collection does not)."""
    offset: Any = None
    while True:
        records, offset = store.scroll(offset, batch, True)
        documents = [(point_id(payload["doc_id"]), vectors or []) for payload, _, vectors in records]
        if documents:
            yield documents
        if offset is None:
            return


class LandmarkJournal(Protocol):
    """The documents a write is changing, kept where a crash leaves them: a write lists its
    documents (or :data:`ALL_DOCUMENTS` for a rebuild) before it touches either the collection or
    the landmark index, and clears the list once both agree again. What an open finds listed is
    re-derived from the collection, so a crash at any point leaves a repairable state."""

    def pending(self) -> list[str]:
        """The listed documents' point ids (``[ALL_DOCUMENTS]`` for a rebuild); empty when none."""
        ...

    def mark(self, doc_points: list[str]) -> None:
        """List these documents (durably) before a write."""
        ...

    def clear(self) -> None:
        """Cross everything out once the collection and the landmark index agree."""
        ...


def repair_landmarks(store: QdrantStore, doc_points: list[str], batch: int = 256) -> None:
    """Re-derive these documents' landmark points from the collection: forgotten, then written
    again from the stored landmark vectors of those that exist (a deleted one keeps none)."""
    for start in range(0, len(doc_points), batch):
        part = doc_points[start : start + batch]
        store.forget_landmarks(part)
        records = store.retrieve(part, True)
        store.write_landmarks([(point_id(p["doc_id"]), vectors or []) for p, _, vectors in records])


#: The least cosine between a compressed landmark-index vector and the collection's original: 4-bit
#: TurboQuant codes of LMK vectors keep about 0.99; a garbled, zeroed or foreign one falls far below.
COMPRESSED_MIN_COSINE = 0.95


def same_vector(stored: np.ndarray, original: np.ndarray, exact: bool) -> bool:
    """Whether a landmark-index vector is the collection's ``original``: equal to float32 rounding
    when stored whole (``exact``), else within :data:`COMPRESSED_MIN_COSINE`."""
    if exact:
        return bool(np.allclose(stored, original, atol=1e-3))
    norms = float(np.linalg.norm(stored) * np.linalg.norm(original))
    return stored.shape == original.shape and norms > 0 and float(stored @ original) / norms >= COMPRESSED_MIN_COSINE


def landmark_disagreement(store: QdrantStore) -> str | None:
    """Why the landmark index cannot be trusted, or None: fewer landmark points than documents, or
    a sample of documents (the first and a random page) whose landmark points are missing, name
    another document or hold other vectors than the collection's. A collection that cannot be read
    is not judged here (its searches say it is damaged; ``--verify`` repairs it)."""
    try:
        documents = store.count()
        sample, _ = store.scroll(None, SAMPLED_DOCUMENTS // 2, True)
        if documents > SAMPLED_DOCUMENTS:
            more, _ = store.scroll(str(uuid.uuid4()), SAMPLED_DOCUMENTS // 2, True)
            sample += more
    except Exception:  # the collection's own damage is reported where it is read
        logger.debug("the collection could not be sampled", exc_info=True)
        return None
    if documents == 0:
        return None
    try:
        held = store.landmark_count()
        if held < documents:
            return f"it holds {held} landmarks for {documents} documents"
        for payload, _, vectors in sample:
            doc = point_id(payload["doc_id"])
            expected = np.asarray(vectors or [], dtype=np.float32)
            ids = landmark_point_ids(doc, len(expected))
            points = store.landmark_points(ids)
            for j, lm_id in enumerate(ids):
                if lm_id not in points:
                    return f"landmark {j} of document {payload['doc_id']!r} is missing"
                owner, vector = points[lm_id]
                if owner != doc:
                    return f"landmark {j} of document {payload['doc_id']!r} names another document"
                if not same_vector(np.asarray(vector, dtype=np.float32), expected[j], store.landmark_scores_exact):
                    return f"landmark {j} of document {payload['doc_id']!r} holds another vector than the index"
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - an unreadable landmark index disagrees (an engine panic too)
        return f"it cannot be read ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    return None


def reconcile_landmarks(store: QdrantStore, where: str, pending: list[str]) -> bool:
    """Bring an opened landmark index back in line with its collection: the documents its journal
    lists (``pending``, as read by the store, which rebuilds the whole landmark index itself when
    the list is :data:`ALL_DOCUMENTS`) are re-derived, then a cheap digest
    (:func:`landmark_disagreement`) is compared; a disagreeing landmark index is rebuilt when small
    (:data:`AUTO_REBUILD_DOCUMENTS`). Returns False when the landmark index is left untrusted
    (searches then use pooled candidates until ``--verify`` rebuilds it)."""
    if pending:
        logger.warning(
            "a write to %s stopped before it finished; re-deriving the landmark index of its %d documents",
            where,
            len(pending),
        )
        repair_landmarks(store, pending)
        store.journal().clear()
    problem = landmark_disagreement(store)
    if problem is None:
        return True
    if store.count() <= AUTO_REBUILD_DOCUMENTS:
        logger.warning("the landmark index of %s disagrees with it (%s); rebuilding it", where, problem)
        store.rebuild_landmarks()
        return True
    logger.warning(
        "the landmark index of %s disagrees with it (%s); searching with pooled candidates instead. "
        "Rebuild it with: lmk-rag ingest YOUR_FOLDERS --index %s --verify",
        where,
        problem,
        where,
    )
    return False
