"""One multi-vector index API, two backends with the same semantics: a document is stored with its
pooled LMK vector, every landmark vector and each landmark's character span, so a hit names the
document *and* the passage that matched. Re-adding an id replaces the document and all its
landmarks; an index records the encoder's fingerprint and refuses an encoder that differs."""

from __future__ import annotations

import math
import threading
import typing
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from ..context import (
    CONTEXT_DOCUMENTS,
    DEFAULT_MAX_TOKENS,
    ContextRule,
    Passage,
    build_context,
    check_max_tokens,
    check_min_score,
    token_counter_of,
)
from ..encoder import LMKEncoder
from ..encoding.inputs import check_int, check_k, check_texts, refuse_renamed
from ..errors import IncompatibleIndexError, IndexUnavailableError, InvalidInputError, InvalidTypeError, LMKError
from ..passages import DEFAULT_PASSAGE_RULE, PassageRule, check_passage_rule
from ..types import Fingerprint, Metadata, MultiVector
from .filters import (
    FILTER_EXAMPLE,
    METADATA_KEY_RULE,
    FilterArg,
    NativeFilter,
    ParsedFilter,
    check_int_range,
    parse_filter,
    valid_metadata_key,
)
from .hits import Hit, PassageRequest, StoredDocument
from .uri import IndexURI

