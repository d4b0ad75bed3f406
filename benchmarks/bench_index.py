"""Index benchmark: ingest time, query latency (p50/p95) per backend and search mode, recall@10 of
approximate modes against exact MaxSim, and split-then-embed into the same store, as ratios.

The corpus is encoded once (the encoder's time is printed separately); stores then receive the
same vectors. For the larger size, documents are the base set's multi-vectors with small
seeded noise, so the store works on realistic shapes without hours of CPU encoding.

    python benchmarks/bench_index.py [--docs 1000 10000] [--queries 50]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
from _texts import varied_texts

from lmk_rag import LMKEncoder, MultiVector
from lmk_rag.index import ChromaIndex, QdrantIndex


def jitter(mvs: list[MultiVector], n: int, seed: int = 0) -> list[MultiVector]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        m = mvs[i % len(mvs)]
        v = m.vectors + rng.normal(0, 0.02, m.vectors.shape).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        p = v.mean(0)
        out.append(MultiVector(p / np.linalg.norm(p), v, m.spans, m.n_tokens))
    return out


def latency(fn, queries) -> tuple[float, float, list]:
    times, results = [], []
    for q in queries:
        t0 = time.perf_counter()
        results.append(fn(q))
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95)), results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--base-docs", type=int, default=300)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--backends", nargs="+", default=["qdrant", "chroma"], choices=["qdrant", "chroma"])
    args = ap.parse_args()

    enc = LMKEncoder(device="cpu")
    texts = varied_texts(args.base_docs, max_words=350, seed=1)
    t0 = time.perf_counter()
    base = enc.encode_multi(texts)
    t_enc = time.perf_counter() - t0
    chunk_texts = [t[a:b] for t, m in zip(texts, base) for a, b in m.spans]
    t0 = time.perf_counter()
    enc.encode(chunk_texts)
    t_split = time.perf_counter() - t0
    print(
        f"encode {len(texts)} docs whole (LMK multi): {t_enc:.1f} s; split-then-embed the same landmarks' "
        f"passages: {t_split:.1f} s  (split/LMK x{t_split / t_enc:.2f})"
    )
    queries = enc.encode_query(varied_texts(args.queries, max_words=12, seed=7))

    for n in args.docs:
        mvs = jitter(base, n)
        doc_texts = [texts[i % len(texts)] for i in range(n)]
        ids = [f"d{i}" for i in range(n)]
        for name, make in (
            ("qdrant", lambda d: QdrantIndex(d, encoder=enc)),
            ("chroma", lambda d: ChromaIndex(d, encoder=enc)),
        ):
            if name not in args.backends:
                continue
            with tempfile.TemporaryDirectory() as folder:
                idx = make(os.path.join(folder, "lmk"))
                t0 = time.perf_counter()
                for s in range(0, n, 500):
                    idx.add_encoded(mvs[s : s + 500], doc_texts[s : s + 500], ids[s : s + 500])
                t_ingest = time.perf_counter() - t0
                exact: list[list[str]] = []
                for mode in idx.modes:  # maxsim first: the exact ranking the others are compared with
                    p50, p95, res = latency(lambda q, index=idx, m=mode: index.search_by_vector(q, 10, mode=m), queries)
                    ids_found = [[h.id for h in r] for r in res]
                    if mode == "maxsim":
                        exact = ids_found
                    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids_found, exact)])
                    print(
                        f"{name:6s} {n:6d} docs  ingest {t_ingest:6.1f} s ({n / t_ingest:6.0f} docs/s)  "
                        f"{mode:8s} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  recall@10 vs exact {recall:.2f}"
                    )
                # split-then-embed: every passage its own single-vector document in the same store
                pieces = [MultiVector(v, v[None], [sp], 0) for m in mvs for v, sp in zip(m.vectors, m.spans)]
                piece_texts = [doc_texts[i][a:b] for i, m in enumerate(mvs) for a, b in m.spans]
                split_idx = make(os.path.join(folder, "split"))  # inside the temporary folder: removed with it
                t0 = time.perf_counter()
                for s in range(0, len(pieces), 500):
                    split_idx.add_encoded(pieces[s : s + 500], piece_texts[s : s + 500])
                t_split_ingest = time.perf_counter() - t0
                p50s, _, _ = latency(lambda q, split=split_idx: split.search_by_vector(q, 10, mode="pooled"), queries)
                print(
                    f"{name:6s} {n:6d} docs  split-then-embed: {len(pieces)} points, ingest {t_split_ingest:6.1f} s "
                    f"(x{t_split_ingest / t_ingest:.2f} of LMK), p50 {p50s:.1f} ms"
                )
                if hasattr(split_idx, "close"):
                    split_idx.close()
                idx.close()


if __name__ == "__main__":
    main()
