"""Real questions over long documents: documentation pages and the headings of their sections.

A section heading is a short statement of an information need written by the documentation's
authors ("Using logging in multiple modules", "How to adapt custom Python types to SQLite
values"). Removing every heading from a page leaves a long plain document; each heading then
becomes a query whose relevant document is its page and whose answer span is its section's
body, so both document retrieval and passage hit@1 are measured on real text.

Pages come from reStructuredText sources (a CPython ``Doc/`` tree, or the ``_sources`` folder of
built Sphinx HTML such as Debian's ``python3.11-doc``). FAQ pages are dropped, and pages split
into disjoint train/eval halves by :func:`~lmk_rag.corpora.texts.split_of` of their name.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..corpora.rst import Page, Section, query_sections
from ..errors import InvalidInputError
from .tasks import RetrievalTask, TokenCounter


def _length_bucket(tokens: int) -> float:
    """The power of two at or below ``tokens``, so reports group documents by length band."""
    return float(2 ** int(np.log2(max(int(tokens), 1))))


def section_task(
    pages: Sequence[Page],
    count_tokens: TokenCounter,
    *,
    min_doc_tokens: int = 2048,
    max_doc_tokens: int = 8192,
    max_queries_per_doc: int = 8,
    seed: int = 0,
    name: str = "docs-sections",
) -> RetrievalTask:
    """Long pages (``min_doc_tokens``..``max_doc_tokens``) as documents, section headings as queries."""
    tokens = count_tokens([p.text for p in pages])
    long_pages = [p for p, n in zip(pages, tokens) if min_doc_tokens <= n <= max_doc_tokens]
    if not long_pages:
        raise InvalidInputError(f"no page has {min_doc_tokens}..{max_doc_tokens} tokens; give a larger docs folder")
    page_tokens = dict(zip([p.name for p in pages], tokens.tolist()))
    rng = random.Random(seed)
    by_page: dict[str, list[Section]] = {}
    for page, section in query_sections(long_pages):
        by_page.setdefault(page.name, []).append(section)
    qids: list[str] = []
    queries: list[str] = []
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    for page in long_pages:
        picked = by_page.get(page.name, [])
        if len(picked) > max_queries_per_doc:
            picked = sorted(rng.sample(picked, max_queries_per_doc), key=lambda s: s.start)
        for section in picked:
            qid = f"q{len(qids)}"
            qids.append(qid)
            queries.append(section.title)
            qrels[qid] = {page.name: 1}
            answers[qid] = (page.name, section.start, section.end)
            meta[qid] = {
                "position": round(4 * section.start / max(len(page.text), 1)) / 4,
                "length": _length_bucket(page_tokens[page.name]),
            }
    if not qids:
        raise InvalidInputError("no section heading qualifies as a query; give a larger docs folder")
    return RetrievalTask(
        name, [p.name for p in long_pages], [p.text for p in long_pages], qids, queries, qrels, answers, meta
    )


def short_section_task(
    pages: Sequence[Page],
    count_tokens: TokenCounter,
    *,
    min_tokens: int = 32,
    max_tokens: int = 256,
    name: str = "docs-sections-short",
) -> RetrievalTask:
    """Short-text retrieval: each section body of 32..256 tokens is a document, its heading the query."""
    sections = query_sections(pages)
    bodies = [page.text[s.start : s.end].strip() for page, s in sections]
    tokens = count_tokens(bodies) if bodies else np.zeros(0, dtype=int)
    keep = [i for i, n in enumerate(tokens) if min_tokens <= n <= max_tokens]
    if not keep:
        raise InvalidInputError(f"no section body has {min_tokens}..{max_tokens} tokens; give a larger docs folder")
    doc_ids = [f"{sections[i][0].name}#{j}" for j, i in enumerate(keep)]
    qids = [f"q{j}" for j in range(len(keep))]
    return RetrievalTask(
        name,
        doc_ids,
        [bodies[i] for i in keep],
        qids,
        [sections[i][1].title for i in keep],
        {q: {d: 1} for q, d in zip(qids, doc_ids)},
        query_meta={q: {"length": _length_bucket(tokens[i])} for q, i in zip(qids, keep)},
    )
