"""Chroma backend: one row per landmark, the document text stored once, grouped back per document.

Collections: ``<name>`` holds one row per landmark (its vector; metadata: document id, landmark
index, generation, and the document's metadata for filtering), ``<name>__docs`` one row per
document (pooled vector, text, spans, metadata). A write is all-or-none visible through a
generation tag, and safe against concurrent writers of the same ids (threads, processes, or
clients of one server), without locks:

1. the new landmark rows are added under a fresh generation (invisible: no document row names it);
2. the document row is switched to that generation (a single-row upsert, the commit point);
3. clean-up removes only generations known to be dead: our own if another writer's document row
   won (we read the row back), and the one the row named before our write, once it is no longer
   live (a generation, once replaced, never becomes live again). Rows of a write that is still in
   flight are never removed, so no writer can delete another's live landmarks.

Landmarks left by a writer that died between steps 1 and 2, or by two writers that replaced one
generation at once, are invisible to searches. An embedded store (``path=``) takes a file lock for
the length of each write, so no other write is in flight there and every generation its document
rows do not name is removed at once; on a server they are removed once older than
:data:`STALE_SECONDS`. Searches only count landmark rows whose generation matches their document row.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..encoder import LMKEncoder
from ..errors import IndexUnavailableError, InvalidInputError, LMKError, MissingDependencyError
from ..types import Fingerprint, MultiVector
from .base import MultiVectorIndex, SearchMode
from .filters import NativeFilter, ParsedFilter, to_chroma_where
from .hits import Hit, PassageRequest, StoredDocument, hit_from_vectors, make_hit
from .uri import IndexURI

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

_ROWS_PER_WRITE = 2000
# Generations older than this that no document row names are leftovers of dead writes (no write of
# one batch takes this long), so any later write of the same document may remove them.
STALE_SECONDS = 3600
logger = logging.getLogger(__name__)
_SPACE = {"hnsw:space": "cosine"}
#: HNSW search breadth of the landmark collection: well above the rows a search asks for (k x
#: overfetch), so the nearest landmarks are found whatever order concurrent writers inserted them in
#: (Chroma's default, 100, let a few rank-5 documents differ between two identical Ray ingests).
LANDMARK_SEARCH_EF = 256
DEFAULT_PATH = "./lmk_chroma"
WRITE_LOCK = ".lmk_write.lock"


@contextmanager
def folder_write_lock(folder: Path | None) -> Iterator[bool]:
    """Hold an exclusive lock on ``folder`` (processes and threads alike); yields whether one is held."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: stale rows wait for STALE_SECONDS instead
        fcntl = None  # type: ignore[assignment]
    if folder is None or fcntl is None:
        yield False
        return
    with open(folder / WRITE_LOCK, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def unavailable(exc: BaseException, where: str, opening: bool = False) -> BaseException:
    """An :class:`IndexUnavailableError` for a server that does not answer (or, when ``opening``,
    a store that cannot be opened); anything else passes through unchanged."""
    if isinstance(exc, LMKError):
        return exc
    import httpx

    if isinstance(exc, (httpx.TransportError, ConnectionError)) or "Could not connect" in str(exc):
        return IndexUnavailableError(
            f"cannot reach the Chroma server at {where} ({exc}); start it, or check host and port"
        )
    if opening and (isinstance(exc, (OSError, ValueError)) or type(exc).__module__.startswith("chromadb")):
        return IndexUnavailableError(f"cannot open the Chroma index at {where}: {type(exc).__name__}: {exc}")
    return exc


def _clean(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if v is not None}


def stored_fingerprint(
    collection: str,
    *,
    path: str | None = None,
    host: str | None = None,
    port: int | None = None,
    ssl: bool = False,
    headers: dict[str, str] | None = None,
) -> Fingerprint | None:
    """The fingerprint a Chroma index records (a folder at ``path``, else a server), or None where
    it holds none; a folder without a Chroma database is not created."""
    import chromadb

    if path is not None and not (Path(path) / "chroma.sqlite3").is_file():
        return None
    where = path or f"{'https' if ssl else 'http'}://{host}:{port}"
    try:
        if path is not None:
            client: Any = chromadb.PersistentClient(path=path)
        else:
            client = chromadb.HttpClient(host=host or "localhost", port=port or 8000, ssl=ssl, headers=headers)
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if f"{collection}__lmk_meta" not in names:
            return None
        return fingerprint_in(client.get_collection(f"{collection}__lmk_meta"))
    except Exception as exc:
        raise unavailable(exc, where, opening=True) from exc


def fingerprint_in(meta: Collection) -> Fingerprint | None:
    """The fingerprint row of a ``<name>__lmk_meta`` collection, or None where there is none yet."""
    found = meta.get(ids=["fingerprint"], include=["metadatas"])
    if not found["ids"] or not found["metadatas"]:
        return None
    return Fingerprint.from_dict(json.loads(str(found["metadatas"][0]["json"])))


class ChromaIndex(MultiVectorIndex):
    """LMK documents in Chroma: ``PersistentClient(path)`` by default, or a server by host/port.
    Search modes: ``maxsim`` (landmark rows grouped per document, max) and ``pooled``.

    Example:
        ```python
        from lmk_rag.index import ChromaIndex

        index = ChromaIndex("./chroma_index")                     # embedded folder
        server = ChromaIndex(host="localhost", port=8000)         # `chroma run --path DIR`
        ```

    Args:
        path: The embedded index's folder.
        host: A Chroma server's host (with ``port``, ``ssl``, ``headers``).
        port: The server's port.
        ssl: Speak HTTPS to the server.
        headers: HTTP headers for the server (e.g. authorization).
        collection: The collection's name.
        encoder: The :class:`~lmk_rag.LMKEncoder`; default: the packaged model.
        client: A Chroma client you made.
        overfetch: Landmark rows fetched per document wanted (MaxSim groups them per document).

    Raises:
        InvalidInputError: Conflicting arguments (named).
        IncompatibleIndexError: The collection was built with another encoder.
        MissingDependencyError: chromadb is not installed (``pip install 'lmk-rag[chroma]'``).
    """

    modes = ("maxsim", "pooled")

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        host: str | None = None,
        port: int = 8000,
        ssl: bool = False,
        headers: dict[str, str] | None = None,
        collection: str = "lmk",
        encoder: LMKEncoder | None = None,
        client: Any = None,
        overfetch: int = 8,
    ) -> None:
        try:
            import chromadb
        except ImportError as exc:  # pragma: no cover
            raise MissingDependencyError("ChromaIndex needs chromadb: pip install 'lmk-rag[chroma]'") from exc
        if path is not None and host is not None:
            raise InvalidInputError("give path= (embedded) or host=/port= (server), not both")
        super().__init__(encoder)
        if path is not None:
            path = Path(path).expanduser()  # "~/index" is the home folder's, never a folder named "~"
        self.where = f"{'https' if ssl else 'http'}://{host}:{port}" if host is not None else str(path or DEFAULT_PATH)
        server: dict[str, Any] = {"host": host, "port": port, "ssl": ssl, **({"headers": headers} if headers else {})}
        self._server = server if host is not None and client is None else None
        self.folder = Path(path or DEFAULT_PATH) if host is None and client is None else None
        self.overfetch = overfetch
        self.name = collection
        self._owns_client = client is None
        try:
            if client is not None:
                self.client = client
            elif host is not None:
                self.client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers)
            else:
                folder = Path(path or DEFAULT_PATH)
                if folder.exists() and not folder.is_dir():
                    raise IndexUnavailableError(
                        f"the index path {str(folder)!r} is a file; give a folder for chroma:PATH"
                    )
                self.client = chromadb.PersistentClient(path=str(folder))
            self._open_collections()
            stored = fingerprint_in(self.meta)
        except Exception as exc:
            raise unavailable(exc, self.where, opening=True) from exc
        self._disk_state = self._on_disk()
        self._check_fingerprint(stored)

    def _open_collections(self) -> None:
        self.landmarks = self.client.get_or_create_collection(
            self.name, metadata={**_SPACE, "hnsw:search_ef": LANDMARK_SEARCH_EF}, embedding_function=None
        )
        self._widen_search(self.landmarks)
        self.docs = self.client.get_or_create_collection(f"{self.name}__docs", metadata=_SPACE, embedding_function=None)
        self.meta = self.client.get_or_create_collection(f"{self.name}__lmk_meta", embedding_function=None)

    @staticmethod
    def _widen_search(collection: Any) -> None:
        """Raise the search breadth of a landmark collection made before it was set; a store that
        cannot change it (an older server, read-only media) keeps its own."""
        try:
            hnsw = (collection.configuration or {}).get("hnsw") or {}
            if int(hnsw.get("ef_search") or LANDMARK_SEARCH_EF) < LANDMARK_SEARCH_EF:
                collection.modify(configuration={"hnsw": {"ef_search": LANDMARK_SEARCH_EF}})
        except Exception as exc:  # noqa: BLE001 - a narrower search, never a failed open
            logger.debug("left the landmark collection's ef_search as it is: %s", exc)

    def _on_disk(self) -> tuple[tuple[int, int], ...] | None:
        """When and how much the embedded folder's database was last written (None for a server)."""
        if self.folder is None or not self._owns_client:
            return None
        state = []
        for name in ("chroma.sqlite3", "chroma.sqlite3-wal"):
            try:
                st = os.stat(self.folder / name)
            except OSError:
                continue
            state.append((st.st_mtime_ns, st.st_size))
        return tuple(state)

    def _before_backend_call(self) -> None:
        """Embedded Chroma keeps its vector index in memory and does not see what another process
        wrote to the folder: when the folder changed since this object last read or wrote it, the
        client is opened again (writes of this object update the mark, so they cost nothing)."""
        state = self._on_disk()
        if state is None or state == self._disk_state:
            return
        import chromadb

        logger.info("the Chroma folder %s changed in another process; reopening it", self.folder)
        self.client.close()
        self.client = chromadb.PersistentClient(path=str(self.folder))
        self._open_collections()
        self._disk_state = state

    def close(self) -> None:
        """Release the Chroma client (an embedded one lets go of the folder)."""
        with self._lock:
            if not self._closed and self._owns_client:
                with contextlib.suppress(Exception):  # a server already gone has nothing to release
                    self.client.close()
            super().close()

    def _translate_error(self, exc: BaseException) -> BaseException:
        return unavailable(exc, self.where)

    def address(self) -> IndexURI | None:
        """A server collection is reachable from other processes by host and port; a folder is not."""
        if self._server is None:
            return None
        return IndexURI("chroma", collection=self.name, **self._server)

    def _write_fingerprint(self, fp: Fingerprint) -> None:
        self.meta.upsert(ids=["fingerprint"], embeddings=[[1.0]], metadatas=[{"json": fp.to_json()}])
        self._disk_state = self._on_disk()

    # ---------------------------------------------------------------- writes
    def _upsert(self, ids: list[str], texts: list[str], metas: list[dict[str, Any]], multis: list[MultiVector]) -> None:
        now = time.time()
        gens = [uuid.uuid4().hex for _ in ids]
        rows, row_meta, vectors = [], [], []
        for doc_id, gen, meta, mv in zip(ids, gens, metas, multis):
            rows += [f"{doc_id}\x1f{gen}\x1f{i}" for i in range(len(mv))]
            row_meta += [
                {**_clean(meta), "_lmk_doc": doc_id, "_lmk_gen": gen, "_lmk_i": i, "_lmk_t": now}
                for i in range(len(mv))
            ]
            vectors.append(mv.vectors)
        matrix = np.concatenate(vectors)
        with folder_write_lock(self.folder) as exclusive:
            # 1. new landmark rows (invisible: no document row names their generation yet)
            for s in range(0, len(rows), _ROWS_PER_WRITE):
                self.landmarks.add(
                    ids=rows[s : s + _ROWS_PER_WRITE],
                    embeddings=matrix[s : s + _ROWS_PER_WRITE],
                    metadatas=row_meta[s : s + _ROWS_PER_WRITE],
                )
            before = self._live_generations(ids)
            # 2. document rows: each single-row write switches its document to the new generation
            self.docs.upsert(
                ids=ids,
                embeddings=np.stack([mv.pooled for mv in multis]),
                documents=texts,
                metadatas=[
                    {
                        **_clean(meta),
                        "_lmk_gen": gen,
                        "_lmk_spans": json.dumps(mv.spans),
                        "_lmk_meta": json.dumps(meta),
                        "_lmk_tokens": mv.n_tokens,
                    }
                    for gen, meta, mv in zip(gens, metas, multis)
                ],
            )
            # 3. only generations known to be dead (see the module docstring)
            after = self._live_generations(ids)
            dead = [gen for doc_id, gen in zip(ids, gens) if after.get(doc_id) != gen]  # another writer won
            dead += [old for doc_id, old in before.items() if old != after.get(doc_id)]  # the replaced ones
            if dead:
                self.landmarks.delete(where={"_lmk_gen": {"$in": dead}})
            self._remove_unnamed(ids, after, None if exclusive else now - STALE_SECONDS)
            self._disk_state = self._on_disk()  # this object's own write: nothing to catch up with

    def _live_generations(self, ids: list[str]) -> dict[str, str]:
        got = self.docs.get(ids=ids, include=["metadatas"])
        return {doc_id: meta["_lmk_gen"] for doc_id, meta in zip(got["ids"], got["metadatas"])}

    def _remove_unnamed(self, ids: list[str], live: dict[str, str], older_than: float | None) -> None:
        """Remove these documents' landmark rows that no document row names (written before
        ``older_than``, or all of them while this process holds the folder's write lock)."""
        clauses: list[dict[str, Any]] = [{"_lmk_doc": {"$in": ids}}]
        if live:
            clauses.append({"_lmk_gen": {"$nin": list(live.values())}})
        if older_than is not None:
            clauses.append({"_lmk_t": {"$lt": older_than}})
        self.landmarks.delete(where=clauses[0] if len(clauses) == 1 else {"$and": clauses})

    def _delete(self, ids: list[str]) -> None:
        with folder_write_lock(self.folder) as exclusive:
            # The generations that were live; a write of the same id still in flight keeps its rows.
            live = self._live_generations(ids)
            self.docs.delete(ids=ids)
            if live:
                self.landmarks.delete(where={"_lmk_gen": {"$in": list(live.values())}})
            self._remove_unnamed(ids, {}, None if exclusive else time.time() - STALE_SECONDS)
            self._disk_state = self._on_disk()

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

    def _ids(self, where: ParsedFilter = None) -> list[str]:
        assert not isinstance(where, NativeFilter)  # refused by MultiVectorIndex._check_filter
        return list(self.docs.get(where=None if where is None else to_chroma_where(where), include=[])["ids"])

    def _count(self) -> int:
        return int(self.docs.count())

    def _scan(self, offset: Any, limit: int) -> tuple[list[tuple[StoredDocument, MultiVector]], Any]:
        start = int(offset or 0)
        got = self.docs.get(limit=limit, offset=start, include=["documents", "metadatas", "embeddings"])
        out = self._encoded_rows(got)
        return out, (start + len(out) if out and len(out) == limit else None)

    def _get_encoded(self, ids: list[str]) -> list[tuple[StoredDocument, MultiVector]]:
        return self._encoded_rows(self.docs.get(ids=ids, include=["documents", "metadatas", "embeddings"]))

    def _encoded_rows(self, got: Any) -> list[tuple[StoredDocument, MultiVector]]:
        """Documents rows (text, metadata, pooled vector) with their live landmark rows."""
        ids = list(got["ids"])
        if not ids:
            return []
        generations = {doc_id: meta["_lmk_gen"] for doc_id, meta in zip(ids, got["metadatas"])}
        per_doc = self._landmark_vectors(generations, self.encoder.dimension)
        out = []
        for doc_id, text, meta, pooled in zip(ids, got["documents"], got["metadatas"], got["embeddings"]):
            spans = [(int(a), int(b)) for a, b in json.loads(meta["_lmk_spans"])]
            vectors = per_doc[doc_id]
            doc = StoredDocument(doc_id, text, json.loads(meta["_lmk_meta"]), spans)
            tokens = int(meta["_lmk_tokens"])
            out.append((doc, MultiVector(np.asarray(pooled, dtype=np.float32), vectors, spans, tokens)))
        return out

    def _search(
        self,
        q: np.ndarray,
        k: int,
        where: ParsedFilter,
        mode: SearchMode,
        passage: PassageRequest,
        text: str | None = None,
    ) -> list[Hit]:
        assert not isinstance(where, NativeFilter)  # refused by MultiVectorIndex._check_filter
        user = None if where is None else to_chroma_where(where)
        if mode == "pooled":
            return self._search_pooled(q, k, user, passage)
        total = self.landmarks.count()
        n = min(total, k * self.overfetch)
        while n > 0:
            res = self.landmarks.query(
                query_embeddings=[q], n_results=n, where=user, include=["metadatas", "distances"]
            )
            rows = list(zip(res["metadatas"][0], res["distances"][0]))
            docs = self._documents(list({meta["_lmk_doc"] for meta, _ in rows}))
            # Best row per document among its live generation's rows only (rows of a replaced or
            # unfinished write may score as high and must not hide the live ones).
            best: dict[str, tuple[float, int]] = {}
            for meta, dist in rows:
                doc, score = meta["_lmk_doc"], 1.0 - dist
                if doc in docs and docs[doc][1] == meta["_lmk_gen"] and (doc not in best or score > best[doc][0]):
                    best[doc] = (score, meta["_lmk_i"])
            if len(best) >= k or n >= total or len(rows) < n:
                ranked = sorted(best.items(), key=lambda item: -item[1][0])[:k]
                if passage.rule == "peak":  # the best row per document is already known
                    return [make_hit(docs[d][0], score, i, passage) for d, (score, i) in ranked]
                vectors = self._landmark_vectors({d: docs[d][1] for d, _ in ranked}, len(q))
                return [hit_from_vectors(docs[d][0], score, q, vectors[d], passage) for d, (score, _) in ranked]
            n = min(total, n * 4)
        return []

    def _landmark_vectors(self, generations: dict[str, Any], dimension: int) -> dict[str, np.ndarray]:
        """Each document's landmark vectors in document order, from its live generation's rows
        (one query for all the documents: the passage rule needs every landmark's similarity)."""
        if not generations:
            return {}
        rows = self.landmarks.get(
            where={
                "$and": [{"_lmk_doc": {"$in": list(generations)}}, {"_lmk_gen": {"$in": list(generations.values())}}]
            },
            include=["embeddings", "metadatas"],
        )
        found: dict[str, list[tuple[int, Any]]] = {d: [] for d in generations}
        for meta, vector in zip(rows["metadatas"], rows["embeddings"]):
            if generations.get(meta["_lmk_doc"]) == meta["_lmk_gen"]:
                found[meta["_lmk_doc"]].append((int(meta["_lmk_i"]), vector))
        return {
            d: np.asarray([v for _, v in sorted(pairs, key=lambda p: p[0])], dtype=np.float32).reshape(-1, dimension)
            for d, pairs in found.items()
        }

    def _search_pooled(self, q: np.ndarray, k: int, where: dict[str, Any] | None, passage: PassageRequest) -> list[Hit]:
        res = self.docs.query(
            query_embeddings=[q], n_results=min(k, max(self.docs.count(), 1)), where=where, include=["distances"]
        )
        ids = res["ids"][0]
        docs = self._documents(ids)
        vectors = self._landmark_vectors({d: docs[d][1] for d in ids if d in docs}, len(q))
        return [
            hit_from_vectors(docs[d][0], 1.0 - dist, q, vectors[d], passage)
            for d, dist in zip(ids, res["distances"][0])
            if d in docs
        ]
