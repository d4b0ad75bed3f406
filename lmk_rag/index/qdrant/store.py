"""The contract :class:`~.index.QdrantIndex` holds its store to: the embedded engine
(:class:`~.edge_store.EdgeStore`) and a server through qdrant-client
(:class:`~.client_store.ClientStore`) keep the same collection layout (:mod:`.layout`) and
answer the same calls, so the index never asks which one it has."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from ...types import Fingerprint
from ..filters import ParsedFilter, ValueKind
from .layout import Found, Plan, PointData, point_id

#: A stored point as the stores return it: its payload, its pooled vector and its landmark vectors
#: (the vectors are None when not asked for).
Record = tuple[dict[str, Any], Any, Any]


class QdrantStore(Protocol):
    """One collection of LMK documents, one point each (ids: :func:`~.layout.point_id`)."""

    #: How landmark vectors are quantized in RAM: None, ``"int8"`` or ``"binary"``.
    quantization: str | None

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
        self, offset: Any, limit: int, with_vectors: bool, where: ParsedFilter = None
    ) -> tuple[list[Record], Any]:
        """Up to ``limit`` points from ``offset`` (matching ``where``) and the next offset (None at the end)."""
        ...

    def count(self) -> int:
        """Points in the collection."""
        ...

    def landmark_candidates(self, vector: list[float], limit: int) -> list[tuple[str, float]] | None:
        """Up to ``limit`` documents ``(point id, best landmark's score)`` whose best landmarks are
        nearest ``vector`` through the landmark index's HNSW graph, best first (the score is the
        document's MaxSim where the index is not quantized). None when the landmark index cannot be
        read (the caller falls back to pooled candidates)."""
        ...

    def rebuild_landmarks(self) -> None:
        """Rebuild the landmark index from the collection's stored landmark vectors."""
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


def stored_landmarks(store: QdrantStore, batch: int = 256) -> Iterator[list[tuple[str, Any]]]:
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
