"""What the context builder adds to a search: ``index.context(query, 512)`` against
``index.search(query, k=10)`` (the search it starts from) on an embedded Qdrant index of N
documents, same queries, same process, median of R runs each, interleaved.

Documents: the sample corpus encoded once by the packaged model, then seeded jittered copies
(noise 0.02 per landmark) up to N, each with its original text, so every search returns real
text and real landmark spans for the builder to work on.

    python benchmarks/bench_context.py --docs 10000 --runs 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np

from lmk_rag import LMKEncoder, MultiVector
from lmk_rag.context import CONTEXT_DOCUMENTS
from lmk_rag.index import QdrantIndex

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"
QUESTIONS = [
    "How often should I check my tyre pressure?",
    "Why are there two high tides a day?",
    "What does grey liquid on a sourdough starter mean?",
    "How many copies of the Gutenberg Bible were printed?",
    "How long do solar inverters last?",
]


def jittered(base: list[MultiVector], texts: list[str], n: int, seed: int = 0) -> tuple[list[MultiVector], list[str]]:
    rng = np.random.default_rng(seed)
    multis, out_texts = [], []
    for i in range(n):
        m = base[i % len(base)]
        v = m.vectors + rng.normal(0, 0.02, m.vectors.shape).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        p = v.mean(0)
        multis.append(MultiVector(p / np.linalg.norm(p), v, m.spans, m.n_tokens))
        out_texts.append(texts[i % len(texts)])
    return multis, out_texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000, help="documents in the index (default 10000)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs of each call per query (default 20)")
    ap.add_argument("--max-tokens", type=int, default=512, help="the context's budget (default 512)")
    args = ap.parse_args()
    encoder = LMKEncoder(device="cpu")
    texts = [p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.md"))]
    multis, doc_texts = jittered(encoder.encode_multi(texts), texts, args.docs)
    with tempfile.TemporaryDirectory() as folder:
        index = QdrantIndex(Path(folder) / "idx", encoder=encoder)
        t0 = time.perf_counter()
        index.add_encoded(multis, doc_texts, ids=[f"d{i}" for i in range(args.docs)])
        index.optimize()
        print(f"{args.docs} documents indexed in {time.perf_counter() - t0:.0f} s")
        for q in QUESTIONS:  # warm-up: model, caches, HNSW pages
            index.search(q, k=CONTEXT_DOCUMENTS)
            index.context(q, args.max_tokens)
        search, context = [], []
        for _ in range(args.runs):
            for q in QUESTIONS:
                t = time.perf_counter()
                index.search(q, k=CONTEXT_DOCUMENTS)
                search.append(time.perf_counter() - t)
                t = time.perf_counter()
                index.context(q, args.max_tokens)
                context.append(time.perf_counter() - t)
        index.close()
    s, c = statistics.median(search) * 1000, statistics.median(context) * 1000
    print(f"search(k={CONTEXT_DOCUMENTS}), query encoding included: median {s:.1f} ms")
    print(f"context(max_tokens={args.max_tokens}) (the same search, then the builder): median {c:.1f} ms")
    print(f"the builder adds {c - s:.1f} ms (target <= 10 ms); ratio to the search alone {c / s:.2f}x")


if __name__ == "__main__":
    main()
