"""The landmark index's HNSW beam (ef) on the 1M-document index of ``benchmarks/bench_million.py``
(issue #49 item 5): recall@10 (strict and counting near-ties) and p50/p95 per ef, the first 100
queries choosing (dev) and the last 100 reporting (test), as ``candidate_budget.py`` did at 100k.

    python research/scripts/million_beam.py /tmp/real.npz /data/m1 256,1000,3000   # from the repository root
"""

from __future__ import annotations

import sys
import time

sys.path.insert(0, "benchmarks")

import numpy as np
from _real_vectors import load
from bench_index import K, search_fn
from bench_million import near_tie_share

import lmk_rag.index.qdrant.edge_store as edge_store
from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex
from lmk_rag.index.qdrant.layout import landmark_search

real = load(sys.argv[1])
path, efs = sys.argv[2], [int(x) for x in sys.argv[3].split(",")]
truth = np.load(f"{path}.exact.npz")
exact, tenth = truth["ids"].tolist(), truth["scores"][:, K - 1]
queries, texts = real.queries[: len(exact)], real.query_texts[: len(exact)]
idx = QdrantIndex(path, encoder=LMKEncoder(device="cpu"))
search = search_fn(idx, "prefetch")
n = len(idx)
print(f"{n} documents; the library's default (fetched, ef) = {landmark_search(20, n)}")
for q, t in zip(queries, texts):  # warm: fault in the graph and vectors the queries reach
    search(q, t)
for ef in efs:
    edge_store.landmark_search = lambda limit, corpus_size, e=ef: (max(64, 3 * limit), e)  # type: ignore
    times, strict, ties = [], [], []
    for i, (q, t) in enumerate(zip(queries, texts)):
        t0 = time.perf_counter()
        hits = search(q, t)
        times.append((time.perf_counter() - t0) * 1000)
        found = [int(h.id[1:]) for h in hits[:K]]
        strict.append(len(set(found) & set(exact[i])) / K)
        ties.append(near_tie_share(hits, tenth[i]))
    half = len(queries) // 2
    print(
        f"ef {ef:5d}: recall@10 dev {np.mean(strict[:half]):.3f} test {np.mean(strict[half:]):.3f}; "
        f"near-ties dev {np.mean(ties[:half]):.3f} test {np.mean(ties[half:]):.3f}; "
        f"p50 {np.percentile(times, 50):6.2f} ms p95 {np.percentile(times, 95):6.2f} ms",
        flush=True,
    )
idx.close()
