"""LlamaIndex node postprocessor: any retriever's nodes cut down to landmark passages."""

from llama_index.postprocessor.lmk.base import LMKContextPostprocessor

__all__ = ["LMKContextPostprocessor"]
