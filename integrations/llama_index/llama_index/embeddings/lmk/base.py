"""``LMKEmbedding``: a LlamaIndex ``BaseEmbedding`` over the LMK encoder."""

from __future__ import annotations

import asyncio
from typing import Any

from lmk_rag.errors import InvalidInputError, MissingDependencyError

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "llama_index.embeddings.lmk needs llama-index-core: pip install 'lmk-rag[llama-index]'"
    ) from exc

from lmk_rag.framework_fields import LMKEncoderFields


class LMKEmbedding(LMKEncoderFields, BaseEmbedding):
    """Landmark-pooled embeddings for LlamaIndex.

    ``embed_batch_size`` (validated by LlamaIndex) is how many texts LlamaIndex hands over at
    once; ``batch_size`` is the rows per encoder forward pass. Long texts are encoded whole.

    **Instantiate**

    ```python
    from llama_index.core import Settings
    from llama_index.embeddings.lmk import LMKEmbedding

    Settings.embed_model = LMKEmbedding()  # the packaged model
    ```
    """

    def __init__(self, **data: Any) -> None:
        # LlamaIndex users name the model with ``model_name``; ``model`` is lmk-rag's name for it.
        # Either loads that model (or fails saying why); two different names are refused, and
        # ``model_name`` then reports the model actually loaded, never a name that was ignored.
        name, model = data.pop("model_name", None), data.get("model")
        if name is not None and model is not None and name != model:
            raise InvalidInputError(
                f"model_name={name!r} and model={model!r} name two different models; give one of them"
            )
        if name is not None:
            data["model"] = name
        super().__init__(**data)
        self.model_name = self.encoder.model_name

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex records for this class."""
        return "LMKEmbedding"

    def _get_query_embedding(self, query: str) -> Embedding:
        vector: Embedding = self.encoder.encode_query(query).tolist()
        return vector

    def _get_text_embedding(self, text: str) -> Embedding:
        vector: Embedding = self.encoder.encode([text])[0].tolist()
        return vector

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        vectors: list[Embedding] = self.encoder.encode(texts).tolist()
        return vectors

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
