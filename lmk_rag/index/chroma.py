"""Chroma backend: one row per landmark, the document text stored once, grouped back per document.

Collections: ``<name>`` holds one row per landmark (its vector; metadata: document id, landmark
index, generation, and the document's metadata for filtering), ``<name>__docs`` one row per
document (pooled vector, text, spans, metadata). Writes are made all-or-none visible with a
generation tag: new landmark rows are written first, then the document row naming their
generation (a single-row write), then the old generation's rows are removed. Searches only
count landmark rows whose generation matches their document row.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..encoder import LMKEncoder
from ..types import Fingerprint, MultiVector
from .base import Hit, MultiVectorIndex, StoredDocument, best_landmark, make_hit

_ROWS_PER_WRITE = 2000
_SPACE = {"hnsw:space": "cosine"}


def _clean(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if v is not None}


def _where(*clauses: dict[str, Any]) -> dict[str, Any] | None:
    parts = [c for c in clauses if c]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


class ChromaIndex(MultiVectorIndex):
    """LMK documents in Chroma: ``PersistentClient(path)`` by default, or a server by host/port.
    Search modes: ``maxsim`` (landmark rows grouped per document, max) and ``pooled``."""

    modes = ("maxsim", "pooled")

    def __init__(self, path: str | Path | None = None, *, host: str | None = None, port: int = 8000,
                 collection: str = "lmk", encoder: LMKEncoder | None = None, client: Any = None,
                 overfetch: int = 8) -> None:
        try:
            import chromadb
        except ImportError as exc:  # pragma: no cover
            raise ImportError("ChromaIndex needs chromadb: pip install 'lmk-rag[chroma]'") from exc
        if path is not None and host is not None:
            raise ValueError("give path= (embedded) or host=/port= (server), not both")
        super().__init__(encoder)
        if client is not None:
            self.client = client
        elif host is not None:
            self.client = chromadb.HttpClient(host=host, port=port)
        else:
            self.client = chromadb.PersistentClient(path=str(path or "./lmk_chroma"))
        self.overfetch = overfetch
        self.name = collection
        self.landmarks = self.client.get_or_create_collection(collection, metadata=_SPACE, embedding_function=None)
        self.docs = self.client.get_or_create_collection(f"{collection}__docs", metadata=_SPACE,
                                                         embedding_function=None)
        self.meta = self.client.get_or_create_collection(f"{collection}__lmk_meta", embedding_function=None)
        found = self.meta.get(ids=["fingerprint"], include=["metadatas"])
        stored = Fingerprint.from_dict(json.loads(found["metadatas"][0]["json"])) if found["ids"] else None
        self._check_fingerprint(stored)

    def _write_fingerprint(self, fp: Fingerprint) -> None:
        self.meta.upsert(ids=["fingerprint"], embeddings=[[1.0]], metadatas=[{"json": fp.to_json()}])

    # ---------------------------------------------------------------- writes
    def _upsert(self, ids: list[str], texts: list[str], metas: list[dict], multis: list[MultiVector]) -> None:
        gens = [uuid.uuid4().hex for _ in ids]
        rows, row_meta, vectors = [], [], []
        for doc_id, gen, meta, mv in zip(ids, gens, metas, multis):
            rows += [f"{doc_id}\x1f{gen}\x1f{i}" for i in range(len(mv))]
            row_meta += [{**_clean(meta), "_lmk_doc": doc_id, "_lmk_gen": gen, "_lmk_i": i} for i in range(len(mv))]
            vectors.append(mv.vectors)
        matrix = np.concatenate(vectors)
        # 1. new landmark rows (invisible: no document row names their generation yet)
        for s in range(0, len(rows), _ROWS_PER_WRITE):
            self.landmarks.add(ids=rows[s : s + _ROWS_PER_WRITE], embeddings=matrix[s : s + _ROWS_PER_WRITE],
                               metadatas=row_meta[s : s + _ROWS_PER_WRITE])
        # 2. document rows: each single-row write switches its document to the new generation
        self.docs.upsert(ids=ids, embeddings=np.stack([mv.pooled for mv in multis]), documents=texts, metadatas=[
            {**_clean(meta), "_lmk_gen": gen, "_lmk_spans": json.dumps(mv.spans), "_lmk_meta": json.dumps(meta)}
            for gen, meta, mv in zip(gens, metas, multis)
        ])
        # 3. the replaced generations' rows
        self.landmarks.delete(where={"$and": [{"_lmk_doc": {"$in": ids}}, {"_lmk_gen": {"$nin": gens}}]})

    def _delete(self, ids: list[str]) -> None:
        self.docs.delete(ids=ids)
        self.landmarks.delete(where={"_lmk_doc": {"$in": ids}})

    # ---------------------------------------------------------------- reads
    def _documents(self, ids: list[str]) -> dict[str, tuple[StoredDocument, str]]:
        if not ids:
            return {}
        got = self.docs.get(ids=ids, include=["documents", "metadatas"])
        out = {}
        for doc_id, text, meta in zip(got["ids"], got["documents"], got["metadatas"]):
            spans = [tuple(s) for s in json.loads(meta["_lmk_spans"])]
            out[doc_id] = (StoredDocument(doc_id, text, json.loads(meta["_lmk_meta"]), spans), meta["_lmk_gen"])
        return out

    def _get(self, ids: list[str]) -> list[StoredDocument]:
        docs = self._documents(ids)
        return [docs[i][0] for i in ids if i in docs]

    def _ids(self) -> list[str]:
        return list(self.docs.get(include=[])["ids"])

    def _count(self) -> int:
        return self.docs.count()

    def _search(self, q: np.ndarray, k: int, where: dict, mode: str, neighbours: int) -> list[Hit]:
        user = _where(*({key: value} for key, value in where.items()))
        if mode == "pooled":
            return self._search_pooled(q, k, user, neighbours)
        total = self.landmarks.count()
        n = min(total, k * self.overfetch)
        while n > 0:
            res = self.landmarks.query(query_embeddings=[q], n_results=n, where=user,
                                       include=["metadatas", "distances"])
            best: dict[str, tuple[float, int, str]] = {}
            for meta, dist in zip(res["metadatas"][0], res["distances"][0]):
                doc, score = meta["_lmk_doc"], 1.0 - dist
                if doc not in best or score > best[doc][0]:
                    best[doc] = (score, meta["_lmk_i"], meta["_lmk_gen"])
            docs = self._documents(list(best))
            live = [(s, i, d) for d, (s, i, g) in best.items() if d in docs and docs[d][1] == g]
            if len(live) >= k or n >= total or len(res["ids"][0]) < n:
                live.sort(key=lambda t: -t[0])
                return [make_hit(docs[d][0], s, i, neighbours) for s, i, d in live[:k]]
            n = min(total, n * 4)
        return []

    def _search_pooled(self, q: np.ndarray, k: int, where: dict | None, neighbours: int) -> list[Hit]:
        res = self.docs.query(query_embeddings=[q], n_results=min(k, max(self.docs.count(), 1)), where=where,
                              include=["distances"])
        ids = res["ids"][0]
        docs = self._documents(ids)
        hits = []
        for doc_id, dist in zip(ids, res["distances"][0]):
            doc, gen = docs[doc_id]
            rows = self.landmarks.get(where={"$and": [{"_lmk_doc": doc_id}, {"_lmk_gen": gen}]},
                                      include=["embeddings", "metadatas"])
            order = np.argsort([m["_lmk_i"] for m in rows["metadatas"]])
            vectors = np.asarray(rows["embeddings"], dtype=np.float32)[order] if len(order) else np.zeros((0, len(q)))
            hits.append(make_hit(doc, 1.0 - dist, best_landmark(q, vectors), neighbours))
        return hits
