"""LlamaIndex retriever over an lmk-rag multi-vector index: matched passages as nodes."""

from llama_index.retrievers.lmk.base import LMKRetriever, ingest_documents, passage_to_node

__all__ = ["LMKRetriever", "ingest_documents", "passage_to_node"]
