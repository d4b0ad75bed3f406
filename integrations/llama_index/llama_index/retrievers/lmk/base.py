"""``LMKRetriever`` for LlamaIndex: each hit's best landmark passage as a ``NodeWithScore``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import Document, NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from lmk_rag.errors import InvalidInputError, InvalidTypeError
from lmk_rag.index import Hit, MultiVectorIndex
from lmk_rag.passages import DEFAULT_PASSAGE_RULE, check_passage_rule


def ingest_documents(index: MultiVectorIndex, documents: Sequence[Document]) -> list[str]:
    """Add LlamaIndex ``Document`` objects whole (id = ``doc_id``, metadata kept)."""
    return index.add(
        [d.text for d in documents], ids=[d.doc_id for d in documents], metadatas=[dict(d.metadata) for d in documents]
    )


def hit_to_node(hit: Hit) -> NodeWithScore:
    node = TextNode(
        id_=f"{hit.id}#{hit.landmark}",
        text=hit.passage,
        metadata=dict(hit.metadata),
        start_char_idx=hit.span[0],
        end_char_idx=hit.span[1],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.id)},
    )
    return NodeWithScore(node=node, score=hit.score)


class LMKRetriever(BaseRetriever):
    """Retrieve matched passages (with ``start_char_idx``/``end_char_idx`` and the parent
    document as SOURCE) from a Qdrant or Chroma LMK index; usable in ``RetrieverQueryEngine``."""

    def __init__(
        self,
        index: MultiVectorIndex,
        similarity_top_k: int = 4,
        *,
        search_mode: str | None = None,
        neighbours: int = 0,
        passage: str = DEFAULT_PASSAGE_RULE,
        filters: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(index, MultiVectorIndex):
            raise InvalidTypeError(f"index must be a QdrantIndex or ChromaIndex, got {type(index).__name__}")
        if isinstance(similarity_top_k, bool) or not isinstance(similarity_top_k, int) or similarity_top_k < 1:
            raise InvalidInputError(f"similarity_top_k must be a positive int, got {similarity_top_k!r}")
        self.index = index
        self.similarity_top_k = similarity_top_k
        self.search_mode = search_mode
        self.neighbours = neighbours
        self.passage = check_passage_rule(passage)
        self.filters = filters
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.index.search(
            query_bundle.query_str,
            k=self.similarity_top_k,
            filter=self.filters,
            mode=self.search_mode,
            neighbours=self.neighbours,
            passage=self.passage,
        )
        return [hit_to_node(h) for h in hits]
