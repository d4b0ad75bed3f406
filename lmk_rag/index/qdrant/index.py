"""Qdrant backend: one point per document, a pooled dense vector, a MAX_SIM multivector and BM25.

Embedded by default: ``QdrantIndex(path)`` runs Qdrant's own engine in-process (Qdrant Edge:
segments, WAL, HNSW, payload indexes, quantization). ``url=`` (+ ``api_key``) talks to a server
or cluster, ``location=":memory:"`` keeps everything in memory, ``client=`` uses a qdrant-client
you made. Every store uses one collection layout (:mod:`.layout`), so an index moves between them with
:func:`~lmk_rag.index.copy.copy_index` (``lmk-rag copy``).

Search modes: ``hybrid`` (the default for text: BM25 fused with MaxSim, see :mod:`..fusion`),
``prefetch`` (the default for a vector, and hybrid's dense half: candidates from the landmark
index, see :mod:`.layout`, then exact MaxSim over their landmarks), ``maxsim`` (exact MaxSim
over every document) and ``pooled`` (one vector per document).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...encoder import LMKEncoder
from ...encoding.inputs import check_optional_int
from ...errors import IndexUnavailableError, InvalidInputError, MissingDependencyError, ReadOnlyIndexError
from ...types import Fingerprint, MultiVector
from ..base import MultiVectorIndex, SearchMode
from ..filters import ParsedFilter
from ..fusion import Fusion, check_fusion, fuse
from ..hits import Hit, PassageRequest, StoredDocument, hit_from_vectors
from ..redact import redact_uri
from ..uri import IndexURI
from .client_store import ClientStore, auth_error, check_cluster_options, is_connection_error
from .edge_files import damaged, is_damage
from .layout import (
    LANDMARKS,
    RESCORED_EXTRA,
    Found,
    Plan,
    Quantization,
    check_quantization,
    default_prefetch_limit,
    document_of,
    found,
    multivector_of,
    point_id,
    sparse_query,
    to_point,
)
from .store import QdrantStore

DEFAULT_PATH = "./lmk_index"
# No '.' or '/': the files beside a collection (``<collection>.landmarks``, ``.lmk.json``) cannot be another's.
_COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_COUNT_TTL_S = 30.0
_UPSERT_BATCH = 256

__all__ = ["DEFAULT_PATH", "QdrantIndex", "point_id"]


class QdrantIndex(MultiVectorIndex):
    """LMK documents in Qdrant: embedded (Qdrant Edge, a folder), a server or cluster, or memory.
    Search modes ``hybrid`` (BM25 + MaxSim, the default), ``prefetch``, ``maxsim``, ``pooled``.

    Example:
        ```python
        from lmk_rag.index import QdrantIndex

        index = QdrantIndex("./lmk_index")                                  # embedded folder
        server = QdrantIndex(url="http://localhost:6333", api_key="...")    # a server
        cluster = QdrantIndex(url="http://qdrant-0:6333", shard_number=6, replication_factor=2)
        ```

    Args:
        path: The embedded index's folder (default ``./lmk_index`` when no server is given).
        location: ``":memory:"``: qdrant-client's in-memory store.
        url: A Qdrant server; ``api_key`` (else ``$QDRANT_API_KEY``) authenticates.
        api_key: The server's key.
        collection: The collection's name (letters, digits, ``_``, ``-``).
        encoder: The :class:`~lmk_rag.LMKEncoder`; default: the packaged model. An existing
            collection refuses an encoder other than the one that built it.
        prefetch_limit: With a filter, pooled candidates (under the filter) that join the landmark
            index's in ``prefetch`` mode (None: chosen from k and the corpus size).
        quantization: ``"int8"`` or ``"binary"`` landmark vectors in RAM, originals on disk for
            rescoring (fixed when the collection is created).
        hybrid_fusion: How ``hybrid`` fuses: ``"weighted"`` scores or ``"rrf"`` ranks.
        hybrid_weight: BM25's share in ``weighted`` fusion.
        client: A ``qdrant_client.QdrantClient`` you made.
        shard_number: Cluster setting of a new collection (a server only).
        replication_factor: Cluster setting of a new collection (a server only).
        write_consistency_factor: Cluster setting of a new collection (a server only).
        on_disk: Keep dense vectors on disk (a server only).

    Raises:
        InvalidInputError: Conflicting or out-of-range arguments (named).
        IncompatibleIndexError: The collection was built with another encoder.
        IndexUnavailableError: The server cannot be reached, or the folder is held by another process.
    """

    modes = ("hybrid", "prefetch", "maxsim", "pooled")
    vector_default_mode = "prefetch"
    native_filters = ("qdrant",)

    #: BM25 + MaxSim: better ranked documents and passages than ``prefetch`` on the dev domains
    #: (docs/results.md, "Where the defaults come from").
    default_mode: SearchMode = "hybrid"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        location: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        collection: str = "lmk",
        encoder: LMKEncoder | None = None,
        prefetch_limit: int | None = None,
        quantization: Quantization | None = None,
        hybrid_fusion: Fusion = "weighted",
        hybrid_weight: float = 0.5,
        client: Any = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        on_disk: bool | None = None,
    ) -> None:
        if sum(x is not None for x in (path, location, url, client)) > 1:
            raise InvalidInputError("give one of path=, location=, url= or client=")
        check_optional_int("prefetch_limit", prefetch_limit, what=" (chosen per query)")
        check_fusion(hybrid_fusion, hybrid_weight)
        quantization = check_quantization(quantization)
        if not isinstance(collection, str) or not _COLLECTION_NAME.fullmatch(collection) or "__lmk_" in collection:
            raise InvalidInputError(
                f"collection must be a name of letters, digits, '_' and '-' (without '__lmk_', which names "
                f"lmk-rag's own collections beside it), got {collection!r}"
            )
        options = {
            "shard_number": shard_number,
            "replication_factor": replication_factor,
            "write_consistency_factor": write_consistency_factor,
            "on_disk": on_disk,
        }
        cluster = {name: value for name, value in options.items() if value is not None}
        check_cluster_options(cluster)
        if cluster and all(x is None for x in (location, url, client)):
            raise InvalidInputError(
                f"{', '.join(cluster)} set{'s' if len(cluster) == 1 else ''} up a collection on a Qdrant server or "
                "cluster; give url= (or client=), or leave it out for the embedded index"
            )
        super().__init__(encoder)
        self.collection = collection
        self._url, self._api_key = url, api_key
        self.prefetch_limit = prefetch_limit
        self.hybrid_fusion, self.hybrid_weight = hybrid_fusion, float(hybrid_weight)
        self._count_cache: tuple[float, int] | None = None
        # A temporary copy the index is opened from when its folder cannot be written (read-only media).
        self._read_only_copy: Path | None = None
        embedded = all(x is None for x in (location, url, client))
        if path is not None:
            path = Path(path).expanduser()  # "~/index" is the home folder's, never a folder named "~"
        self.folder = Path(path or DEFAULT_PATH) if embedded else None
        self.where = redact_uri(url) if url else location or str(path or DEFAULT_PATH)
        if embedded:
            self._open_embedded(Path(path or DEFAULT_PATH), collection, quantization)
        else:
            self._open_client(client, url, api_key, location, collection, quantization, cluster)

    def _open_embedded(self, folder: Path, collection: str, quantization: Quantization | None) -> None:
        from .edge_files import opening_lock, read_only_copy
        from .edge_store import EdgeStore

        if folder.is_dir() and not os.access(folder, os.W_OK):
            # The engine rewrites its own files when it opens a shard: on read-only media it opens a copy.
            self._read_only_copy = read_only_copy(folder)
            folder = self._read_only_copy / folder.name

        # Two processes creating one new index: one creates it, the other then opens what was made.
        with opening_lock(folder, collection):
            self.store: QdrantStore = EdgeStore(folder, collection, self.encoder.dimension, quantization)
            try:
                self._check_fingerprint(self.store.fingerprint())
            except Exception:
                self.store.close()
                raise

    def _open_client(
        self,
        client: Any,
        url: str | None,
        api_key: str | None,
        location: str | None,
        collection: str,
        quantization: Quantization | None,
        cluster: dict[str, Any],
    ) -> None:
        given_client = client is not None
        try:
            from qdrant_client import QdrantClient
        except ImportError as exc:  # pragma: no cover
            raise MissingDependencyError(
                "QdrantIndex(url=...) needs qdrant-client: pip install 'lmk-rag[qdrant]'"
            ) from exc
        if client is None:
            if url is not None:
                client = QdrantClient(url=url, api_key=api_key)
            else:
                client = QdrantClient(location=location)
        try:
            self.store = ClientStore(client, collection, self.encoder.dimension, quantization, cluster)
        except Exception as exc:
            refused = auth_error(exc, self.where) if url is not None else None
            if refused is not None:
                client.close()
                raise refused from exc
            if url is not None and is_connection_error(exc):
                client.close()
                raise IndexUnavailableError(
                    f"cannot reach the Qdrant server at {self.where} ({type(exc).__name__}: {exc}); start it, "
                    "or check the URL and API key"
                ) from exc
            raise
        try:
            self._check_fingerprint(self.store.fingerprint())
        except Exception:
            if not given_client:  # a client the caller gave stays theirs to close
                self.store.close()
            raise

    @property
    def quantization(self) -> Quantization | None:
        """The landmark vectors' quantization (``int8``, ``binary`` or None), fixed when the collection was created."""
        return self.store.quantization

    def _write_fingerprint(self, fp: Fingerprint) -> None:
        self.store.write_fingerprint(fp)

    def address(self) -> IndexURI | None:
        """A server collection is reachable from other processes by its URL; embedded and memory ones are not."""
        if self._url is None:
            return None
        return IndexURI("qdrant", url=self._url, api_key=self._api_key, collection=self.collection)

    def _translate_error(self, exc: BaseException) -> BaseException:
        refused = auth_error(exc, self.where)
        if refused is not None:
            return refused
        if is_connection_error(exc):
            return IndexUnavailableError(f"lost the Qdrant server at {self.where} ({exc}); start it and run again")
        if self.folder is not None and is_damage(exc):
            return damaged(self.folder, exc)
        return exc

    def close(self) -> None:
        """Flush, build the indexes new data has grown into (embedded) and release the folder."""
        with self._lock:
            if not self._closed:
                try:
                    self.store.close()
                finally:
                    if self._read_only_copy is not None:
                        shutil.rmtree(self._read_only_copy, ignore_errors=True)
            super().close()

    def optimize(self) -> None:
        """Build HNSW and payload indexes now (embedded; a server does it on its own)."""
        with self._backend():
            self.store.optimize()

    def warm(self) -> int:
        """Read the embedded index's files into the OS page cache in the background: the landmark
        index first, then the collection (its mapped landmark vectors, which every search rescores,
        and payloads), at most half the memory available; 0 on a server. See
        :meth:`~lmk_rag.index.base.MultiVectorIndex.warm`."""
        with self._backend():
            return self.store.warm()

    # ---------------------------------------------------------------- writes
    def _refuse_writes_to_a_copy(self) -> None:
        """An index opened from a temporary copy (its folder cannot be written) takes no writes:
        they would reach the copy and vanish at close, while the caller was told they were made."""
        if self._read_only_copy is not None:
            raise ReadOnlyIndexError(
                f"the index at {self.where!r} is on read-only media (or a folder this user cannot write), so "
                "nothing can be added to or deleted from it; remount it writable, or copy it somewhere writable "
                "(lmk-rag copy) and write there"
            )

    def _upsert(self, ids: list[str], texts: list[str], metas: list[dict[str, Any]], multis: list[MultiVector]) -> None:
        self._refuse_writes_to_a_copy()
        for start in range(0, len(ids), _UPSERT_BATCH):
            end = start + _UPSERT_BATCH
            self.store.upsert(
                [
                    to_point(doc_id, text, meta, mv)
                    for doc_id, text, meta, mv in zip(
                        ids[start:end], texts[start:end], metas[start:end], multis[start:end]
                    )
                ]
            )
        self._count_cache = None

    def _delete(self, ids: list[str]) -> None:
        self._refuse_writes_to_a_copy()
        self.store.delete([point_id(i) for i in ids])
        self._count_cache = None

    # ---------------------------------------------------------------- reads
    def _get(self, ids: list[str]) -> list[StoredDocument]:
        by_id = {p["doc_id"]: document_of(p) for p, _, _ in self.store.retrieve([point_id(i) for i in ids], False)}
        return [by_id[i] for i in ids if i in by_id]

    def _get_encoded(self, ids: list[str]) -> list[tuple[StoredDocument, MultiVector]]:
        records = self.store.retrieve([point_id(i) for i in ids], True)
        return [(document_of(p), multivector_of(p, pooled, lms)) for p, pooled, lms in records]

    def _ids(self, where: ParsedFilter = None) -> list[str]:
        out: list[str] = []
        offset = None
        while True:
            records, offset = self.store.scroll(offset, 1000, False, where)
            out += [p["doc_id"] for p, _, _ in records]
            if offset is None:
                return out

    def _scan(self, offset: Any, limit: int) -> tuple[list[tuple[StoredDocument, MultiVector]], Any]:
        records, nxt = self.store.scroll(offset, limit, True)
        return [(document_of(p), multivector_of(p, pooled, lms)) for p, pooled, lms in records], nxt

    def _count(self) -> int:
        return self.store.count()

    def _corpus_size(self) -> int:
        now = time.monotonic()
        if self._count_cache is None or now - self._count_cache[0] > _COUNT_TTL_S:
            self._count_cache = (now, self.store.count())
        return self._count_cache[1]

    def _prefetch(self, k: int) -> int:
        return max(self.prefetch_limit or default_prefetch_limit(k, self._corpus_size()), k)

    def _search(
        self,
        q: np.ndarray,
        k: int,
        where: ParsedFilter,
        mode: SearchMode,
        passage: PassageRequest,
        text: str | None = None,
    ) -> list[Hit]:
        vector = q.tolist()
        if mode == "prefetch":
            return [self._hit(f, f.score, q, passage) for f in self._candidates_reranked(vector, k, where)]
        if mode != "hybrid":
            results = self.store.search([Plan(mode, k, where, vector=vector)])[0]
            return [self._hit(f, f.score, q, passage) for f in results]
        if text is None:
            raise InvalidInputError("mode='hybrid' needs the query text: use search(), not search_by_vector()")
        pool = max(10 * k, 50)
        # Candidates as ids and scores only (vectors cross into Python slowly), the exact MaxSim of
        # BM25's candidates that MaxSim did not bring (scored with the dense candidates where those
        # are rescored anyway), then the k winners whole.
        bm25_plan = Plan("bm25", pool, where, sparse=sparse_query(text), payload=False, landmarks=False)
        lexical = self.store.search([bm25_plan])[0]
        dense = self._candidates_reranked(vector, pool, where, payload=False, also=[f.id for f in lexical])
        maxsim = {f.id: f.score for f in dense}
        missing = [f.id for f in lexical if f.id not in maxsim]
        if missing:
            only = Plan("maxsim", len(missing), None, vector=vector, payload=False, landmarks=False, ids=missing)
            maxsim.update({f.id: f.score for f in self.store.search([only])[0]})
            maxsim.update({i: -1.0 for i in missing if i not in maxsim})
        if not maxsim:
            return []
        ids = list(maxsim)
        bm25 = {f.id: f.score for f in lexical}
        scores = fuse(
            np.array([maxsim[i] for i in ids]), [bm25.get(i) for i in ids], self.hybrid_fusion, self.hybrid_weight
        )
        order = np.argsort(-scores, kind="stable")[:k]
        winners = self._fetched([(ids[j], float(scores[j])) for j in order], payload=True)
        return [self._hit(f, f.score, q, passage) for f in winners]

    def _candidates_reranked(
        self, vector: list[float], limit: int, where: ParsedFilter, *, payload: bool = True, also: Sequence[str] = ()
    ) -> list[Found]:
        """The ``limit`` best documents by exact MaxSim among candidates: the documents of the best
        landmarks in the landmark index (see :mod:`.layout`), and with a filter also the best pooled
        vectors under it (the landmark index holds no metadata), each scored once. Where candidates
        are rescored, the ``also`` documents are scored in the same query and returned too."""
        # Unfiltered over float32 vectors, the landmark scores are exact MaxSim: the k best need
        # only their payload and vectors. Otherwise a few more than asked (compressed or quantized
        # scores may misorder; not twice a hybrid pool of 100), scored by exact MaxSim.
        exact = where is None and self.store.quantization is None and self.store.landmark_scores_exact
        n_candidates = limit if exact else limit + min(limit, RESCORED_EXTRA)
        scored = self.store.landmark_candidates(vector, n_candidates, self._corpus_size())
        if exact and scored is not None:
            return self._fetched(scored, payload)
        plans = []
        ids = None if scored is None else [doc for doc, _ in scored]
        if ids:
            seen = set(ids)
            ids += [doc for doc in dict.fromkeys(also) if doc not in seen]
            # Only the ``limit`` best come back whole, unless ``also`` asks for every score.
            wanted = len(ids) if also else limit
            plans.append(Plan("maxsim", wanted, where, vector=vector, payload=payload, landmarks=payload, ids=ids))
        if where is not None or ids is None:  # a filter, or no readable landmark index: pooled candidates too
            prefetch = max(self._prefetch(limit), limit)
            plans.append(
                Plan("prefetch", limit, where, vector=vector, prefetch=prefetch, payload=payload, landmarks=payload)
            )
        if not plans:
            return []
        best: dict[str, Found] = {}
        for result in self.store.search(plans):
            for f in result:
                best.setdefault(f.id, f)  # both score exact MaxSim: the same document scores the same
        ranked = sorted(best.values(), key=lambda f: -f.score)
        asked = set(also)
        return ranked[:limit] + [f for f in ranked[limit:] if f.id in asked]

    def _fetched(self, scored: list[tuple[str, float]], payload: bool) -> list[Found]:
        """Documents with their scores as found, their payload and landmark vectors read when asked
        (a document deleted since the candidates were read is left out)."""
        if not payload:
            return [
                Found(doc, {}, score, np.zeros((0, self.encoder.dimension), dtype=np.float32)) for doc, score in scored
            ]
        records = {
            str(point_id(p["doc_id"])): (p, lms) for p, _, lms in self.store.retrieve([d for d, _ in scored], True)
        }
        return [
            found(doc, records[doc][0], score, {LANDMARKS: records[doc][1]}) for doc, score in scored if doc in records
        ]

    def rebuild_landmark_index(self) -> None:
        """Rebuild the landmark index (the default search's candidates) from the stored landmark
        vectors: ``lmk-rag ingest --verify`` does, since it holds nothing the index does not."""
        with self._backend():
            self.store.rebuild_landmarks()

    @staticmethod
    def _hit(found: Found, score: float, q: np.ndarray, passage: PassageRequest) -> Hit:
        return hit_from_vectors(document_of(found.payload), score, q, found.landmarks, passage)
