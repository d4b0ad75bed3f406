"""``LMKVectorStore``: a LlamaIndex vector store over an lmk-rag index (Qdrant or Chroma).

Each whole document is stored as landmark vectors; queries return the passages that answer as
nodes. LlamaIndex splits documents into chunks before a vector store sees them
(``VectorStoreIndex.from_documents`` runs ``SentenceSplitter`` unless told otherwise): the store
puts each document back together from its chunks' character offsets and stores it whole, so the
usual LlamaIndex code gives landmark passages with no splitter tuning.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, Document, NodeRelationship, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.retrievers.lmk.base import (
    REF_DOC_KEY,
    SOURCE_HASH_KEY,
    hit_to_node,
    llm_view,
    passage_to_node,
    stable_ids,
)
from llama_index.retrievers.lmk.filters import to_lmk_filter

from lmk_rag.context import CONTEXT_DOCUMENTS, DEFAULT_MAX_TOKENS
from lmk_rag.errors import InvalidInputError, InvalidTypeError
from lmk_rag.framework_fields import min_score_field, token_counter_field
from lmk_rag.index import MultiVectorIndex, SearchMode

logger = logging.getLogger(__name__)


class StoreEncodesEmbedding(BaseEmbedding):
    """The ``embed_model`` to give ``VectorStoreIndex`` over an :class:`LMKVectorStore`: the index
    embeds every chunk before the store sees it, and the store encodes whole documents with its
    own encoder (and queries too), so this returns zero vectors at no cost instead of encoding
    each chunk for nothing. Refuses queries: those go to the store as text."""

    dimension: int = Field(gt=0, description="The store encoder's dimension.")

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "StoreEncodesEmbedding"

    def _get_query_embedding(self, query: str) -> Embedding:
        raise InvalidInputError(
            "StoreEncodesEmbedding does not embed queries: LMKVectorStore encodes them itself; give this "
            "embed_model only to a VectorStoreIndex over an LMKVectorStore"
        )

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> Embedding:
        return [0.0] * self.dimension

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return [[0.0] * self.dimension for _ in texts]


class LMKVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over a :class:`~lmk_rag.index.QdrantIndex` or
    :class:`~lmk_rag.index.ChromaIndex`.

    ``VectorStoreIndex.from_documents(docs, storage_context=StorageContext.from_defaults(
    vector_store=store), embed_model=store.embed_model)`` stores each document whole (put back
    together from the chunks LlamaIndex made of it), with its metadata. A document read from a
    file without ``filename_as_id`` gets the id ``filename_as_id`` would give (its path), so reading
    and indexing the same files again replaces them. Queries return, by default (``mode="context"``),
    the best passages within ``max_tokens`` tokens (at most ``similarity_top_k``), each a node with
    ``start_char_idx``/``end_char_idx`` in its document's text and the document as SOURCE;
    ``mode="passage"``: each of the ``similarity_top_k`` best documents' best landmark passage.
    ``MetadataFilters`` (EQ, NE, GT, GTE, LT, LTE, IN, NIN, AND / OR) and lmk-rag's dict filters work
    on every backend; ``delete(ref_doc_id)`` removes a document.

    **Instantiate**

    ```python
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.vector_stores.lmk import LMKVectorStore
    from lmk_rag.index import QdrantIndex

    store = LMKVectorStore(QdrantIndex("./lmk_index"))
    ```

    **Index documents**

    ```python
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex.from_documents(docs, storage_context=storage, embed_model=store.embed_model)
    ```

    **Query**

    ```python
    nodes = index.as_retriever(similarity_top_k=4).retrieve("a question")
    answer = index.as_query_engine(llm=llm).query("a question")
    ```"""

    stores_text: bool = True
    is_embedding_query: bool = False
    flat_metadata: bool = True
    mode: Literal["context", "passage"] = Field(
        default="context", description="The token-budgeted context, or each document's best passage."
    )
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0, description="Token budget of the context (context mode).")
    token_counter: Any = token_counter_field()
    min_score: float | None = min_score_field()
    search_mode: SearchMode | None = Field(
        default=None, description="The index's search mode (index.modes); None: its default (hybrid on Qdrant)."
    )
    _index: MultiVectorIndex = PrivateAttr()
    _warned_embedded: bool = PrivateAttr(default=False)

    def __init__(self, index: MultiVectorIndex, **data: Any) -> None:
        if not isinstance(index, MultiVectorIndex):
            raise InvalidTypeError(f"index must be a QdrantIndex or ChromaIndex, got {type(index).__name__}")
        super().__init__(**data)
        self._index = index

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "LMKVectorStore"

    @property
    def client(self) -> MultiVectorIndex:
        """The lmk-rag index behind the store (LlamaIndex's name for it)."""
        return self._index

    @property
    def index(self) -> MultiVectorIndex:
        """The lmk-rag index behind the store."""
        return self._index

    @property
    def embed_model(self) -> StoreEncodesEmbedding:
        """What to pass as ``VectorStoreIndex(..., embed_model=)``: see :class:`StoreEncodesEmbedding`."""
        return StoreEncodesEmbedding(dimension=self._index.encoder.dimension)

    # ---------------------------------------------------------------- writes
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store the documents these nodes come from, each whole (see the class docstring);
        returns the nodes' ids, as LlamaIndex expects. Chunks are grouped by their source document
        (its id and hash) and laid at their character offsets; a document whose first chunks came in
        an earlier ``add`` is completed from what the index holds. Chunks that would mix two documents
        (one id, two source hashes, or different texts at the same offsets) are refused with why."""
        groups: dict[str, tuple[str | None, dict[str, Any], list[Piece]]] = {}
        for node in nodes:
            ref = node.ref_doc_id or node.node_id
            source = node.relationships.get(NodeRelationship.SOURCE)
            digest = getattr(source, "hash", None) if source is not None and not isinstance(source, list) else None
            piece = (getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None), node.get_content())
            if ref not in groups:
                groups[ref] = (digest, _flat_metadata(node), [])
            elif groups[ref][0] != digest:
                raise InvalidInputError(
                    f"nodes with ref_doc_id {ref!r} come from two different documents (their SOURCE hashes "
                    f"differ: {groups[ref][0]!r}, {digest!r}); LMKVectorStore stores each document whole and "
                    "will not mix them: give each document its own id"
                )
            groups[ref][2].append(piece)
        if not groups:
            return []
        self._warn_if_embedded(nodes)
        refs = list(groups)
        metadatas = [
            {**groups[r][1], REF_DOC_KEY: r, **({SOURCE_HASH_KEY: groups[r][0]} if groups[r][0] else {})} for r in refs
        ]
        ids = _document_ids(refs, metadatas)
        self._complete_from_index(ids, [groups[r] for r in refs])
        texts = [_assemble(groups[r][2], r) for r in refs]
        self._index.add(texts, ids=ids, metadatas=metadatas)
        return [node.node_id for node in nodes]

    def _warn_if_embedded(self, nodes: Sequence[BaseNode]) -> None:
        """Say once when LlamaIndex embedded the chunks with a real model (``Settings.embed_model``):
        the store encodes whole documents itself, so that work was for nothing."""
        if self._warned_embedded:
            return
        for node in nodes:
            if node.embedding and any(node.embedding):
                logger.warning(
                    "LlamaIndex embedded every chunk before LMKVectorStore saw it (Settings.embed_model or "
                    "embed_model=), for nothing: the store encodes whole documents itself. Pass "
                    "embed_model=store.embed_model to VectorStoreIndex to skip that work"
                )
                self._warned_embedded = True
                return

    def _complete_from_index(
        self, ids: list[str], groups: list[tuple[str | None, dict[str, Any], list[Piece]]]
    ) -> None:
        """Prepend what the index holds of a document whose chunks do not start at its beginning
        (the rest of a document LlamaIndex sent in several ``add`` calls), when the stored copy
        comes from the same source (same hash)."""
        partial = [
            i for i, (digest, _, pieces) in enumerate(groups) if digest is not None and _first_offset(pieces) > 0
        ]
        if not partial:
            return
        stored = {d.id: d for d in self._index.get([ids[i] for i in partial])}
        for i in partial:
            doc = stored.get(ids[i])
            if doc is not None and doc.metadata.get(SOURCE_HASH_KEY) == groups[i][0]:
                groups[i][2][:0] = [(0, len(doc.text), doc.text)]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Remove the document LlamaIndex knows as ``ref_doc_id`` (and a document stored under that id)."""
        ids = set(self._index.ids({REF_DOC_KEY: ref_doc_id}))
        ids.update(d.id for d in self._index.get([ref_doc_id]))
        self._index.delete(sorted(ids))

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Remove whole documents: those named in ``node_ids`` (a document's id, or a passage node's
        document) and those matching ``filters``."""
        ids: set[str] = set()
        if node_ids:
            ids.update(_document_of(n) for n in node_ids)
        if filters is not None:
            ids.update(self._index.ids(to_lmk_filter(filters)))
        if ids:
            self._index.delete(sorted(ids))

    def clear(self) -> None:
        """Remove every document."""
        self._index.delete(self._index.ids())

    # ---------------------------------------------------------------- reads
    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **kwargs: Any
    ) -> list[BaseNode]:
        """Whole stored documents as nodes: those named in ``node_ids``, or matching ``filters``."""
        if node_ids is None and filters is None:
            raise InvalidInputError("get_nodes needs node_ids or filters")
        ids = [_document_of(n) for n in node_ids] if node_ids is not None else []
        if filters is not None:
            matching = self._index.ids(to_lmk_filter(filters))
            allowed = set(matching)
            ids = [i for i in ids if i in allowed] if node_ids is not None else matching
        return [llm_view(TextNode(id_=d.id, text=d.text, metadata=dict(d.metadata))) for d in self._index.get(ids)]

    # ---------------------------------------------------------------- async
    # LlamaIndex's defaults run the sync methods on the event loop; these run them in a worker
    # thread, so encoding, searching and writing never stall other coroutines.
    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """:meth:`add` in a worker thread."""
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """:meth:`delete` in a worker thread."""
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """:meth:`delete_nodes` in a worker thread."""
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aclear(self) -> None:
        """:meth:`clear` in a worker thread."""
        await asyncio.to_thread(self.clear)

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **kwargs: Any
    ) -> list[BaseNode]:
        """:meth:`get_nodes` in a worker thread."""
        return await asyncio.to_thread(self.get_nodes, node_ids, filters, **kwargs)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """:meth:`query` in a worker thread."""
        return await asyncio.to_thread(self.query, query, **kwargs)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The passages that answer ``query.query_str`` (see the class docstring)."""
        if not query.query_str:
            raise InvalidInputError(
                "LMKVectorStore searches by the query's text (query_str); it encodes queries itself, so an "
                "embedding alone is not enough"
            )
        if query.doc_ids or query.node_ids:
            raise InvalidInputError(
                "LMKVectorStore does not restrict a query to doc_ids / node_ids; filter on metadata instead"
            )
        where = to_lmk_filter(query.filters)
        k = max(1, query.similarity_top_k)
        if query.mode == VectorStoreQueryMode.MMR:
            return self._mmr(query, k, where, kwargs)
        mode = self._search_mode(query.mode)
        if self.mode == "context":
            passages = self._index.context(
                query.query_str,
                self.max_tokens,
                k=max(k, CONTEXT_DOCUMENTS),
                filter=where,
                mode=mode,
                token_counter=self.token_counter,
                min_score=self.min_score,
            )
            # The budget decides how many: similarity_top_k (LlamaIndex's default is 2) only widens
            # the documents searched, so a default retriever still fills the budget.
            found = [passage_to_node(p) for p in passages]
        else:
            found = [hit_to_node(h) for h in self._index.search(query.query_str, k=k, filter=where, mode=mode)]
        nodes = [f.node for f in found]
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[float(f.score or 0.0) for f in found], ids=[n.node_id for n in nodes]
        )

    def _mmr(self, query: VectorStoreQuery, k: int, where: Any, kwargs: dict[str, Any]) -> VectorStoreQueryResult:
        """``vector_store_query_mode="mmr"``: the best passage of ``k`` documents chosen by maximal
        marginal relevance (LlamaIndex's own) over the pooled vectors of the ``mmr_prefetch_k``
        (default 4k) best; ``mmr_threshold`` (``vector_store_kwargs``) trades relevance for diversity."""
        from llama_index.core.indices.query.embedding_utils import get_top_k_mmr_embeddings

        threshold = query.mmr_threshold if query.mmr_threshold is not None else kwargs.get("mmr_threshold")
        if threshold is not None and (isinstance(threshold, bool) or not 0 <= float(threshold) <= 1):
            raise InvalidInputError(f"mmr_threshold must be a number in [0, 1], got {threshold!r}")
        fetch = kwargs.get("mmr_prefetch_k", 4 * k)
        assert query.query_str is not None
        hits = self._index.search(query.query_str, k=max(k, fetch), filter=where, mode=self.search_mode)
        encoded = {doc.id: mv for doc, mv in self._index.get_encoded([h.id for h in hits])}
        hits = [h for h in hits if h.id in encoded]
        if not hits:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        _, chosen = get_top_k_mmr_embeddings(
            self._index.encoder.encode_query(query.query_str).tolist(),
            [encoded[h.id].pooled.tolist() for h in hits],
            similarity_top_k=k,
            embedding_ids=list(range(len(hits))),
            mmr_threshold=threshold,
        )
        found = [hit_to_node(hits[i]) for i in chosen]
        nodes = [f.node for f in found]
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[float(f.score or 0.0) for f in found], ids=[n.node_id for n in nodes]
        )

    def _search_mode(self, mode: VectorStoreQueryMode) -> SearchMode | None:
        if mode == VectorStoreQueryMode.DEFAULT:
            return self.search_mode
        if mode == VectorStoreQueryMode.HYBRID:
            return "hybrid"
        raise InvalidInputError(
            f"vector_store_query_mode {mode.value!r} is not supported by LMKVectorStore; use 'default', "
            "'hybrid' or 'mmr' (or search_mode= on the store)"
        )


