"""lmk-rag results as LangChain ``Document`` objects."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from langchain_core.documents import Document

from lmk_rag.context import CONTEXT_DOCUMENTS, Passage
from lmk_rag.index import FilterArg, Hit, MultiVectorIndex, SearchMode, StoredDocument
from lmk_rag.index.remote import RemoteIndex
from lmk_rag.types import page_fields


def hit_to_document(hit: Hit | StoredDocument) -> Document:
    """The whole document (of a hit, or as stored), its metadata unchanged."""
    return Document(id=hit.id, page_content=hit.text, metadata=dict(hit.metadata))


def passage_metadata(
    metadata: Mapping[str, object], parent: str, span: tuple[int, int], **extra: object
) -> dict[str, object]:
    """A passage's metadata: its document's, plus ``parent_id``, ``span_start`` / ``span_end``
    (characters in the parent's text), for a PDF the passage's ``page`` (from 0) and ``page_label``
    as LangChain's PDF loaders name them, and ``extra`` (score, landmark, tokens)."""
    pages = page_fields(metadata, span)
    return {**metadata, "parent_id": parent, "span_start": span[0], "span_end": span[1], **pages, **extra}


def hit_to_passage(hit: Hit) -> Document:
    """The matched passage as content; parent id, span (the passage's), landmark, score (the
    search's rank score) and similarity (the best landmark's cosine, an absolute scale) in metadata."""
    meta = passage_metadata(
        hit.metadata, hit.id, hit.span, landmark=hit.landmark, score=hit.score, similarity=hit.similarity
    )
    return Document(id=f"{hit.id}#{hit.landmark}", page_content=hit.passage, metadata=meta)


def passage_to_document(passage: Passage) -> Document:
    """A context passage as content, metadata by :func:`passage_metadata` with ``score`` and ``tokens``."""
    meta = passage_metadata(passage.metadata, passage.id, passage.span, score=passage.score, tokens=passage.tokens)
    return Document(id=f"{passage.id}:{passage.span[0]}-{passage.span[1]}", page_content=passage.text, metadata=meta)


def context_documents(
    index: MultiVectorIndex | RemoteIndex,
    query: str,
    *,
    k: int,
    max_tokens: int,
    filter: FilterArg,
    mode: SearchMode | None,
    token_counter: Callable[[str], int] | str | None = None,
    min_score: float | None = None,
) -> list[Document]:
    """lmk-rag's context for ``query`` as documents: at most ``k`` passages within ``max_tokens``
    (counted by ``token_counter``, see :meth:`~lmk_rag.index.MultiVectorIndex.context`), from the
    ``max(k, CONTEXT_DOCUMENTS)`` best documents (what both LangChain retrievers return)."""
    passages = index.context(
        query,
        max_tokens,
        k=max(k, CONTEXT_DOCUMENTS),
        filter=filter,
        mode=mode,
        token_counter=token_counter,
        min_score=min_score,
    )
    return [passage_to_document(p) for p in passages[:k]]
