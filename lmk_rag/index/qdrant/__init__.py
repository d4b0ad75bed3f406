"""The Qdrant backend: :class:`QdrantIndex` (:mod:`.index`) over one collection layout
(:mod:`.layout`) kept by either store behind the :class:`~.store.QdrantStore` contract: the
embedded engine (Qdrant Edge, :mod:`.edge_store`) or a server through qdrant-client
(:mod:`.client_store`)."""

from .index import DEFAULT_PATH, QdrantIndex
from .layout import point_id

__all__ = ["DEFAULT_PATH", "QdrantIndex", "point_id"]
