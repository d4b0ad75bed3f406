"""``LMKRetriever``: whole documents or the matched passages from an lmk-rag index."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from lmk_rag.index import MultiVectorIndex
from lmk_rag.passages import DEFAULT_PASSAGE_RULE

from .vectorstores import hit_to_document, hit_to_passage


class LMKRetriever(BaseRetriever):
    """Retrieve from a Qdrant or Chroma LMK index.

    ``mode="document"`` returns whole documents with their metadata unchanged;
    ``mode="passage"`` returns each hit's best landmark passage, with ``parent_id``,
    ``span_start``/``span_end``, ``landmark`` and ``score`` in metadata.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    index: MultiVectorIndex = Field(description="A QdrantIndex or ChromaIndex.")
    k: int = Field(default=4, gt=0, description="Documents to return.")
    mode: Literal["document", "passage"] = Field(default="document", description="Whole documents or passages.")
    search_mode: str | None = Field(
        default=None,
        description="Index search mode (index.modes: prefetch, maxsim, pooled, hybrid for Qdrant; maxsim, pooled "
        "for Chroma); None: the index's default.",
    )
    neighbours: int = Field(default=0, ge=0, description="Landmarks to widen each passage by, each side.")
    passage: Literal["peak", "region"] = Field(
        default=DEFAULT_PASSAGE_RULE,
        description="Which landmark names the passage: region (whose neighbourhood matches best; the default) "
        "or peak (the single best); see lmk_rag.passages.",
    )
    filter: dict[str, Any] | None = Field(default=None, description="Metadata equality filter (AND).")

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = kwargs.get("k", self.k)
        hits = self.index.search(
            query,
            k=k,
            filter=kwargs.get("filter", self.filter),
            mode=self.search_mode,
            neighbours=self.neighbours,
            passage=self.passage,
        )
        convert = hit_to_passage if self.mode == "passage" else hit_to_document
        return [convert(h) for h in hits]
