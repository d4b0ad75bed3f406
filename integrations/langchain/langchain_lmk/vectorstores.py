"""``LMKVectorStore``: a LangChain ``VectorStore`` over an lmk-rag multi-vector index."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

from lmk_rag import LMKEncoder
from lmk_rag.context import DEFAULT_MAX_TOKENS
from lmk_rag.encoding.inputs import check_int, check_number
from lmk_rag.errors import InvalidInputError, InvalidTypeError
from lmk_rag.index import FilterArg, MultiVectorIndex, SearchMode
from lmk_rag.passages import DEFAULT_PASSAGE_RULE, PassageRule

from .documents import context_documents, hit_to_document, hit_to_passage

_CONTEXT_KWARGS = ("k", "max_tokens", "filter", "token_counter", "min_score", "score_threshold")


class LMKVectorStore(VectorStore):
    """Whole documents stored as LMK multi-vectors (Qdrant or Chroma index).

    ``similarity_search`` scores by MaxSim over each document's landmarks (``search_mode``
    may be ``"prefetch"`` or ``"pooled"`` on Qdrant); no text splitter is needed.

    **Instantiate**

    ```python
    from langchain_lmk import LMKEmbeddings, LMKVectorStore
    from lmk_rag.index import QdrantIndex

    store = LMKVectorStore(index=QdrantIndex(path="./lmk_index"))
    # or, as langchain-qdrant does:
    store = LMKVectorStore.from_texts(["a long document ..."], LMKEmbeddings(), path="./lmk_index")
    ```

    **Add and search**

    ```python
    store.add_texts(["a long document ..."], ids=["doc-1"], metadatas=[{"lang": "en"}])
    docs = store.similarity_search("a question", k=4, filter={"lang": "en"})
    scored = store.similarity_search_with_relevance_scores("a question", k=4)
    ```

    **Use as retriever**

    ```python
    retriever = store.as_retriever(search_kwargs={"max_tokens": 512})
    passages = retriever.invoke("a question")  # the passages to hand the LLM
    ```
    """

    def __init__(self, index: MultiVectorIndex, search_mode: SearchMode | None = None) -> None:
        if not isinstance(index, MultiVectorIndex):
            raise InvalidTypeError(f"index must be a QdrantIndex or ChromaIndex, got {type(index).__name__}")
        if search_mode is not None and search_mode not in index.modes:
            raise InvalidInputError(f"search_mode must be one of {index.modes}, got {search_mode!r}")
        self.index = index
        self.search_mode = search_mode
        self._scratch: Any = None  # from_texts' temporary folder, when it made one

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """A retriever that hands the LLM lmk-rag's context by default: the best passages within a
        token budget (``search_kwargs``: ``max_tokens`` (512), ``k`` (at most that many passages, 4),
        ``filter``); see :class:`LMKStoreRetriever`. ``search_type="similarity"`` (or
        ``"similarity_score_threshold"``) gives whole documents, as LangChain's own stores do."""
        tags = [*(kwargs.pop("tags", None) or []), *self._get_retriever_tags()]
        if kwargs.get("search_type", "context") == "context":
            _check_context_kwargs(kwargs.get("search_kwargs") or {})
        return LMKStoreRetriever(vectorstore=self, tags=tags, **kwargs)

    @property
    def embeddings(self) -> Embeddings | None:
        """None: the index encodes texts and queries with its own LMKEncoder (``self.index.encoder``)."""
        return None

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store texts whole, each as landmark vectors; returns their ids (given, or new ones)."""
        texts = list(texts)
        if ids is not None:
            ids = [i if i is not None else _new_id() for i in ids]
        return self.index.add(texts, ids=ids, metadatas=metadatas)

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store documents whole (``Document.id`` kept, or ``ids=``); returns their ids."""
        ids = kwargs.pop("ids", None)
        if ids is None:
            ids = [doc.id or _new_id() for doc in documents]
        return self.add_texts([d.page_content for d in documents], [dict(d.metadata) for d in documents], ids=ids)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Remove the documents with these ids (missing ones are not an error)."""
        if ids is None:
            raise InvalidInputError("delete needs ids; to drop everything, delete the index's collection")
        self.index.delete(ids)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents for the ids that exist, metadata unchanged."""
        return [hit_to_document(d) for d in self.index.get(list(ids))]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: FilterArg = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` best whole documents with their MaxSim scores (``filter`` as in lmk_rag.index.filters)."""
        hits = self.index.search(query, k=k, filter=filter, mode=kwargs.get("search_mode", self.search_mode))
        return [(hit_to_document(h), h.score) for h in hits]

    def similarity_search(self, query: str, k: int = 4, filter: FilterArg = None, **kwargs: Any) -> list[Document]:
        """The ``k`` best whole documents for ``query``."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Relevance from a hit's ``similarity`` (its best landmark's cosine, an absolute scale),
        as LangChain's cosine stores do: the cosine, negatives clipped to 0."""
        return lambda similarity: min(1.0, max(0.0, similarity))

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Whole documents with a relevance in [0, 1] on an absolute scale (the best landmark's
        cosine, whatever the search mode), so ``score_threshold`` means the same for every query;
        ``similarity_search_with_score`` gives each search mode's rank score instead."""
        filter = kwargs.pop("filter", None)
        mode = kwargs.pop("search_mode", self.search_mode)
        hits = self.index.search(query, k=k, filter=filter, mode=mode)
        relevance = self._select_relevance_score_fn()
        return [(hit_to_document(h), relevance(h.similarity)) for h in hits]

    def search_passages(
        self,
        query: str,
        k: int = 4,
        filter: FilterArg = None,
        neighbours: int = 0,
        passage: PassageRule = DEFAULT_PASSAGE_RULE,
    ) -> list[Document]:
        """The passage of each of the k best documents (see :func:`hit_to_passage`; ``passage``:
        ``peak`` or ``region``, as :meth:`lmk_rag.index.base.MultiVectorIndex.search`)."""
        hits = self.index.search(
            query, k=k, filter=filter, mode=self.search_mode, neighbours=neighbours, passage=passage
        )
        return [hit_to_passage(h) for h in hits]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: FilterArg = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Whole documents, relevant and diverse: the ``fetch_k`` best by the index's search, then
        maximal marginal relevance over their stored pooled vectors (LangChain's own MMR)."""
        query_vector = self.index.encoder.encode_query(query)
        return self._mmr(query, query_vector, k, fetch_k, lambda_mult, filter, kwargs)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: FilterArg = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query vector made by this index's encoder."""
        return self._mmr(None, np.asarray(embedding, dtype=np.float32), k, fetch_k, lambda_mult, filter, kwargs)

    def _mmr(
        self,
        query: str | None,
        query_vector: np.ndarray,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: FilterArg,
        kwargs: dict[str, Any],
    ) -> list[Document]:
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        check_int("k", k)
        check_int("fetch_k", fetch_k)
        if fetch_k < k:
            raise InvalidInputError(f"fetch_k ({fetch_k}) must be at least k ({k}): MMR picks k of the fetch_k best")
        check_number("lambda_mult", lambda_mult, 0, 1)
        mode = kwargs.get("search_mode", self.search_mode)
        if query is not None:
            hits = self.index.search(query, k=fetch_k, filter=filter, mode=mode)
        else:
            hits = self.index.search_by_vector(query_vector, k=fetch_k, filter=filter, mode=mode)
        encoded = self.index.get_encoded([h.id for h in hits])
        if not encoded:
            return []
        pooled = np.stack([mv.pooled for _, mv in encoded])
        chosen = maximal_marginal_relevance(query_vector, list(pooled), lambda_mult=lambda_mult, k=k)
        return [hit_to_document(encoded[i][0]) for i in chosen]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: FilterArg = None, **kwargs: Any
    ) -> list[Document]:
        """Whole documents for a query vector made by this index's encoder (``encode_query``)."""
        hits = self.index.search_by_vector(
            np.asarray(embedding, dtype=np.float32),
            k=k,
            filter=filter,
            mode=kwargs.get("search_mode", self.search_mode),
        )
        return [hit_to_document(h) for h in hits]

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        index: MultiVectorIndex | None = None,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        collection_name: str = "lmk",
        search_mode: SearchMode | None = None,
        **kwargs: Any,
    ) -> LMKVectorStore:
        """Build a store and add ``texts``, as langchain-qdrant's ``from_texts`` does: into ``index``,
        or a Qdrant index at ``path`` (embedded), ``url`` (a server; ``api_key``) or ``location``
        (``":memory:"``, through qdrant-client), collection ``collection_name``. With none of them,
        as Chroma's ``from_texts`` does, a throwaway store: an embedded index in a temporary folder,
        removed when the store is garbage-collected (no extra needed). ``embedding``: an
        :class:`~langchain_lmk.LMKEmbeddings` (its encoder is used) or None (the packaged model);
        another embedding class is refused, since the store encodes with landmarks itself."""
        if kwargs:
            raise InvalidInputError(
                f"from_texts got unknown arguments {sorted(kwargs)}; it takes index, path, url, api_key, location, "
                "collection_name, search_mode"
            )
        encoder = lmk_encoder_of(embedding)
        scratch = None
        if index is None:
            from lmk_rag.index import QdrantIndex

            where = {"path": path, "url": url, "location": location}
            if all(v is None for v in where.values()):
                import tempfile

                scratch = tempfile.TemporaryDirectory(prefix="lmk-rag-store-")
                where["path"] = scratch.name
            index = QdrantIndex(
                **{k: v for k, v in where.items() if v is not None},
                api_key=api_key,
                collection=collection_name,
                encoder=encoder,
            )
        elif any(v is not None for v in (path, url, location, api_key)):
            raise InvalidInputError("give index= or path=/url=/location=, not both")
        store = cls(index=index, search_mode=search_mode)
        store._scratch = scratch  # the temporary folder lives as long as the store
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    def from_existing_collection(
        cls,
        collection_name: str = "lmk",
        embedding: Embeddings | None = None,
        *,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        search_mode: SearchMode | None = None,
    ) -> LMKVectorStore:
        """The store over a Qdrant collection lmk-rag wrote before (``path``: embedded; ``url``: a
        server), langchain-qdrant's shape: ``from_existing_collection(name, embedding, path=...)``.
        Opened with the encoder its fingerprint records; an ``embedding`` given
        (:class:`~langchain_lmk.LMKEmbeddings`) must be that encoder, another class is refused.
        A collection that does not exist, or that lmk-rag did not write, is refused with what was found."""
        from dataclasses import replace

        from lmk_rag import LMKEncoder
        from lmk_rag.errors import IndexNotFoundError
        from lmk_rag.index.uri import open_index, parse_index_uri, read_fingerprint

        given = lmk_encoder_of(embedding)
        if (path is None) == (url is None):
            raise InvalidInputError("give one of path= (an embedded index folder) or url= (a Qdrant server)")
        where = parse_index_uri(f"qdrant:{path}" if path is not None else f"qdrant+{url}")
        uri = replace(where, collection=collection_name, api_key=api_key)
        stored = read_fingerprint(uri)
        if stored is None:
            raise IndexNotFoundError(
                f"no lmk-rag collection {collection_name!r} at {path or url}; create it with "
                "LMKVectorStore.from_texts(..., path=/url=) or `lmk-rag ingest`"
            )
        encoder = given or LMKEncoder(**stored.encoder_settings())  # a given encoder is checked on open
        return cls(index=open_index(uri, encoder), search_mode=search_mode)


def lmk_encoder_of(embedding: object) -> LMKEncoder | None:
    """The LMKEncoder behind ``embedding`` (an LMKEmbeddings), None for None; any other embedding is
    refused: the store encodes documents and queries with landmarks itself, so its vectors would be
    silently ignored."""
    from lmk_rag import LMKEncoder

    if embedding is None:
        return None
    encoder = getattr(embedding, "encoder", None)
    if not isinstance(encoder, LMKEncoder):
        raise InvalidTypeError(
            f"embedding must be an LMKEmbeddings (or None for the packaged model), got {type(embedding).__name__}: "
            "LMKVectorStore encodes whole documents with landmarks itself, so another embedding's vectors would "
            "be ignored; pass LMKEmbeddings(model=...) to choose the model"
        )
    return encoder


def _new_id() -> str:
    import uuid

    return uuid.uuid4().hex


class LMKStoreRetriever(VectorStoreRetriever):
    """``LMKVectorStore.as_retriever()``: a ``VectorStoreRetriever`` whose default search type,
    ``"context"``, returns lmk-rag's context (:meth:`lmk_rag.index.MultiVectorIndex.context`): at
    most ``k`` passages within ``max_tokens`` tokens, each with the document's metadata plus
    ``parent_id``, ``span_start``/``span_end``, ``score`` and ``tokens``. The other search types
    are LangChain's, over whole documents."""

    search_type: str = "context"
    allowed_search_types: ClassVar[Collection[str]] = ("context", "similarity", "similarity_score_threshold", "mmr")

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        if self.search_type != "context":
            return super()._get_relevant_documents(query, run_manager=run_manager, **kwargs)
        return self._context(query, **kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """The async twin (``ainvoke``, async chains): the same context, built in an executor thread."""
        if self.search_type != "context":
            return await super()._aget_relevant_documents(query, run_manager=run_manager, **kwargs)
        return await run_in_executor(None, self._context, query, **kwargs)

    def _context(self, query: str, **kwargs: Any) -> list[Document]:
        search = {**self.search_kwargs, **kwargs}
        _check_context_kwargs(search)
        store = self.vectorstore
        if not isinstance(store, LMKVectorStore):
            raise InvalidTypeError(f"LMKStoreRetriever needs an LMKVectorStore, got {type(store).__name__}")
        return context_documents(
            store.index,
            query,
            k=search.get("k", 4),
            max_tokens=search.get("max_tokens", DEFAULT_MAX_TOKENS),
            filter=search.get("filter"),
            mode=store.search_mode,
            token_counter=search.get("token_counter"),
            # score_threshold is LangChain's name for the same floor (relevance = clipped cosine)
            min_score=search.get("min_score", search.get("score_threshold")),
        )


def _check_context_kwargs(search: dict[str, Any]) -> None:
    unknown = set(search) - set(_CONTEXT_KWARGS)
    if unknown:
        raise InvalidInputError(
            f"search_kwargs {sorted(unknown)} are not used by the context search; it takes {_CONTEXT_KWARGS} "
            "(or pass search_type='similarity' for whole documents)"
        )
