"""``LMKRetriever``: the context for an LLM (default), the matched passages, or whole documents."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, SecretStr, model_validator

from lmk_rag.context import DEFAULT_MAX_TOKENS
from lmk_rag.framework_fields import min_score_field, token_counter_field
from lmk_rag.index import MultiVectorIndex, SearchMode
from lmk_rag.index.remote import RemoteIndex
from lmk_rag.passages import DEFAULT_PASSAGE_RULE

from .documents import context_documents, hit_to_document, hit_to_passage


class LMKRetriever(BaseRetriever):
    """Retrieve from a Qdrant or Chroma LMK index.

    ``mode="context"`` (the default) returns what to hand an LLM: the best passages within
    ``max_tokens`` tokens (:meth:`lmk_rag.index.MultiVectorIndex.context`), at most ``k`` of them,
    each with the document's metadata plus ``parent_id``, ``span_start``/``span_end``, ``score`` and
    ``tokens``; ``mode="passage"`` returns each of the ``k`` best documents' best landmark passage
    (``landmark`` in metadata too); ``mode="document"`` returns whole documents, metadata unchanged.

    ``url=`` instead of ``index=`` uses the index of an ``lmk-rag serve --index ...`` server
    (a :class:`~lmk_rag.index.RemoteIndex`; ``api_key`` or ``$LMK_RAG_API_KEY``), so many chains
    share one server.

    **Instantiate**

    ```python
    from langchain_lmk import LMKRetriever
    from lmk_rag.index import QdrantIndex

    retriever = LMKRetriever(index=QdrantIndex("./lmk_index"), max_tokens=512)
    remote = LMKRetriever(url="http://127.0.0.1:8080")  # an lmk-rag serve --index ... server
    ```

    **Retrieve**

    ```python
    passages = retriever.invoke("a question")
    passages = await retriever.ainvoke("a question")
    ```

    **Use in a chain**

    ```python
    chain = {"context": retriever, "question": RunnablePassthrough()} | prompt | llm
    ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    index: MultiVectorIndex | RemoteIndex = Field(
        description="A QdrantIndex or ChromaIndex, or a RemoteIndex (what url= builds)."
    )
    url: str | None = Field(default=None, description="An lmk-rag server to retrieve from instead of index=.")
    api_key: SecretStr | None = Field(default=None, description="The server's API key (default $LMK_RAG_API_KEY).")
    k: int = Field(
        default=4, gt=0, description="Documents (or, in context mode, at most this many passages) to return."
    )
    mode: Literal["context", "passage", "document"] = Field(
        default="context", description="The token-budgeted context, each document's best passage, or whole documents."
    )
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0, description="Token budget of the context (context mode).")
    token_counter: Any = token_counter_field()
    min_score: float | None = min_score_field()
    search_mode: SearchMode | None = Field(
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
    filter: Any = Field(
        default=None,
        description='Metadata filter: {"lang": "en"}, {"year": {"$gte": 2020}}, $in/$nin/$ne, $and/$or '
        "(lmk_rag.index.filters), or a Qdrant models.Filter on a Qdrant index.",
    )

    @model_validator(mode="before")
    @classmethod
    def _index_from_url(cls, data: Any) -> Any:
        """``url=`` builds the RemoteIndex; giving both index= and url= is refused."""
        if isinstance(data, dict) and data.get("url") is not None:
            if data.get("index") is not None:
                raise ValueError("give index= (a local index) or url= (an lmk-rag server), not both")
            key = data.get("api_key")
            secret = key.get_secret_value() if isinstance(key, SecretStr) else key
            data = {**data, "index": RemoteIndex(data["url"], api_key=secret)}
        return data

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = kwargs.get("k", self.k)
        if self.mode == "context":
            return context_documents(
                self.index,
                query,
                k=k,
                max_tokens=kwargs.get("max_tokens", self.max_tokens),
                filter=kwargs.get("filter", self.filter),
                mode=self.search_mode,
                token_counter=self.token_counter,
                min_score=kwargs.get("min_score", self.min_score),
            )
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
