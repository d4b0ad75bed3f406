"""The Qdrant collection layout every lmk-rag Qdrant store shares (embedded Edge shard or server).

One point per document (so a write is atomic: a document is stored with all its landmarks or
not at all), id = UUIDv5 of the user's id, and three named vectors, after Qdrant's guidance
for late interaction:

- ``pooled``: the document's single LMK vector, HNSW-indexed: the fast first stage;
- ``landmarks``: every landmark vector, a MAX_SIM multivector with HNSW off (``m=0``): used to
  rerank candidates exactly, never searched by graph;
- ``bm25``: BM25 term weights of the text (Qdrant Edge's BM25, IDF applied by the engine), for
  hybrid search. The same sparse vectors go to a server, so one layout serves both.

The payload keeps the user's id, text, metadata and each landmark's character span.

Beside the collection, a **landmark index**: one point per landmark (vector ``lm``, HNSW; payload
``doc``, its document's point id), in a second shard (embedded) or collection (server). A query
is one vector, so a document's MaxSim is its best landmark's score: the best landmarks through
the graph name the documents that rank first. It finds the exact MaxSim top 10 more often than
pooled vectors do (docs/results.md, "Where the defaults come from"). An embedded landmark index
stores 4-bit TurboQuant codes (:data:`LANDMARK_DATATYPE`), so the landmark vectors are kept in
full once, in the collection: its candidates are rescored by exact MaxSim there. A server's keeps
float32 vectors, whose scores are the MaxSim itself (unless quantized: then rescored too).
"""

from __future__ import annotations

import math
import typing
import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ...errors import InvalidInputError, MissingDependencyError
from ...types import MultiVector
from ..filters import ParsedFilter
from ..hits import StoredDocument

if TYPE_CHECKING:
    from qdrant_edge import Bm25

POOLED, LANDMARKS, BM25 = "pooled", "landmarks", "bm25"
Quantization = Literal["int8", "binary"]
QUANTIZATIONS: tuple[Quantization, ...] = typing.get_args(Quantization)
# Quantized candidates rescored with the original vectors, oversampled per result as much as keeps
# recall@10 of exact MaxSim (docs/results.md, "Where the defaults come from").
OVERSAMPLING = {"int8": 2.0, "binary": 16.0}
_NAMESPACE = uuid.UUID("6c6d6b2d-7261-6700-8000-000000000001")
# BM25 with the engine's defaults (k=1.2, b=0.75, English stemming and stopwords) and an average
# length closer to whole documents than the engine's 256; recorded in every index's metadata.
BM25_SETTINGS: dict[str, Any] = {"k": 1.2, "b": 0.75, "avg_len": 512.0, "language": "english"}
# Pooled candidates reranked by exact MaxSim when the landmark index is not used (see default_prefetch_limit).
MIN_PREFETCH = 100
# The landmark index: its vector's name, the payload key of each landmark's document, and how it is searched.
LANDMARK_VECTOR, LANDMARK_DOC = "lm", "doc"
LANDMARK_HNSW_M, LANDMARK_EF_CONSTRUCT = 16, 100
#: How an embedded landmark index stores its vectors. ``float32`` keeps them whole (a landmark's
#: score is its exact cosine); the compressed kinds (Qdrant's float16 and TurboQuant storage
#: datatypes: no float copy kept) make it a candidate finder whose documents are rescored by exact
#: MaxSim over the collection's float32 landmarks, so the landmark vectors are stored in full once.
LandmarkDatatype = Literal["float32", "float16", "turbo8", "turbo4"]
LANDMARK_DATATYPES: tuple[LandmarkDatatype, ...] = typing.get_args(LandmarkDatatype)
LANDMARK_DATATYPE: LandmarkDatatype = "turbo4"
#: Documents rescored by exact MaxSim per document asked for, when the landmark index's scores are
#: approximate (compressed or quantized vectors, or a filter): the k best among k + min(k, this).
RESCORED_EXTRA = 20


def landmark_search(limit: int, corpus_size: int) -> tuple[int, int]:
    """(landmarks fetched, HNSW ef) for ``limit`` candidate documents among ``corpus_size``: 3
    landmarks per document wanted (a document's several good landmarks take several places), at
    least 64; ef at least 256 and 3 sqrt(corpus_size), since near-copies crowd a large corpus's
    nearest landmarks and a narrow beam misses some. Chosen on two benchmark vector sets
    (docs/results.md, "Where the defaults come from")."""
    fetched = max(64, 3 * limit)
    return fetched, max(256, fetched, int(3 * math.sqrt(max(corpus_size, 0))))


def landmark_point_ids(doc_point: str, n: int) -> list[str]:
    """The landmark-index point ids of a document's ``n`` landmarks (UUIDv5, stable per position)."""
    return [str(uuid.uuid5(_NAMESPACE, f"{doc_point}#{j}")) for j in range(n)]


def unique_documents(hits: list[tuple[str, float]], limit: int) -> list[tuple[str, float]]:
    """The first ``limit`` distinct documents of landmark hits ``(document, score)`` given best
    first, each with its first (best) landmark's score: its MaxSim, where the scores are exact."""
    best: dict[str, float] = {}
    for doc, score in hits:
        best.setdefault(doc, score)
        if len(best) == limit:
            break
    return list(best.items())


def point_id(doc_id: str) -> str:
    """The Qdrant point id of a document id (UUIDv5: Qdrant takes only unsigned ints and UUIDs)."""
    return str(uuid.uuid5(_NAMESPACE, doc_id))