SearchMode = Literal["maxsim", "prefetch", "pooled", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = typing.get_args(SearchMode)
# Backends that store BM25 vectors, named when another one is asked for mode="hybrid".
HYBRID_BACKENDS = "QdrantIndex (embedded qdrant:PATH, a server via url=, or memory)"
_ALLOWED_META = (str, int, float, bool)


def check_metadata(metadatas: Sequence[Mapping[str, object]] | None, n: int) -> list[Metadata]:
    """One metadata dict per text, checked: keys every backend keeps, flat finite values; None gives empty dicts."""
    if metadatas is None:
        return [{} for _ in range(n)]
    items = list(metadatas)
    if len(items) != n:
        raise InvalidInputError(f"metadatas has {len(items)} entries for {n} texts; give one dict per text")
    out = []
    for i, meta in enumerate(items):
        if meta is None:
            meta = {}
        if not isinstance(meta, Mapping):
            raise InvalidTypeError(f"metadatas[{i}] must be a dict, got {type(meta).__name__}")
        for key, value in meta.items():
            if not valid_metadata_key(key):
                raise InvalidInputError(f"metadatas[{i}]: {METADATA_KEY_RULE}, got {key!r}")
            if value is not None and not isinstance(value, _ALLOWED_META):
                raise InvalidTypeError(
                    f"metadatas[{i}][{key!r}] must be str, int, float, bool or None, got {type(value).__name__}"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidInputError(f"metadatas[{i}][{key!r}] is {value}: stores keep JSON, give a finite number")
            if isinstance(value, int):
                check_int_range(value, f"metadatas[{i}][{key!r}]")
        out.append(cast(Metadata, dict(meta)))  # every value checked above
    return out


def id_list(ids: object, name: str = "ids") -> list[str]:
    """A list of non-empty str from any iterable of ids; a bare str is refused, not split into characters."""
    if isinstance(ids, (str, bytes)):
        raise InvalidTypeError(f"{name} must be a list of str, got a bare {type(ids).__name__}; wrap it: [{ids!r}]")
    if ids is None or isinstance(ids, Mapping) or not hasattr(ids, "__iter__"):
        raise InvalidTypeError(f"{name} must be a list of str, got {type(ids).__name__}")
    items = list(ids)
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise InvalidTypeError(f"{name}[{i}] must be a non-empty str, got {item!r}")
    return items


def check_ids(ids: Sequence[str] | None, n: int) -> list[str]:
    """One unique id per text; ``None`` makes random ones."""
    if ids is None:
        return [uuid.uuid4().hex for _ in range(n)]
    items = id_list(ids)
    if len(items) != n:
        raise InvalidInputError(f"ids has {len(items)} entries for {n} texts; give one id per text")
    if len(set(items)) != len(items):
        raise InvalidInputError("ids contains duplicates; each document needs its own id")
    return items


def checked_documents(
    texts: object, ids: Sequence[str] | None, metadatas: Sequence[Mapping[str, object]] | None
) -> tuple[list[str], list[str], list[Metadata]]:
    """(texts, ids, metadatas) of documents to store, checked together: a list of str, one unique
    id per text (random ones for None), one flat metadata dict per text (empty ones for None)."""
    items = check_texts(texts)
    return items, check_ids(ids, len(items)), check_metadata(metadatas, len(items))


class MultiVectorIndex(ABC):
    """The index contract every backend keeps (:class:`~lmk_rag.index.QdrantIndex`,
    :class:`~lmk_rag.index.ChromaIndex`): documents stored with one vector per landmark, searched
    by MaxSim (or BM25 + MaxSim), each hit with its passage; contexts for an LLM within a token
    budget. Subclasses store and query; one test suite holds them all to these methods.

    Example:
        ```python
        from lmk_rag.index import QdrantIndex

        index = QdrantIndex("./lmk_index")            # embedded; the packaged encoder
        index.add(["Spring tides come at new and full moon."], ids=["tides"], metadatas=[{"lang": "en"}])
        hits = index.search("when are tides highest?", k=3, filter={"lang": "en"})
        hits[0].id, hits[0].score, hits[0].passage    # the document and the passage that answers
        passages = index.context("when are tides highest?", max_tokens=512)
        index.close()
        ```
    """

    def __init__(self, encoder: LMKEncoder | None) -> None:
        self.encoder = encoder if encoder is not None else LMKEncoder()
        if not isinstance(self.encoder, LMKEncoder):
            raise InvalidTypeError(f"encoder must be an LMKEncoder, got {type(self.encoder).__name__}")
        # One index object may be shared by threads: backend calls go one at a time (encoding does not).
        self._lock = threading.RLock()
        self._closed = False

    @contextmanager
    def _backend(self) -> Iterator[None]:
        """One backend call at a time; a store that stops answering becomes one clear error."""
        with self._lock:
            if self._closed:
                raise IndexUnavailableError(
                    f"this {type(self).__name__} was closed; open the index again to use it "
                    "(or use it inside `with ...:` and close it once, at the end)"
                )
            try:
                self._before_backend_call()
                yield
            except LMKError:
                raise
            except BaseException as exc:  # an engine panic (pyo3) is a BaseException
                if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                    raise
                translated = self._translate_error(exc)
                if translated is exc:
                    raise
                raise translated from exc

    def _translate_error(self, exc: BaseException) -> BaseException:
        """The error to raise for a backend failure (backends map connection errors here)."""
        return exc

    def _before_backend_call(self) -> None:  # noqa: B027 - a hook most backends leave empty
        """A backend's chance to catch up with changes other processes made (see ChromaIndex)."""

    def _check_fingerprint(self, stored: Fingerprint | None) -> None:
        mine = self.encoder.fingerprint
        if stored is None:
            held = self._count()
            if held:
                raise IncompatibleIndexError(
                    f"this index holds {held} documents but no record of the encoder that built them (its "
                    "fingerprint is missing: a backup of the data without it?); restore the record from where the "
                    "index came from (for qdrant:PATH the file PATH/<collection>.lmk.json), or build a new index"
                )
            self._write_fingerprint(mine)
            return
        diffs = stored.differences(mine)
        if diffs:
            raise IncompatibleIndexError(
                "this index was built with another encoder (" + "; ".join(diffs) + "); open it with the "
                "encoder it was built with, or rebuild it into a new collection"
            )

    # ---------------------------------------------------------------- public API
    def add(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        metadatas: Sequence[Mapping[str, object]] | None = None,
    ) -> list[str]:
        """Encode documents and store them.

        Args:
            texts: The documents' texts.
            ids: One id per text (default: random UUIDs); an id that exists is replaced with all
                its landmarks.
            metadatas: One flat dict per text (str, int, float, bool or None values); filters
                match on them.

        Returns:
            The ids, in the order of ``texts``.

        Raises:
            InvalidTypeError: ``texts`` not a list of str, or a metadata value of another type.
            InvalidInputError: Ids or metadatas that do not match the texts one to one, or a
                metadata key the stores cannot keep.
        """
        items, doc_ids, metas = checked_documents(texts, ids, metadatas)
        if not items:
            return []
        multis = self.encoder.encode_multi(items)
        with self._backend():
            self._upsert(doc_ids, items, metas, multis)
        return doc_ids

    def add_encoded(
        self,
        multis: Sequence[MultiVector],
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        metadatas: Sequence[Mapping[str, object]] | None = None,
    ) -> list[str]:
        """Store documents already encoded by this index's encoder (e.g. encoded elsewhere in bulk)."""
        items, doc_ids, metas = checked_documents(texts, ids, metadatas)
        if len(multis) != len(items) or not all(isinstance(m, MultiVector) for m in multis):
            raise InvalidInputError("multis must hold one MultiVector per text")
        if any(m.vectors.shape[1] != self.encoder.dimension for m in multis):
            raise InvalidInputError(f"vectors must have the encoder's dimension {self.encoder.dimension}")
        if items:
            with self._backend():
                self._upsert(doc_ids, items, metas, list(multis))
        return doc_ids

    def _check_filter(self, where: FilterArg) -> ParsedFilter:
        parsed = parse_filter(where)
        if isinstance(parsed, NativeFilter) and parsed.backend not in self.native_filters:
            raise InvalidTypeError(
                f"a {parsed.backend} filter object runs on a {parsed.backend} index only; give "
                f"{type(self).__name__} a dict filter such as {FILTER_EXAMPLE}"
            )
        return parsed

    def _check_search(self, k: int, mode: object, neighbours: int, passage: object, text: bool = True) -> SearchMode:
        """Validate the search arguments; returns the mode to run (None: the backend's default,
        :attr:`default_mode`, or :attr:`vector_default_mode` for a query given as a vector)."""
        check_k(k)
        if mode is None:
            mode = self.default_mode if text else self.vector_default_mode
        if mode == "hybrid" and mode not in self.modes:
            raise InvalidInputError(
                f"mode='hybrid' needs BM25 sparse vectors, which {type(self).__name__} does not store; "
                f"use {HYBRID_BACKENDS}, or one of {self.modes}"
            )
        if mode not in self.modes or mode not in SEARCH_MODES:
            raise InvalidInputError(f"mode must be one of {self.modes} for {type(self).__name__}, got {mode!r}")
        check_int("neighbours", neighbours, 0)
        check_passage_rule(passage)
        return mode

    def search(
        self,
        query: str,
        k: int = 4,
        *,
        filter: FilterArg = None,
        mode: SearchMode | None = None,
        neighbours: int = 0,
        passage: PassageRule = DEFAULT_PASSAGE_RULE,
    ) -> list[Hit]:
        """The k best documents for ``query``, each with its passage.

        Args:
            query: The question or search text.
            k: Documents to return (1 to 10,000).
            filter: A metadata filter such as ``{"lang": "en", "year": {"$gte": 2020}}`` (see
                :mod:`lmk_rag.index.filters`), or a Qdrant ``models.Filter`` on a Qdrant index.
            mode: One of the backend's :attr:`modes`; None is its :attr:`default_mode`.
            neighbours: Landmarks added to each side of the passage.
            passage: Which landmark names the passage: ``region`` (the default: the one whose
                neighbourhood matches best) or ``peak`` (the single best); see :mod:`lmk_rag.passages`.

        Returns:
            :class:`~lmk_rag.index.hits.Hit` objects, best first: ``id``, ``score`` (the mode's),
            ``similarity`` (the best landmark's cosine: an absolute scale), ``passage`` and its
            ``span``, ``text``, ``metadata``, ``pages``.

        Raises:
            InvalidInputError: A bad ``k``, ``mode``, ``neighbours``, ``passage`` or filter (named).
        """
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be str, got {type(query).__name__}")
        run_mode = self._check_search(k, mode, neighbours, passage)
        where = self._check_filter(filter)
        q = self.encoder.encode_query(query)
        with self._backend():
            return self._search(q, k, where, run_mode, PassageRequest(passage, neighbours), text=query)

    def search_by_vector(
        self,
        q: np.ndarray,
        k: int = 4,
        *,
        filter: FilterArg = None,
        mode: SearchMode | None = None,
        neighbours: int = 0,
        passage: PassageRule = DEFAULT_PASSAGE_RULE,
    ) -> list[Hit]:
        """Like :meth:`search` for a query vector already encoded by this index's encoder
        (not ``hybrid``, which needs the query's text: the default is :attr:`vector_default_mode`)."""
        run_mode = self._check_search(k, mode, neighbours, passage, text=False)
        vector = np.asarray(q, dtype=np.float32)
        if vector.shape != (self.encoder.dimension,) or not np.isfinite(vector).all():
            raise InvalidInputError(
                f"q must be a finite vector of shape ({self.encoder.dimension},), got shape {vector.shape}"
            )
        where = self._check_filter(filter)
        with self._backend():
            return self._search(vector, k, where, run_mode, PassageRequest(passage, neighbours))

    def context(
        self,
        query: str,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        *,
        k: int | None = None,
        filter: FilterArg = None,
        mode: SearchMode | None = None,
        token_counter: Callable[[str], int] | str | None = None,
        min_score: float | None = None,
        rule: ContextRule | None = None,
        **renamed: object,
    ) -> list[Passage]:
        """The passages, best first, to hand an LLM for ``query`` within ``max_tokens`` tokens,
        chosen by :func:`lmk_rag.context.build_context` from the ``k`` best documents.

        Args:
            query: The question.
            max_tokens: The budget, in ``token_counter``'s tokens.
            k: Documents to draw from (default :data:`~lmk_rag.context.CONTEXT_DOCUMENTS`).
            filter: As in :meth:`search`.
            mode: As in :meth:`search`.
            token_counter: Your LLM's tokens: a ``str -> int`` callable, or the folder of its
                ``tokenizer.json``; default: the encoder's tokenizer.
            min_score: No passage starts at a landmark less similar to the query (a cosine, as
                ``Hit.similarity``); :data:`~lmk_rag.context.OFF_TOPIC_MIN_SCORE` empties most
                off-topic contexts. Default: no floor.
            rule: The builder's :class:`~lmk_rag.context.ContextRule` (default: the tuned one).

        Returns:
            :class:`~lmk_rag.context.Passage` objects whose token counts sum to at most
            ``max_tokens``; [] for an empty index.

        Raises:
            InvalidInputError: A bad budget, ``min_score`` or ``token_counter`` (named).
        """
        refuse_renamed("context", renamed)
        budget = check_max_tokens(max_tokens)  # before the query is encoded
        floor = check_min_score(min_score)
        counter = token_counter_of(self.encoder, token_counter)
        hits = self.search(query, k=CONTEXT_DOCUMENTS if k is None else k, filter=filter, mode=mode, passage="region")
        return build_context(query, hits, budget, counter, rule, min_score=floor)

    def get(self, ids: Sequence[str]) -> list[StoredDocument]:
        """Stored documents for the ids that exist, in the order asked."""
        items = id_list(ids)
        if not items:
            return []
        with self._backend():
            return self._get(items)

    def get_encoded(self, ids: Sequence[str]) -> list[tuple[StoredDocument, MultiVector]]:
        """Stored documents with their stored vectors (pooled, landmarks, spans), for the ids that
        exist, in the order asked: what diversity (MMR) and re-ranking over documents read."""
        items = id_list(ids)
        if not items:
            return []
        with self._backend():
            found = {doc.id: (doc, mv) for doc, mv in self._get_encoded(items)}
        return [found[i] for i in items if i in found]

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents and all their landmarks; missing ids are not an error."""
        items = id_list(ids)
        if items:
            with self._backend():
                self._delete(items)

    def scan(self, batch_size: int = 256) -> Iterator[list[tuple[StoredDocument, MultiVector]]]:
        """Every stored document with its vectors, in batches: what :func:`~.copy.copy_index` moves."""
        check_int("batch_size", batch_size)
        offset: Any = None
        while True:
            with self._backend():
                batch, offset = self._scan(offset, batch_size)
            if batch:
                yield batch
            if offset is None:
                return

    def ids(self, filter: FilterArg = None, **renamed: object) -> list[str]:
        """Every document id in the index, or those whose metadata match ``filter`` (as in
        :meth:`search`)."""
        refuse_renamed("ids", renamed)
        parsed = self._check_filter(filter)
        with self._backend():
            return self._ids(parsed)

    def __bool__(self) -> bool:
        """An index is a handle: true even when empty (``index or default`` must not drop it)."""
        return True

    def __len__(self) -> int:
        with self._backend():
            return self._count()

    def __enter__(self) -> MultiVectorIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the backend's client or folder lock; the index cannot be used after (closing
        twice is fine)."""
        self._closed = True

    def warm(self) -> int:
        """Start reading the files every search reads into the OS page cache, in the background, so
        that the first searches of a freshly started process do not wait on disk (``lmk-rag serve``
        does at start); returns the bytes it will read: 0 where this index has nothing to read ahead
        (a server index; Chroma, whose HNSW index is loaded into memory when first searched)."""
        return 0

    def address(self) -> IndexURI | None:
        """Where another process opens this same store (with :func:`~lmk_rag.index.uri.open_index`):
        a server's; None for an embedded or in-memory store, which only the process holding it may
        write (Ray's actors reopen a server index, see :mod:`lmk_rag.ingest.ray`)."""
        return None

    # ---------------------------------------------------------------- backend hooks
    modes: tuple[SearchMode, ...] = SEARCH_MODES
    default_mode: SearchMode = "maxsim"
    #: The default for a query given as a vector (``hybrid`` needs the text).
    vector_default_mode: SearchMode = "maxsim"
    # Which backends' own filter objects (:class:`~lmk_rag.index.filters.NativeFilter`) this one runs.
    native_filters: tuple[str, ...] = ()
    #: The embedded store's folder (None for a server or memory): ingest never reads inside it.
    folder: Path | None = None

    @abstractmethod
    def _write_fingerprint(self, fp: Fingerprint) -> None: ...

    @abstractmethod
    def _upsert(
        self, ids: list[str], texts: list[str], metas: list[dict[str, Any]], multis: list[MultiVector]
    ) -> None: ...

    @abstractmethod
    def _search(
        self,
        q: np.ndarray,
        k: int,
        where: ParsedFilter,
        mode: SearchMode,
        passage: PassageRequest,
        text: str | None = None,
    ) -> list[Hit]: ...

    @abstractmethod
    def _scan(self, offset: Any, limit: int) -> tuple[list[tuple[StoredDocument, MultiVector]], Any]:
        """Up to ``limit`` documents with their vectors after ``offset`` (None: the start), and the
        next offset (None: no more)."""

    @abstractmethod
    def _get(self, ids: list[str]) -> list[StoredDocument]: ...

    @abstractmethod
    def _get_encoded(self, ids: list[str]) -> list[tuple[StoredDocument, MultiVector]]: ...

    @abstractmethod
    def _delete(self, ids: list[str]) -> None: ...

    @abstractmethod
    def _count(self) -> int: ...

    @abstractmethod
    def _ids(self, where: ParsedFilter = None) -> list[str]: ...
