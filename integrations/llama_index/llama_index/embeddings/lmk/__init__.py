"""LlamaIndex integration of lmk-rag: landmark-pooled embeddings (``LMKEmbedding``)."""

from llama_index.embeddings.lmk.base import LMKEmbedding

__all__ = ["LMKEmbedding"]