def payload_key(key: str) -> str:
    """The JSON path of a metadata key, quoted so '.', '[', ':' and spaces are part of the name."""
    return f'metadata."{key}"'


def check_quantization(quantization: object) -> Quantization | None:
    """``quantization`` if it is None, ``"int8"`` or ``"binary"``, else an error naming it."""
    if quantization is None:
        return None
    for known in QUANTIZATIONS:
        if quantization == known:
            return known
    raise InvalidInputError(f"quantization must be one of {QUANTIZATIONS} or None, got {quantization!r}")


def default_prefetch_limit(k: int, n_docs: int) -> int:
    """Pooled candidates to rerank for the k best: 5 sqrt(n), never below 10 k or
    :data:`MIN_PREFETCH`: recall@10 against exact MaxSim stays near 0.96 from 1k to 100k documents
    (docs/results.md, "Where the defaults come from")."""
    return max(MIN_PREFETCH, 10 * k, int(5 * math.sqrt(max(n_docs, 0))))


@lru_cache(maxsize=1)
def bm25_model() -> Bm25:
    """The BM25 embedder of every Qdrant store (documents and queries), from Qdrant Edge."""
    try:
        from qdrant_edge import Bm25, Bm25Config
    except ImportError as exc:  # pragma: no cover - a dependency of the qdrant extra
        raise MissingDependencyError("BM25 needs qdrant-edge-py: pip install 'lmk-rag[qdrant]'") from exc
    return Bm25(Bm25Config(**BM25_SETTINGS))


def sparse_document(text: str) -> tuple[list[int], list[float]]:
    """BM25 term ids and weights of a document's text."""
    vec = bm25_model().embed_document(text)
    return list(vec.indices), [float(v) for v in vec.values]


def sparse_query(text: str) -> tuple[list[int], list[float]]:
    """BM25 term ids and weights of a query."""
    vec = bm25_model().embed_query(text)
    return list(vec.indices), [float(v) for v in vec.values]


@dataclass(frozen=True)
class PointData:
    """One document as a point, independent of the client library that writes it. The vectors
    stay float32 arrays (qdrant-edge-py takes them as they are; a long document's landmarks as
    Python floats took ~8x their size)."""

    id: str
    pooled: np.ndarray
    landmarks: np.ndarray
    sparse: tuple[list[int], list[float]] | None
    payload: dict[str, Any]


def to_point(doc_id: str, text: str, meta: dict[str, Any], mv: MultiVector) -> PointData:
    """A document as one point of the layout (see the module), its BM25 vector computed from the text."""
    return PointData(
        point_id(doc_id),
        np.asarray(mv.pooled, dtype=np.float32),
        np.asarray(mv.vectors, dtype=np.float32),
        sparse_document(text),
        {
            "doc_id": doc_id,
            "text": text,
            "metadata": meta,
            "spans": [list(s) for s in mv.spans],
            "n_tokens": int(mv.n_tokens),
        },
    )


def document_of(payload: dict[str, Any]) -> StoredDocument:
    """A point's payload as the stored document (id, text, metadata, spans)."""
    return StoredDocument(
        payload["doc_id"],
        payload["text"],
        payload.get("metadata") or {},
        [(int(s[0]), int(s[1])) for s in payload.get("spans", [])],
    )


def multivector_of(payload: dict[str, Any], pooled: Any, landmarks: Any) -> MultiVector:
    """A stored point back as the MultiVector it was written from (for copying between stores)."""
    spans = [(int(s[0]), int(s[1])) for s in payload.get("spans", [])]
    vectors = np.asarray(landmarks, dtype=np.float32)
    return MultiVector(np.asarray(pooled, dtype=np.float32), vectors, spans, int(payload.get("n_tokens", 0)))


@dataclass(frozen=True)
class Plan:
    """One search, described once and run by either store.

    ``kind``: ``maxsim`` (exact MaxSim over every document's landmarks), ``prefetch`` (the
    ``prefetch`` best by the pooled vector, HNSW, then exact MaxSim over their landmarks),
    ``pooled`` (the pooled vector alone) or ``bm25`` (the sparse BM25 vector alone).
    """

    kind: str
    limit: int
    where: ParsedFilter
    vector: list[float] | None = None
    sparse: tuple[list[int], list[float]] | None = None
    prefetch: int = 0
    payload: bool = True  # return each hit's payload (text, metadata, spans)
    landmarks: bool = True  # return each hit's landmark vectors (costly: every float becomes a Python object)
    ids: list[str] | None = None  # only these point ids


@dataclass(frozen=True)
class Found:
    """One search result as the stores return it: point id, payload, score, landmark vectors."""

    id: str  # the point id
    payload: dict[str, Any]  # empty when the plan asked for none
    score: float
    landmarks: np.ndarray  # (0, d) when the plan asked for none


def check_owner(point: Any, payload: Any) -> None:
    """Refuse a point whose payload names another document than its id says (a damaged id tracker
    pairs ids with other points' data: a wrong answer, unless refused here)."""
    doc_id = payload.get("doc_id") if isinstance(payload, dict) else None
    if doc_id is not None and point_id(str(doc_id)) != str(point):
        raise Exception(f"corrupt index: point {point} holds the payload of document {doc_id!r}")


def found(point_id: Any, payload: Any, score: float, vector: Any) -> Found:
    """A :class:`Found` from a store's raw point (vectors as returned, or none)."""
    check_owner(point_id, payload)
    lms = (vector or {}).get(LANDMARKS) if isinstance(vector, dict) else None
    return Found(
        str(point_id), payload or {}, float(score), np.asarray(lms if lms is not None else [], dtype=np.float32)
    )
