"""Multi-vector LMK indexes: the same API over Qdrant and Chroma."""

from typing import Any

from .base import SEARCH_MODES, MultiVectorIndex, SearchMode
from .copy import copy_index
from .filters import FilterArg, parse_filter
from .hits import Hit, StoredDocument


def __getattr__(name: str) -> Any:
    # Backends import their client libraries only when used.
    if name == "QdrantIndex":
        from .qdrant import QdrantIndex

        return QdrantIndex
    if name == "ChromaIndex":
        from .chroma import ChromaIndex

        return ChromaIndex
    if name == "RemoteIndex":
        from .remote import RemoteIndex

        return RemoteIndex
    raise AttributeError(name)


__all__ = [
    "SEARCH_MODES",
    "ChromaIndex",
    "FilterArg",
    "Hit",
    "MultiVectorIndex",
    "QdrantIndex",
    "RemoteIndex",
    "SearchMode",
    "StoredDocument",
    "copy_index",
    "parse_filter",
]
