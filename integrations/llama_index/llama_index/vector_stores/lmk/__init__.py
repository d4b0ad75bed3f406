"""LlamaIndex vector store over an lmk-rag multi-vector index: whole documents in, passages out."""

from llama_index.retrievers.lmk.filters import to_lmk_filter
from llama_index.vector_stores.lmk.base import LMKVectorStore, StoreEncodesEmbedding

__all__ = ["LMKVectorStore", "StoreEncodesEmbedding", "to_lmk_filter"]
