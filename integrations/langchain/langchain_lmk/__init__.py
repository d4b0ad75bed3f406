"""LangChain integration of lmk-rag: embeddings, a multi-vector VectorStore, a retriever that
hands the LLM landmark passages, and a document compressor for any other store."""

from .compressors import LMKContextCompressor
from .embeddings import LMKEmbeddings
from .retrievers import LMKRetriever
from .vectorstores import LMKVectorStore

__all__ = ["LMKContextCompressor", "LMKEmbeddings", "LMKRetriever", "LMKVectorStore"]
