"""Passage hit@1 of passage rules from one encoding, on the dev domains (how the ``region`` rule
of :mod:`lmk_rag.passages` was chosen). Documents are ranked by MaxSim either way; only the
landmark that names the passage changes. The test domains are refused: they are reported once,
through ``lmk-rag eval``, never tuned on.

    LMK_DOCS_ROOT=... python research/scripts/passage_localisation.py --task sections  # headings, sections
    LMK_DOCS_ROOT=... python research/scripts/passage_localisation.py --task needles    # a fact inserted in those pages
    LMK_PYTHON_DOCS=... python research/scripts/passage_localisation.py --task in-domain  # Python docs sections

``in-domain`` is ``lmk-rag eval --task sections`` (the Python docs' eval half, FAQ left out): the
task on which the issue's in-domain constraint is stated, so a rule must hold there too.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the table printer
from _tables import print_task_table

from lmk_rag import LMKEncoder
from lmk_rag.corpora.domains import domains_of, read_domain_pages
from lmk_rag.corpora.rst import read_rst_pages
from lmk_rag.corpora.texts import SourceText
from lmk_rag.eval.domains import domain_tasks
from lmk_rag.eval.metrics import passage_hits
from lmk_rag.eval.sections import section_task
from lmk_rag.eval.tasks import needle_tasks
from lmk_rag.passages import passage_scores

#: name -> (radius, peak weight, where the neighbourhood stops); radius 0 is the single best
#: landmark (``peak``). Stops: ``None`` (only the document's ends), ``paragraph`` (a blank line
#: between two landmarks' centres), ``dip`` (two neighbouring landmark vectors less alike than
#: the document's mean neighbour similarity minus one standard deviation: a topic shift).
RULES: dict[str, tuple[int, float, str | None]] = {
    "peak": (0, 1.0, None),
    "mean r=1": (1, 0.0, None),
    "half r=1": (1, 0.5, None),
    "half r=2 (region)": (2, 0.5, None),
    "half r=2, stops at paragraphs": (2, 0.5, "paragraph"),
    "half r=2, stops at dips": (2, 0.5, "dip"),
    "half r=3, stops at dips": (3, 0.5, "dip"),
    "0.75 r=2": (2, 0.75, None),
    "half r=3": (3, 0.5, None),
}

#: name -> (radius, peak weight, delta): ``region``'s score, but only landmarks whose own
#: similarity is within ``delta`` of the document's best may win, so the neighbourhood breaks
#: ties among near-peak landmarks and cannot carry a weak landmark past a clear peak (a short
#: section's one strong landmark between weak neighbours).
NEAR_PEAK: dict[str, tuple[int, float, float]] = {
    "region within 0.02 of peak": (2, 0.5, 0.02),
    "region within 0.05 of peak": (2, 0.5, 0.05),
    "region within 0.10 of peak": (2, 0.5, 0.10),
}


def paragraph_breaks(text: str, spans: np.ndarray) -> np.ndarray:
    """``breaks[j]``: a blank line lies between the centres of landmarks j and j+1."""
    centres = (spans[:, 0] + spans[:, 1]) // 2
    return np.array([bool(re.search(r"\n\s*\n", text[a:b])) for a, b in zip(centres[:-1], centres[1:])], dtype=bool)


def similarity_dips(vectors: np.ndarray) -> np.ndarray:
    """``breaks[j]``: landmarks j and j+1 are less alike than the document's neighbours usually are."""
    if len(vectors) < 3:
        return np.zeros(max(len(vectors) - 1, 0), dtype=bool)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    adjacent = np.einsum("ij,ij->i", unit[:-1], unit[1:])
    return adjacent < adjacent.mean() - adjacent.std()


#: name -> (radius, peak weight, BM25 weight, BM25 context): the dense rule's per-landmark scores
#: and BM25 scores of the query against each landmark's text (its chunk, or the chunk with
#: ``context`` neighbours each side), each min-max scaled within the document, mixed
#: ``(1 - w) * dense + w * bm25``. Exploratory: can the query's words find the passage in a
#: document the dense scores already chose?
LEXICAL: dict[str, tuple[int, float, float, int]] = {
    "peak + BM25 0.3": (0, 1.0, 0.3, 0),
    "peak + BM25 0.5": (0, 1.0, 0.5, 0),
    "peak + BM25(+-1) 0.3": (0, 1.0, 0.3, 1),
    "region + BM25 0.3": (2, 0.5, 0.3, 0),
}


def minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.zeros_like(values, dtype=np.float64)


def chunk_bm25(query: str, text: str, spans: np.ndarray, context: int) -> np.ndarray:
    """BM25 score of ``query`` against each landmark's text (with ``context`` neighbours each side),
    the document's landmarks being the collection (bm25s, English stopwords)."""
    import bm25s

    n = len(spans)
    pieces = [text[spans[max(0, j - context), 0] : spans[min(n - 1, j + context), 1]] for j in range(n)]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(pieces, stopwords="en", show_progress=False), show_progress=False)
    words = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
    return np.asarray(retriever.get_scores(words), dtype=np.float64) if words else np.zeros(n)


