"""Check every stored document's vectors and re-encode the ones that are damaged.

A document is damaged when its vectors cannot be read, when it has not one landmark vector per
stored span, when a value is not finite, or (for an encoder that normalises) when a vector is not
of unit length: what a truncated or overwritten file leaves. Its stored text is encoded again and
written back under the same id; a document whose text cannot be read either is listed, for the
user to ingest again from its file. Where the damaged storage refuses the writes (a truncated
vector file), an embedded Qdrant index is rebuilt beside itself from what can be read (healthy
vectors copied, damaged ones re-encoded) and takes the old one's place; the old folder is kept
as ``PATH.damaged``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DamagedIndexError, LMKError
from ..types import MultiVector
from .base import MultiVectorIndex
from .hits import StoredDocument

# How far from 1 a stored unit vector's length may be (float32 storage, int8 rescoring copies).
NORM_TOLERANCE = 1e-3
_BATCH = 64


@dataclass
class VerifyReport:
    """``checked`` documents; ``reencoded``: ids written again from their stored text;
    ``unreadable``: ids whose text could not be read either (ingest their files again)."""

    checked: int = 0
    reencoded: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    rebuilt: str | None = None  # where the damaged folder was kept, when the index was rebuilt

    def line(self) -> str:
        """The report as one line for the command line."""
        out = f"verified {self.checked} documents: {len(self.reencoded)} re-encoded (damaged vectors)"
        if self.rebuilt:
            out += f"; the index was rebuilt, the damaged one kept at {self.rebuilt}"
        if self.unreadable:
            out += f", {len(self.unreadable)} unreadable (ingest their files again): {', '.join(self.unreadable[:5])}"
        return out


def healthy(doc: StoredDocument, multi: MultiVector, normalized: bool) -> bool:
    """True when the stored vectors are what an encoder writes (see the module docstring)."""
    vectors = np.asarray(multi.vectors, dtype=np.float32)
    pooled = np.asarray(multi.pooled, dtype=np.float32)
    if len(vectors) == 0 or len(vectors) != len(doc.spans) or vectors.ndim != 2:
        return False
    if not (np.isfinite(vectors).all() and np.isfinite(pooled).all()):
        return False
    if normalized:
        norms = np.linalg.norm(np.vstack([vectors, pooled[None, :]]), axis=1)
        return bool(np.all(np.abs(norms - 1.0) <= NORM_TOLERANCE))
    return True


def verify_index(index: MultiVectorIndex) -> tuple[MultiVectorIndex, VerifyReport]:
    """Check every document of ``index`` and re-encode the damaged ones from their stored text
    (same id, same metadata). Returns the index to go on with: ``index`` itself, or, where its
    storage had to be rebuilt, the rebuilt one (``index`` is then closed)."""
    report = VerifyReport()
    ids = index.ids()
    damaged: list[str] = []
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        for doc_id, found in _read(index, chunk).items():
            report.checked += 1
            if found is None or not healthy(found[0], found[1], index.encoder.normalize):
                damaged.append(doc_id)
    try:
        for doc_id in damaged:
            if _reencode(index, index, doc_id):
                report.reencoded.append(doc_id)
            else:
                report.unreadable.append(doc_id)
    except DamagedIndexError:
        if getattr(index, "folder", None) is None or not hasattr(index, "collection"):
            raise
        return _rebuild(index, ids, report)
    rebuild_landmarks = getattr(index, "rebuild_landmark_index", None)
    if rebuild_landmarks is not None:  # derived from the stored landmarks: rebuilt, never trusted
        rebuild_landmarks()
    return index, report


def _reencode(source: MultiVectorIndex, target: MultiVectorIndex, doc_id: str) -> bool:
    """Encode ``doc_id``'s stored text again into ``target``; False when the text cannot be read."""
    try:
        docs = source.get([doc_id])
    except DamagedIndexError:
        docs = []
    if not docs:
        return False
    target.add([docs[0].text], ids=[doc_id], metadatas=[docs[0].metadata])
    return True


def _rebuild(index: MultiVectorIndex, ids: list[str], report: VerifyReport) -> tuple[MultiVectorIndex, VerifyReport]:
    """Copy what can be read of an embedded Qdrant index into a new folder (re-encoding the damaged
    documents), then put it in the old one's place, keeping the old folder as ``PATH.damaged``."""
    from .qdrant import QdrantIndex

    assert isinstance(index, QdrantIndex) and index.folder is not None
    folder = Path(index.folder)
    fresh = folder.parent / f".{folder.name}.rebuild"
    shutil.rmtree(fresh, ignore_errors=True)
    encoder, collection, quantization = index.encoder, index.collection, index.quantization
    target = QdrantIndex(fresh, encoder=encoder, collection=collection, quantization=quantization)
    report.reencoded, report.unreadable = [], []
    try:
        for start in range(0, len(ids), _BATCH):
            chunk = ids[start : start + _BATCH]
            for doc_id, found in _read(index, chunk).items():
                if found is not None and healthy(found[0], found[1], index.encoder.normalize):
                    doc, multi = found
                    target.add_encoded([multi], [doc.text], ids=[doc.id], metadatas=[doc.metadata])
                elif _reencode(index, target, doc_id):
                    report.reencoded.append(doc_id)
                else:
                    report.unreadable.append(doc_id)
    finally:
        target.close()
        index.close()
    kept = folder.with_name(f"{folder.name}.damaged")
    if kept.exists():
        kept = folder.with_name(f"{folder.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    folder.rename(kept)
    fresh.rename(folder)
    report.rebuilt = str(kept)
    return QdrantIndex(folder, encoder=encoder, collection=collection, quantization=quantization), report


def _read(index: MultiVectorIndex, ids: Sequence[str]) -> dict[str, tuple[StoredDocument, MultiVector] | None]:
    """id -> its stored document and vectors, or None where they cannot be read (one by one
    after a batch fails, so one damaged document does not hide the others)."""
    try:
        found = {doc.id: (doc, mv) for doc, mv in index.get_encoded(list(ids))}
        return {i: found.get(i) for i in ids}
    except LMKError:
        out: dict[str, tuple[StoredDocument, MultiVector] | None] = {}
        for i in ids:
            try:
                one = index.get_encoded([i])
                out[i] = one[0] if one else None
            except LMKError:
                out[i] = None
        return out
