"""One multi-vector index API, two backends with the same semantics.

A document is stored with its pooled LMK vector, every landmark vector and each landmark's
character span, so a hit names the document *and* the passage that matched. Re-adding an id
replaces the document and all its landmarks; an index records the encoder's fingerprint and
refuses an encoder that differs.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..encoder import LMKEncoder, check_texts
from ..types import Fingerprint, MultiVector

SEARCH_MODES = ("maxsim", "prefetch", "pooled")
_ALLOWED_META = (str, int, float, bool)


@dataclass(frozen=True)
class StoredDocument:
    id: str
    text: str
    metadata: dict[str, Any]
    spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Hit:
    """A search result: the document, its score, and the landmark passage that matched best."""

    id: str
    score: float
    text: str
    metadata: dict[str, Any]
    landmark: int
    span: tuple[int, int]
    passage: str


def check_metadata(metadatas: Sequence[Mapping[str, Any]] | None, n: int) -> list[dict[str, Any]]:
    if metadatas is None:
        return [{} for _ in range(n)]
    items = list(metadatas)
    if len(items) != n:
        raise ValueError(f"metadatas has {len(items)} entries for {n} texts; give one dict per text")
    out = []
    for i, meta in enumerate(items):
        if meta is None:
            meta = {}
        if not isinstance(meta, Mapping):
            raise TypeError(f"metadatas[{i}] must be a dict, got {type(meta).__name__}")
        for key, value in meta.items():
            if not isinstance(key, str) or key.startswith("_lmk"):
                raise ValueError(f"metadatas[{i}]: keys must be str and not start with '_lmk', got {key!r}")
            if value is not None and not isinstance(value, _ALLOWED_META):
                raise TypeError(f"metadatas[{i}][{key!r}] must be str, int, float, bool or None, got {type(value).__name__}")
        out.append(dict(meta))
    return out


def check_ids(ids: Sequence[str] | None, n: int) -> list[str]:
    if ids is None:
        return [uuid.uuid4().hex for _ in range(n)]
    items = list(ids)
    if len(items) != n:
        raise ValueError(f"ids has {len(items)} entries for {n} texts; give one id per text")
    if not all(isinstance(i, str) and i for i in items):
        raise TypeError("ids must be non-empty strings")
    if len(set(items)) != len(items):
        raise ValueError("ids contains duplicates; each document needs its own id")
    return items


def check_filter(where: Mapping[str, Any] | None) -> dict[str, Any]:
    """Equality filters on metadata, combined with AND: ``{"lang": "en", "year": 2024}``."""
    if where is None:
        return {}
    if not isinstance(where, Mapping):
        raise TypeError(f"filter must be a dict of metadata key -> value, got {type(where).__name__}")
    for key, value in where.items():
        if not isinstance(value, _ALLOWED_META):
            raise TypeError(f"filter[{key!r}] must be str, int, float or bool (equality), got {type(value).__name__}")
    return dict(where)


def best_landmark(q: np.ndarray, vectors: np.ndarray) -> int:
    return int(np.argmax(vectors @ q)) if len(vectors) else 0


def make_hit(doc: StoredDocument, score: float, landmark: int, neighbours: int) -> Hit:
    spans = doc.spans or [(0, len(doc.text))]
    landmark = min(landmark, len(spans) - 1)
    lo, hi = max(0, landmark - neighbours), min(len(spans) - 1, landmark + neighbours)
    span = (spans[lo][0], spans[hi][1])
    return Hit(doc.id, float(score), doc.text, doc.metadata, landmark, tuple(spans[landmark]), doc.text[span[0]:span[1]])


class MultiVectorIndex(ABC):
    """Methods shared by every backend; subclasses store and query."""

    def __init__(self, encoder: LMKEncoder | None) -> None:
        self.encoder = encoder if encoder is not None else LMKEncoder()
        if not isinstance(self.encoder, LMKEncoder):
            raise TypeError(f"encoder must be an LMKEncoder, got {type(self.encoder).__name__}")

    def _check_fingerprint(self, stored: Fingerprint | None) -> None:
        mine = self.encoder.fingerprint
        if stored is None:
            self._write_fingerprint(mine)
            return
        diffs = stored.differences(mine)
        if diffs:
            raise ValueError(
                "this index was built with another encoder (" + "; ".join(diffs) + "); open it with the "
                "encoder it was built with, or rebuild it into a new collection"
            )

    # ---------------------------------------------------------------- public API
    def add(self, texts: Sequence[str], ids: Sequence[str] | None = None,
            metadatas: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
        """Encode and store; an id that exists is replaced with all its landmarks."""
        items = check_texts(texts)
        doc_ids = check_ids(ids, len(items))
        metas = check_metadata(metadatas, len(items))
        if not items:
            return []
        multis = self.encoder.encode_multi(items)
        self._upsert(doc_ids, items, metas, multis)
        return doc_ids

    def add_encoded(self, multis: Sequence[MultiVector], texts: Sequence[str], ids: Sequence[str] | None = None,
                    metadatas: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
        """Store documents already encoded by this index's encoder (e.g. encoded elsewhere in bulk)."""
        items = check_texts(texts)
        if len(multis) != len(items) or not all(isinstance(m, MultiVector) for m in multis):
            raise ValueError("multis must hold one MultiVector per text")
        if any(m.vectors.shape[1] != self.encoder.dimension for m in multis):
            raise ValueError(f"vectors must have the encoder's dimension {self.encoder.dimension}")
        doc_ids = check_ids(ids, len(items))
        if items:
            self._upsert(doc_ids, items, check_metadata(metadatas, len(items)), list(multis))
        return doc_ids

    def search(self, query: str, k: int = 4, *, filter: Mapping[str, Any] | None = None,
               mode: str = "maxsim", neighbours: int = 0) -> list[Hit]:
        """The k best documents for ``query``, each with its best landmark's span and passage."""
        if not isinstance(query, str):
            raise TypeError(f"query must be str, got {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if mode not in self.modes:
            raise ValueError(f"mode must be one of {self.modes}, got {mode!r}")
        if isinstance(neighbours, bool) or not isinstance(neighbours, int) or neighbours < 0:
            raise ValueError(f"neighbours must be an int >= 0, got {neighbours!r}")
        q = self.encoder.encode_query(query)
        return self.search_by_vector(q, k, filter=filter, mode=mode, neighbours=neighbours)

    def search_by_vector(self, q: np.ndarray, k: int = 4, *, filter: Mapping[str, Any] | None = None,
                         mode: str = "maxsim", neighbours: int = 0) -> list[Hit]:
        return self._search(np.asarray(q, dtype=np.float32), k, check_filter(filter), mode, neighbours)

    def get(self, ids: Sequence[str]) -> list[StoredDocument]:
        """Stored documents for the ids that exist, in the order asked."""
        items = list(ids)
        return self._get(check_ids(items, len(items)) if items else [])

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents and all their landmarks; missing ids are not an error."""
        items = list(ids)
        if not all(isinstance(i, str) for i in items):
            raise TypeError("ids must be strings")
        if items:
            self._delete(items)

    def ids(self) -> list[str]:
        """Every document id in the index."""
        return self._ids()

    def __len__(self) -> int:
        return self._count()

    def __enter__(self) -> "MultiVectorIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - backends override when they hold resources
        pass

    # ---------------------------------------------------------------- backend hooks
    modes: tuple[str, ...] = SEARCH_MODES

    @abstractmethod
    def _write_fingerprint(self, fp: Fingerprint) -> None: ...

    @abstractmethod
    def _upsert(self, ids: list[str], texts: list[str], metas: list[dict], multis: list[MultiVector]) -> None: ...

    @abstractmethod
    def _search(self, q: np.ndarray, k: int, where: dict, mode: str, neighbours: int) -> list[Hit]: ...

    @abstractmethod
    def _get(self, ids: list[str]) -> list[StoredDocument]: ...

    @abstractmethod
    def _delete(self, ids: list[str]) -> None: ...

    @abstractmethod
    def _count(self) -> int: ...

    @abstractmethod
    def _ids(self) -> list[str]: ...
