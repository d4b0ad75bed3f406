"""Time the parts of the default (prefetch) and hybrid searches of an embedded index: the landmark
index's candidates, BM25, the exact-MaxSim rescoring query, and the whole searches (issue #49 item 3).

Builds the index once at PATH from the benchmark's real vectors (jittered copies above 9,272
documents) and keeps it, so later runs time searches only. Each part is run once unmeasured first
(cold pages of the payload storage cost several ms on a first query).

    python research/scripts/landmark_search_parts.py /tmp/idx100k 100000   # run from the repository root
"""

import sys
import time

import numpy as np

sys.path.insert(0, "benchmarks")
from _real_vectors import load
from bench_index import build_once, search_fn, timed

from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex
from lmk_rag.index.qdrant.layout import Plan, sparse_query

real = load("/tmp/bench/real.npz" if len(sys.argv) < 4 else sys.argv[3])
path, n = sys.argv[1], int(sys.argv[2])
enc = LMKEncoder(device="cpu")
seconds = build_once(path, real, n, enc)
if seconds is not None:
    print(f"built in {seconds:.0f} s")
idx = QdrantIndex(path, encoder=enc)
qs, qt = real.queries[:200], real.query_texts[:200]
store = idx.store


def p50(fn) -> float:
    fn(qs[0].tolist(), qt[0])  # warm
    times = []
    for i, q in enumerate(qs):
        t0 = time.perf_counter()
        fn(q.tolist(), qt[i])
        times.append(time.perf_counter() - t0)
    return float(np.percentile(times, 50) * 1000)


candidates = {text: store.landmark_candidates(q.tolist(), 120, n) for q, text in zip(qs, qt)}


def rescore(v, t, wanted, whole):
    ids = [d for d, _ in candidates[t]][: 30 if whole else None]
    return store.search([Plan("maxsim", wanted, None, vector=v, payload=whole, landmarks=whole, ids=ids)])


def bm25(v, t):
    return store.search([Plan("bm25", 100, None, sparse=sparse_query(t), payload=False, landmarks=False)])


print(f"landmark candidates for 120 documents: {p50(lambda v, t: store.landmark_candidates(v, 120, n)):.2f} ms")
print(f"landmark candidates for 30 documents: {p50(lambda v, t: store.landmark_candidates(v, 30, n)):.2f} ms")
print(f"BM25 query: {p50(bm25):.2f} ms")
print(f"exact MaxSim of 120 candidates, scores only: {p50(lambda v, t: rescore(v, t, 120, False)):.2f} ms")
print(f"exact MaxSim of 30 candidates, 10 whole: {p50(lambda v, t: rescore(v, t, 10, True)):.2f} ms")
for mode in ["prefetch", "hybrid", "pooled"]:
    median, _, _ = timed(search_fn(idx, mode), qs, qt)
    print(f"{mode} p50 {median:.2f} ms")
idx.close()
