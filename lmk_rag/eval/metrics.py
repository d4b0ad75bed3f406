"""IR metrics through ir-measures (pytrec_eval underneath), plus passage hit@1."""

from __future__ import annotations

import numpy as np

from ..passages import span_covers

MEASURES = {"nDCG@10": "nDCG@10", "R@10": "R@10", "MRR": "RR", "top1": "Success@1"}


def score_run(
    scores: np.ndarray, query_ids: list[str], doc_ids: list[str], depth: int = 100
) -> dict[str, dict[str, float]]:
    """Score matrix -> TREC-style run ``{qid: {doc_id: score}}`` of the top ``depth`` docs."""
    run = {}
    depth = min(depth, scores.shape[1])
    for qi, qid in enumerate(query_ids):
        top = np.argpartition(-scores[qi], depth - 1)[:depth]
        run[qid] = {doc_ids[d]: float(scores[qi, d]) for d in top}
    return run


def retrieval_metrics(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(aggregate, per-query) values of nDCG@10, R@10, MRR and top-1 accuracy."""
    import ir_measures

    parsed = {name: ir_measures.parse_measure(m) for name, m in MEASURES.items()}
    by_measure = {m: name for name, m in parsed.items()}
    per_query: dict[str, dict[str, float]] = {qid: {} for qid in qrels}
    for row in ir_measures.iter_calc(list(parsed.values()), qrels, run):
        per_query.setdefault(row.query_id, {})[by_measure[row.measure]] = float(row.value)
    # Queries the run misses entirely score 0 (ir-measures skips them).
    for values in per_query.values():
        for name in MEASURES:
            values.setdefault(name, 0.0)
    aggregate = {name: float(np.mean([v[name] for v in per_query.values()])) if per_query else 0.0 for name in MEASURES}
    return aggregate, per_query


def passage_hits(
    scores: np.ndarray,
    query_ids: list[str],
    doc_ids: list[str],
    answers: dict[str, tuple[str, int, int]],
    passage_spans: dict[tuple[int, int], tuple[int, int]],
) -> dict[str, float]:
    """Per query: 1 when the top document is the answer's and its best passage covers the answer.

    Covers = the passage and the answer span overlap by at least half of the shorter of the two:
    a short answer (a passkey) must lie (mostly) inside the passage; a long one (a section body)
    must hold (most of) the passage.
    """
    hits = {}
    for qi, qid in enumerate(query_ids):
        if qid not in answers:
            continue
        doc, start, end = answers[qid]
        top = int(np.argmax(scores[qi]))
        span = passage_spans.get((qi, top))
        hits[qid] = float(doc_ids[top] == doc and span is not None and span_covers(span, (start, end)))
    return hits