def _flat_metadata(node: BaseNode) -> dict[str, Any]:
    out = {}
    for key, value in node.metadata.items():
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise InvalidTypeError(
                f"node metadata[{key!r}] is a {type(value).__name__}; LMKVectorStore keeps flat metadata "
                "(str, int, float, bool or None): flatten it or drop it before indexing"
            )
        out[key] = value
    return out


Piece = tuple[int | None, int | None, str]


def _first_offset(pieces: list[Piece]) -> int:
    starts = [s for s, _, _ in pieces if s is not None]
    return min(starts) if starts and len(starts) == len(pieces) else 0


def _assemble(pieces: list[Piece], ref: str) -> str:
    """A document's text from its chunks: laid at their character offsets (a gap between two
    chunks, which the splitter stripped, becomes spaces of the same length, so offsets still
    point into the original), or joined by blank lines where a chunk does not know its offsets.
    Overlapping chunks must agree on the characters they share: else they are two documents'."""
    if len(pieces) == 1:
        return pieces[0][2]
    known = all(s is not None and e is not None and e - s == len(t) for s, e, t in pieces)
    if not known:
        logger.warning("chunks without character offsets: a document is stored as its chunks joined by blank lines")
        return "\n\n".join(t for _, _, t in pieces)
    text, end = "", 0
    for start, stop, chunk in sorted(pieces, key=lambda p: (p[0], p[1])):
        assert start is not None and stop is not None
        if start > end:
            text += " " * (start - end)
        shared = min(stop, end) - start
        if shared > 0 and text[start : start + shared].strip() and text[start : start + shared] != chunk[:shared]:
            raise InvalidInputError(
                f"chunks of document {ref!r} disagree at characters {start}-{start + shared} (two documents under "
                "one ref_doc_id, or chunks of another version of it); LMKVectorStore will not mix them: give each "
                "document its own id, or add its chunks again from one reading of the document"
            )
        if stop > end:
            text += chunk[max(0, end - start) :]
            end = stop
    return text


def _document_ids(refs: list[str], metadatas: list[dict[str, Any]]) -> list[str]:
    return stable_ids([Document(id_=r, text="", metadata=m) for r, m in zip(refs, metadatas)])


def _document_of(node_id: str) -> str:
    """The document a node id names: a context passage node is ``DOC:START-END``, a passage node ``DOC#LANDMARK``."""
    head, sep, tail = node_id.rpartition(":")
    if sep and "-" in tail and all(part.isdigit() for part in tail.split("-", 1)):
        return head
    head, sep, tail = node_id.rpartition("#")
    if sep and tail.isdigit():
        return head
    return node_id
