"""LangChain integration of lmk-rag: landmark-pooled embeddings (``LMKEmbeddings``)."""

from .embeddings import LMKEmbeddings

__all__ = ["LMKEmbeddings"]