def hit_rate(scores: np.ndarray, task: Any, spans: dict[tuple[int, int], tuple[int, int]]) -> float:
    """Passage hit@1 of ``task`` when MaxSim ranks by ``scores`` and ``spans`` name the passages."""
    hits = passage_hits(scores, task.query_ids, task.doc_ids, task.answers, spans)
    return float(np.mean(list(hits.values())))


def record(results: dict[str, list[float]], name: str, value: float) -> None:
    results[name].append(value)
    print(f"  {name}: passage hit@1 {value:.3f}")


def segmented_scores(sims: np.ndarray, radius: int, weight: float, breaks: np.ndarray | None) -> np.ndarray:
    """passage_scores with each neighbourhood also clipped at the segment boundaries ``breaks``
    (each segment scored on its own, so its ends clip the neighbourhood as a document's do)."""
    if breaks is None:
        return passage_scores(sims, radius=radius, peak_weight=weight)
    segments = np.split(np.asarray(sims, dtype=np.float64), np.flatnonzero(breaks) + 1)
    return np.concatenate([passage_scores(part, radius=radius, peak_weight=weight) for part in segments])


def near_peak_choice(sims: np.ndarray, radius: int, weight: float, delta: float) -> int:
    """The best ``region`` score among landmarks within ``delta`` of the best similarity."""
    sims = np.asarray(sims, dtype=np.float64)
    scores = passage_scores(sims, radius=radius, peak_weight=weight)
    return int(np.argmax(np.where(sims >= sims.max() - delta, scores, -np.inf)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=("sections", "needles", "in-domain"), default="sections")
    ap.add_argument("--lexical", action="store_true", help="also the LEXICAL rules (BM25 within the document)")
    ap.add_argument("--model", default=None, help="model folder or name (default: the packaged one)")
    ap.add_argument("--k", type=int, default=32)
    args = ap.parse_args()
    encoder = LMKEncoder(model=args.model, granularity=args.k, device="cpu")
    count = lambda texts: encoder.tokenize(texts).n_tokens
    dev = domains_of("dev")
    if args.task == "sections":
        tasks = domain_tasks(dev, count)
    elif args.task == "in-domain":
        tasks = [section_task(read_rst_pages(None, split="eval"), count, seed=0)]
    else:
        haystack = [SourceText(page.name, page.text) for d in dev for page in read_domain_pages(d)]
        tasks = needle_tasks(haystack, count, lengths=(1024, 4096), docs_per_length=40, kind="needle")
    lexical = LEXICAL if args.lexical else {}
    results: dict[str, list[float]] = {name: [] for name in [*RULES, *NEAR_PEAK, *lexical]}
    for task in tasks:
        multi = encoder.encode_multi(task.doc_texts)
        q = encoder.encode_query(task.query_texts)
        sims = [m.vectors @ q.T for m in multi]  # per document: (landmarks, queries)
        scores = np.stack([s.max(axis=0) for s in sims], axis=1)  # (queries, documents): MaxSim
        print(f"{task.name}: {len(task.doc_texts)} documents, {len(task.query_texts)} queries")
        cuts = {
            "paragraph": [paragraph_breaks(text, np.asarray(m.spans)) for text, m in zip(task.doc_texts, multi)],
            "dip": [similarity_dips(m.vectors) for m in multi],
        }

        for name, (radius, weight, stop) in RULES.items():
            spans: dict[tuple[int, int], tuple[int, int]] = {}
            for qi in range(len(task.query_ids)):
                top = int(np.argmax(scores[qi]))
                breaks = None if stop is None else cuts[stop][top]
                best = int(np.argmax(segmented_scores(sims[top][:, qi], radius, weight, breaks)))
                a, b = multi[top].spans[best]
                spans[(qi, top)] = (int(a), int(b))
            record(results, name, hit_rate(scores, task, spans))
        for name, (radius, weight, delta) in NEAR_PEAK.items():
            spans = {}
            for qi in range(len(task.query_ids)):
                top = int(np.argmax(scores[qi]))
                a, b = multi[top].spans[near_peak_choice(sims[top][:, qi], radius, weight, delta)]
                spans[(qi, top)] = (int(a), int(b))
            record(results, name, hit_rate(scores, task, spans))
        for name, (radius, weight, mix, context) in lexical.items():
            spans = {}
            for qi in range(len(task.query_ids)):
                top = int(np.argmax(scores[qi]))
                doc_spans = np.asarray(multi[top].spans)
                dense = minmax(passage_scores(sims[top][:, qi], radius=radius, peak_weight=weight))
                words = minmax(chunk_bm25(task.query_texts[qi], task.doc_texts[top], doc_spans, context))
                best = int(np.argmax((1 - mix) * dense + mix * words))
                spans[(qi, top)] = (int(doc_spans[best, 0]), int(doc_spans[best, 1]))
            record(results, name, hit_rate(scores, task, spans))
    print_task_table("rule", [t.name for t in tasks], results, digits=3)


if __name__ == "__main__":
    main()
