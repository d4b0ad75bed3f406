"""``LMKRetriever`` for LlamaIndex: the context for an LLM (default), or each hit's best landmark
passage, as ``NodeWithScore`` objects."""

from __future__ import annotations

import asyncio
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import Document, NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import MetadataFilters
from llama_index.retrievers.lmk.filters import to_lmk_filter

from lmk_rag.context import CONTEXT_DOCUMENTS, DEFAULT_MAX_TOKENS, Passage, check_max_tokens, check_min_score
from lmk_rag.encoding.inputs import check_int
from lmk_rag.errors import InvalidInputError, InvalidTypeError
from lmk_rag.index import Hit, MultiVectorIndex, SearchMode
from lmk_rag.index.remote import RemoteIndex
from lmk_rag.passages import DEFAULT_PASSAGE_RULE, PassageRule, check_passage_rule
from lmk_rag.types import PAGE_MAP_KEY, page_fields

RetrieverMode = Literal["context", "passage"]
RETRIEVER_MODES: tuple[RetrieverMode, ...] = typing.get_args(RetrieverMode)
# Kept in metadata for filters and deletes, kept out of the text an LLM reads: SimpleDirectoryReader's
# file metadata, and the LlamaIndex document id LMKVectorStore records.
REF_DOC_KEY = "ref_doc_id"
#: The hash of the source document a stored document was assembled from (LMKVectorStore).
SOURCE_HASH_KEY = "ref_doc_hash"
# What SimpleDirectoryReader itself keeps from the LLM (it shows file_path, so a citation can name it).
FILE_METADATA_KEYS = (
    "file_name",
    "file_type",
    "file_size",
    "creation_date",
    "last_modified_date",
    "last_accessed_date",
)
HIDDEN_FROM_LLM = (*FILE_METADATA_KEYS, REF_DOC_KEY, SOURCE_HASH_KEY, PAGE_MAP_KEY)


def ingest_documents(index: MultiVectorIndex, documents: Sequence[Document]) -> list[str]:
    """Add LlamaIndex ``Document`` objects whole (metadata kept), so that ingesting the same files
    again replaces them instead of adding copies: a document's id is its ``doc_id``, except a random
    one (what ``SimpleDirectoryReader`` gives without ``filename_as_id``) on a document that knows its
    ``file_path``, which takes the id ``filename_as_id=True`` would give (the path; ``path_part_N``
    for the parts of one file)."""
    ids = stable_ids(documents)
    return index.add([d.text for d in documents], ids=ids, metadatas=[dict(d.metadata) for d in documents])


def stable_ids(documents: Sequence[Document]) -> list[str]:
    """Each document's id for the index (see :func:`ingest_documents`): its own id, or for a document
    LlamaIndex read from a file without ``filename_as_id`` (a random id) its file path, with its page
    (``PATH#page=LABEL``) where it is one page of the file, so pages never replace one another
    whether they arrive together or one by one; other parts of one file in one batch get
    ``PATH_part_N``."""
    paths: list[str | None] = []
    for d in documents:
        path = d.metadata.get("file_path") if _random_id(d.doc_id) else None
        page = d.metadata.get("page_label", d.metadata.get("page"))
        if isinstance(path, str) and path and page is not None and str(page) != "":
            paths.append(f"{path}#page={page}")
        else:
            paths.append(path)
    parts: dict[str, int] = {}
    for p in paths:
        if isinstance(p, str) and p:
            parts[p] = parts.get(p, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for d, p in zip(documents, paths):
        if not isinstance(p, str) or not p:
            out.append(d.doc_id)
        elif parts[p] == 1:
            out.append(p)
        else:
            out.append(f"{p}_part_{seen.get(p, 0)}")
            seen[p] = seen.get(p, 0) + 1
    return out


def _random_id(doc_id: str) -> bool:
    """True for the uuid4 LlamaIndex gives a document that was not named."""
    import uuid

    try:
        return uuid.UUID(doc_id).version == 4
    except ValueError:
        return False


def llm_view(node: TextNode) -> TextNode:
    """``node`` with file metadata and the store's own keys kept in ``metadata`` but out of what
    the LLM and embedders read (LlamaIndex prints metadata above each node's text)."""
    hidden = [k for k in node.metadata if k in HIDDEN_FROM_LLM]
    node.excluded_llm_metadata_keys = sorted(set(node.excluded_llm_metadata_keys) | set(hidden))
    node.excluded_embed_metadata_keys = sorted(set(node.excluded_embed_metadata_keys) | set(hidden))
    return node


def _page_label(metadata: Mapping[str, object], span: tuple[int, int]) -> dict[str, str]:
    """``page_label`` of a PDF passage's first page, as LlamaIndex's PDF reader names it; {} otherwise."""
    label = page_fields(metadata, span).get("page_label")
    return {"page_label": str(label)} if label is not None else {}


def hit_to_node(hit: Hit) -> NodeWithScore:
    """A search hit as a LlamaIndex node: the passage, its document's metadata and SOURCE
    relationship, ``start_char_idx``/``end_char_idx`` of the passage; the score is the hit's
    ``similarity`` (its best landmark's cosine: an absolute scale, so ``similarity_cutoff`` means
    the same for every query and search mode)."""
    node = TextNode(
        id_=f"{hit.id}#{hit.landmark}",
        text=hit.passage,
        metadata={**hit.metadata, **_page_label(hit.metadata, hit.span)},
        start_char_idx=hit.span[0],
        end_char_idx=hit.span[1],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.id)},
    )
    return NodeWithScore(node=llm_view(node), score=hit.similarity)


