"""lmk-rag results as LangChain ``Document`` objects."""

from __future__ import annotations

from langchain_core.documents import Document

from lmk_rag.context import Passage
from lmk_rag.index import Hit


def hit_to_document(hit: Hit) -> Document:
    """The whole document, its metadata unchanged."""
    return Document(id=hit.id, page_content=hit.text, metadata=dict(hit.metadata))


def hit_to_passage(hit: Hit) -> Document:
    """The matched passage as content; parent id, span, landmark and score in metadata."""
    meta = {
        **hit.metadata,
        "parent_id": hit.id,
        "span_start": hit.span[0],
        "span_end": hit.span[1],
        "landmark": hit.landmark,
        "score": hit.score,
    }
    return Document(id=f"{hit.id}#{hit.landmark}", page_content=hit.passage, metadata=meta)


def passage_to_document(passage: Passage) -> Document:
    """A context passage as content: the document's metadata plus ``parent_id``, ``span_start`` /
    ``span_end`` (characters in the parent's text), ``score`` and ``tokens``."""
    meta = {
        **passage.metadata,
        "parent_id": passage.id,
        "span_start": passage.span[0],
        "span_end": passage.span[1],
        "score": passage.score,
        "tokens": passage.tokens,
    }
    return Document(id=f"{passage.id}:{passage.span[0]}-{passage.span[1]}", page_content=passage.text, metadata=meta)
