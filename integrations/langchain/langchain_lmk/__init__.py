"""LangChain integration of lmk-rag: embeddings, a multi-vector VectorStore and a retriever."""

from .embeddings import LMKEmbeddings
from .retrievers import LMKRetriever
from .vectorstores import LMKVectorStore

__all__ = ["LMKEmbeddings", "LMKRetriever", "LMKVectorStore"]
