"""``LMKContextCompressor``: documents from any retriever cut down to their best passages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from lmk_rag import LMKEncoder
from lmk_rag.context import DEFAULT_MAX_TOKENS, context
from lmk_rag.framework_fields import min_score_field, token_counter_field

from .documents import passage_metadata


class LMKContextCompressor(BaseDocumentCompressor):
    """Keep your store (Chroma, pgvector, BM25, ...) and hand the LLM landmark passages: the
    documents it retrieved are encoded with LMK and cut down to lmk-rag's context for the query,
    the best passages within ``max_tokens`` tokens (see :mod:`lmk_rag.context`).

    Each passage keeps its document's metadata and adds ``parent_id`` (the document's id),
    ``span_start``/``span_end`` (characters in its text), ``score`` and ``tokens``.

    **Instantiate**

    ```python
    from langchain_lmk import LMKContextCompressor

    compressor = LMKContextCompressor(max_tokens=512, token_counter="path/to/your/llm/tokenizer")
    ```

    **Use with your retriever**

    ```python
    from langchain_classic.retrievers import ContextualCompressionRetriever

    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=my_store.as_retriever())
    passages = retriever.invoke("a question")
    ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    encoder: LMKEncoder | None = Field(default=None, description="The LMK encoder; None: the packaged model.")
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0, description="Token budget of the passages returned.")
    token_counter: Any = token_counter_field()
    min_score: float | None = min_score_field()
    _default: LMKEncoder | None = PrivateAttr(default=None)

    def _encoder(self) -> LMKEncoder:
        if self.encoder is not None:
            return self.encoder
        if self._default is None:
            self._default = LMKEncoder()
        return self._default

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None, **kwargs: Any
    ) -> Sequence[Document]:
        """The documents' best passages for ``query`` within the token budget, best first, each a
        ``Document`` with its parent's id and character span in its metadata."""
        docs = list(documents)
        if not docs:
            return []
        encoder = self._encoder()
        texts = [d.page_content for d in docs]
        names = [str(i) for i in range(len(docs))]
        encoded = encoder.encode_multi(texts)
        passages = context(
            query,
            texts,
            encoded,
            encoder,
            self.max_tokens,
            ids=names,
            k=len(docs),
            token_counter=self.token_counter,
            min_score=self.min_score,
        )
        out = []
        for p in passages:
            source = docs[int(p.id)]
            parent = source.id if source.id is not None else p.id
            meta = passage_metadata(source.metadata, parent, p.span, score=p.score, tokens=p.tokens)
            out.append(Document(id=f"{parent}:{p.span[0]}-{p.span[1]}", page_content=p.text, metadata=meta))
        return out
