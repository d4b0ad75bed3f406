"""Out-of-domain evaluation tasks: the sections task on other projects' documentation
(:mod:`lmk_rag.corpora.domains`), one task per domain, and BEIR export of any task."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..corpora.domains import Domain, read_domain_pages
from .sections import section_task, short_section_task
from .tasks import RetrievalTask, TokenCounter


def export_beir(task: RetrievalTask, folder: str | Path) -> Path:
    """Write ``task`` as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) plus
    answers.jsonl (each query's answer span: document, start, end), so anyone can rerun it."""
    out = Path(folder)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for doc_id, text in zip(task.doc_ids, task.doc_texts):
            f.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, query in zip(task.query_ids, task.query_texts):
            f.write(json.dumps({"_id": qid, "text": query}) + "\n")
    with open(out / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, rels in task.qrels.items():
            for doc_id, score in rels.items():
                f.write(f"{qid}\t{doc_id}\t{score}\n")
    with open(out / "answers.jsonl", "w", encoding="utf-8") as f:
        for qid, answer in (task.answers or {}).items():
            doc_id, start, end = answer
            f.write(json.dumps({"query-id": qid, "corpus-id": doc_id, "start": start, "end": end}) + "\n")
    return out


def domain_tasks(
    domains: Sequence[Domain],
    count_tokens: TokenCounter,
    *,
    root: str | Path | None = None,
    short: bool = False,
    min_doc_tokens: int = 1024,
    max_doc_tokens: int = 8192,
    seed: int = 0,
) -> list[RetrievalTask]:
    """One sections task per domain (``domain-NAME``): pages of ``min_doc_tokens``..``max_doc_tokens``
    with headings as queries, or with ``short`` the section bodies of 32..256 tokens."""
    tasks = []
    for domain in domains:
        pages = read_domain_pages(domain, root)
        if short:
            tasks.append(short_section_task(pages, count_tokens, name=f"domain-{domain.name}-short"))
        else:
            tasks.append(
                section_task(
                    pages,
                    count_tokens,
                    min_doc_tokens=min_doc_tokens,
                    max_doc_tokens=max_doc_tokens,
                    seed=seed,
                    name=f"domain-{domain.name}",
                )
            )
    return tasks
