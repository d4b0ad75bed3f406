"""The landmark journal (see :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`): where each
store writes down the documents a write is changing before it touches the collection or the
landmark index, so a crash leaves them listed for the next open to re-derive."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .layout import point_id


class FileJournal:
    """The landmark journal of an embedded collection (see
    :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`): ``PATH/<collection>.landmarks.pending``,
    written atomically and synced before a write, removed after it."""

    def __init__(self, folder: Path, collection: str) -> None:
        self.path = folder / f"{collection}.landmarks.pending"

    def pending(self) -> list[str]:
        """See :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`."""
        try:
            listed = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            return ["*"]  # a list a crash cut short: every document may be concerned
        if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
            return ["*"]
        return listed

    def mark(self, doc_points: list[str]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`."""
        listed = sorted(set(self.pending()) | set(doc_points)) if self.path.exists() else list(doc_points)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(listed, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def clear(self) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`."""
        self.path.unlink(missing_ok=True)


class MetaJournal:
    """The landmark journal of a server collection (see
    :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`): a point of ``<collection>__lmk_meta``,
    written (``wait=True``) before a write and emptied after it."""

    def __init__(self, client: Any, meta_collection: str) -> None:
        self.client, self.meta, self.id = client, meta_collection, point_id("landmarks-pending")

    def pending(self) -> list[str]:
        """See :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`."""
        points = self.client.retrieve(self.meta, ids=[self.id], with_payload=True)
        listed = (points[0].payload or {}).get("documents") if points else None
        return [str(x) for x in listed] if isinstance(listed, list) else []

    def mark(self, doc_points: list[str]) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`."""
        self._write(sorted(set(self.pending()) | set(doc_points)))

    def clear(self) -> None:
        """See :class:`~lmk_rag.index.qdrant.store.LandmarkJournal`."""
        self._write([])

    def _write(self, documents: list[str]) -> None:
        from qdrant_client import models

        point = models.PointStruct(id=self.id, vector=[1.0], payload={"documents": documents})
        self.client.upsert(self.meta, points=[point], wait=True)
