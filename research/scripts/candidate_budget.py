"""Recall@10 and p50 of the default search for a grid of candidate budgets (issue #49 item 3):
landmarks fetched from the landmark index, its HNSW ef, and documents rescored by exact MaxSim.

Chooses on the first 100 queries of each vector set (dev) and reports the other 100 (test), so a
budget is not fitted to the queries it is reported on. Builds each index once at PATH and keeps it.

    python research/scripts/candidate_budget.py VECTORS.npz PATH N ["FETCHED;EF;RESCORED"]   # from the repository root
"""

import itertools
import sys

import numpy as np

sys.path.insert(0, "benchmarks")
from _real_vectors import load
from bench_index import build_once, corpus_of, exact_top, recall, search_fn, timed

import lmk_rag.index.qdrant.edge_store as edge_store
from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex
from lmk_rag.index.qdrant.layout import landmark_search

vectors, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# Optional grids "FETCHED;EF;RESCORED", each a comma-separated list; "default" first: the library's
# own budget, then the grids ("default" alone: only it).
spec = sys.argv[4].split(";") if len(sys.argv) > 4 else ["64,128,256,512", "256,512,1024", "20,40,80"]
with_default = spec[0] == "default"
grids = spec[1:] if with_default else spec
grid_fetched, grid_ef, grid_rescored = ([int(x) for x in g.split(",")] for g in grids) if grids else ([], [], [])
real = load(vectors)
enc = LMKEncoder(device="cpu")
multis, texts = corpus_of(real, n)
seconds = build_once(path, real, n, enc)
if seconds is not None:
    print(f"built in {seconds:.0f} s", flush=True)
exact, numpy_p50 = exact_top(multis, real.queries[:200])
# Each document's exact MaxSim per query, for recall that counts a near-tie (within TIE of the exact
# 10th score) as found: near-copies crowd the top 10 of a corpus of jittered copies.
TIE = 0.01
matrix = np.concatenate([m.vectors for m in multis])
starts = np.concatenate([[0], np.cumsum([len(m.vectors) for m in multis])[:-1]])
maxsim = np.stack([np.maximum.reduceat(matrix @ q, starts) for q in real.queries[:200]])
del matrix
tenth = np.array([maxsim[i, e[-1]] for i, e in enumerate(exact)])


def tie_recall(found: list[list[int]], rows: range) -> float:
    return float(np.mean([np.mean([maxsim[i, d] >= tenth[i] - TIE for d in found[i][:10]]) for i in rows]))


print(f"{n} documents, {sum(len(m.vectors) for m in multis)} landmarks; numpy exact p50 {numpy_p50:.1f} ms")
idx = QdrantIndex(path, encoder=enc)
original = idx.store.landmark_candidates
search = search_fn(idx, "prefetch")
timed(search, real.queries[:200], real.query_texts[:200])  # warm: a first pass faults pages in


def report(label: str) -> None:
    p50, _, found = timed(search, real.queries[:200], real.query_texts[:200])
    dev, test = recall(found[:100], exact[:100]), recall(found[100:], exact[100:])
    ties = tie_recall(found, range(100)), tie_recall(found, range(100, 200))
    print(
        f"{label}: recall@10 dev {dev:.3f} test {test:.3f}  "
        f"with near-ties dev {ties[0]:.3f} test {ties[1]:.3f}  p50 {p50:6.2f} ms (numpy/{numpy_p50 / p50:.1f})",
        flush=True,
    )


if with_default:
    fetched, ef = landmark_search(20, n)
    report(f"default (fetched {fetched}, ef {ef}, rescored 20)")
for fetched, ef, rescored in itertools.product(grid_fetched, grid_ef, grid_rescored):
    if ef < fetched or rescored * 3 > fetched * 2:
        continue
    edge_store.landmark_search = lambda limit, corpus_size, f=fetched, e=ef: (f, e)  # type: ignore[assignment]
    idx.store.landmark_candidates = lambda v, limit, corpus_size, r=rescored: original(v, r, corpus_size)  # type: ignore[method-assign]
    report(f"fetched {fetched:4d} ef {ef:5d} rescored {rescored:3d}")
idx.close()
