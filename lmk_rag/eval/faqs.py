"""The question-style task: FAQ questions as queries over their pages (:mod:`lmk_rag.corpora.faqs`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..corpora.faqs import FaqSource, read_faq
from ..errors import InvalidInputError
from .tasks import RetrievalTask


def faq_task(sources: Sequence[FaqSource], *, root: str | Path | None = None, name: str = "faq") -> RetrievalTask:
    """One task over the sources' pages pooled: each question a query whose relevant document is
    its page and whose answer span is its answer (so context metrics and passage hit@1 apply)."""
    doc_ids: list[str] = []
    doc_texts: list[str] = []
    query_ids: list[str] = []
    queries: list[str] = []
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, tuple[str, int, int]] = {}
    for source in sources:
        for page, questions in read_faq(source, root):
            doc_ids.append(page.name)
            doc_texts.append(page.text)
            for q in questions:
                qid = f"{page.name}#q{len(query_ids)}"
                query_ids.append(qid)
                queries.append(q.question)
                qrels[qid] = {page.name: 1}
                answers[qid] = (page.name, q.start, q.end)
    if not query_ids:
        raise InvalidInputError(f"the FAQ sources {[s.name for s in sources]} hold no questions")
    return RetrievalTask(name, doc_ids, doc_texts, query_ids, queries, qrels, answers)