def passage_to_node(passage: Passage, source: str | None = None, offset: int = 0) -> NodeWithScore:
    """A context passage as a node: its text, ``start_char_idx``/``end_char_idx`` in the parent's
    text (shifted by ``offset``), the parent (``source``, default the passage's document) as SOURCE."""
    start, end = passage.span[0] + offset, passage.span[1] + offset
    parent = source if source is not None else passage.id
    node = TextNode(
        id_=f"{parent}:{start}-{end}",
        text=passage.text,
        metadata={**passage.metadata, **_page_label(passage.metadata, passage.span)},
        start_char_idx=start,
        end_char_idx=end,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=parent)},
    )
    return NodeWithScore(node=llm_view(node), score=passage.score)


class LMKRetriever(BaseRetriever):
    """Retrieve from a Qdrant or Chroma LMK index, for ``RetrieverQueryEngine`` and friends.

    ``mode="context"`` (the default): what to hand the LLM, the best passages within ``max_tokens``
    tokens (counted by ``token_counter``: a callable or the folder of your LLM's tokenizer.json; None:
    the encoder's tokenizer) from the ``similarity_top_k`` best documents (at least 10 are searched; see
    :meth:`lmk_rag.index.MultiVectorIndex.context`); ``mode="passage"``: each of the
    ``similarity_top_k`` best documents' best landmark passage. Nodes carry
    ``start_char_idx``/``end_char_idx`` in the parent's text and the parent document as SOURCE.
    ``url=`` instead of ``index`` retrieves from an ``lmk-rag serve --index ...`` server (a
    :class:`~lmk_rag.index.RemoteIndex`; ``api_key`` or ``$LMK_RAG_API_KEY``).

    **Instantiate**

    ```python
    from llama_index.retrievers.lmk import LMKRetriever
    from lmk_rag.index import QdrantIndex

    retriever = LMKRetriever(QdrantIndex("./lmk_index"), max_tokens=512)
    ```

    **Retrieve**

    ```python
    nodes = retriever.retrieve("a question")
    nodes = await retriever.aretrieve("a question")
    ```

    **Use in a query engine**

    ```python
    from llama_index.core.query_engine import RetrieverQueryEngine

    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    ```"""

    def __init__(
        self,
        index: MultiVectorIndex | RemoteIndex | None = None,
        similarity_top_k: int = 4,
        *,
        mode: RetrieverMode = "context",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        token_counter: Callable[[str], int] | str | None = None,
        min_score: float | None = None,
        search_mode: SearchMode | None = None,
        neighbours: int = 0,
        passage: PassageRule = DEFAULT_PASSAGE_RULE,
        filters: MetadataFilters | Mapping[str, object] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        **kwargs: Any,
    ) -> None:
        if url is not None:
            if index is not None:
                raise InvalidInputError("give index (a local index) or url= (an lmk-rag server), not both")
            index = RemoteIndex(url, api_key=api_key)
        if not isinstance(index, (MultiVectorIndex, RemoteIndex)):
            raise InvalidTypeError(
                f"index must be a QdrantIndex, ChromaIndex or RemoteIndex (or give url=), got {type(index).__name__}"
            )
        check_int("similarity_top_k", similarity_top_k)
        if mode not in RETRIEVER_MODES:
            raise InvalidInputError(f"mode must be one of {RETRIEVER_MODES}, got {mode!r}")
        self.index = index
        self.similarity_top_k = similarity_top_k
        self.mode = mode
        self.max_tokens = check_max_tokens(max_tokens)
        self.token_counter = token_counter
        self.min_score = check_min_score(min_score)
        self.search_mode = search_mode
        self.neighbours = neighbours
        self.passage = check_passage_rule(passage)
        self.filters = to_lmk_filter(filters)
        super().__init__(**kwargs)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # BaseRetriever's default runs _retrieve on the event loop, which would stall every other
        # coroutine (a server's other requests) for the whole search or remote call.
        return await asyncio.to_thread(self._retrieve, query_bundle)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.mode == "context":
            passages = self.index.context(
                query_bundle.query_str,
                self.max_tokens,
                k=max(self.similarity_top_k, CONTEXT_DOCUMENTS),
                filter=self.filters,
                mode=self.search_mode,
                token_counter=self.token_counter,
                min_score=self.min_score,
            )
            return [passage_to_node(p) for p in passages]
        hits = self.index.search(
            query_bundle.query_str,
            k=self.similarity_top_k,
            filter=self.filters,
            mode=self.search_mode,
            neighbours=self.neighbours,
            passage=self.passage,
        )
        return [hit_to_node(h) for h in hits]
