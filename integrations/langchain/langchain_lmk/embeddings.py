"""``LMKEmbeddings``: a LangChain ``Embeddings`` over the LMK encoder."""

from __future__ import annotations

from lmk_rag.errors import InvalidTypeError, MissingDependencyError

try:
    from langchain_core.embeddings import Embeddings
    from langchain_core.runnables.config import run_in_executor
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("langchain_lmk needs langchain-core: pip install 'lmk-rag[langchain]'") from exc

from lmk_rag.framework_fields import LMKEncoderFields


class LMKEmbeddings(LMKEncoderFields, Embeddings):
    """Landmark-pooled embeddings for LangChain.

    Long documents are encoded whole, in windows; a user-set ``truncate_tokens`` truncates with a
    logged warning. Objects with the same settings share one loaded model.

    **Instantiate**

    ```python
    from langchain_lmk import LMKEmbeddings

    emb = LMKEmbeddings()  # the packaged model, pooling="lmk", k=32
    ```

    **Embed**

    ```python
    vectors = emb.embed_documents(["a text", "another"])
    q = emb.embed_query("a question")
    ```
    """

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (``document_prefix`` applied), one list of floats each."""
        vectors: list[list[float]] = self.encoder.encode(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (``query_prefix`` applied)."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
        vector: list[float] = self.encoder.encode_query(text).tolist()
        return vector

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Async ``embed_documents``; runs in a worker thread so the event loop stays free."""
        return await run_in_executor(None, self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Async ``embed_query``; runs in a worker thread so the event loop stays free."""
        return await run_in_executor(None, self.embed_query, text)
