"""Probe: candidates for the default search from the landmark vectors themselves.

Today's default (``prefetch``): the best documents by the pooled vector (HNSW), then exact MaxSim
over their landmarks. With a one-vector query, a document's MaxSim is its best landmark's score,
so an HNSW graph over the landmark multivector (Qdrant's MAX_SIM comparator, ``m > 0``) searches
the quantity that ranks directly. This compares, on the benchmark's vectors (real documents, and
jittered copies above the real count), in one Qdrant Edge process each:

- A: the shipped layout (landmarks ``m=0``), ``prefetch`` at several limits;
- B: landmarks with an HNSW graph (``m``, ``ef_construct``), MaxSim through the graph at several ``ef``;
- C: one point per landmark (a plain vector with HNSW, the document's number as payload): the best
  landmarks, grouped by document (a document scores its best landmark: exactly its MaxSim).

    python research/scripts/landmark_hnsw_probe.py --real /work/evals/real.npz --docs 10000 100000
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import qdrant_edge as e
from _real_vectors import load
from bench_index import K, corpus_of, exact_top, recall


def shard(folder: str, dim: int, m: int, ef_construct: int) -> e.EdgeShard:
    config = e.EdgeConfig(
        vectors={
            "pooled": e.EdgeVectorParams(size=dim, distance=e.Distance.Cosine),
            "landmarks": e.EdgeVectorParams(
                size=dim,
                distance=e.Distance.Cosine,
                multivector_config=e.MultiVectorConfig(e.MultiVectorComparator.MaxSim),
                hnsw_config=e.HnswIndexConfig(m=m, ef_construct=ef_construct, full_scan_threshold=10000),
            ),
        },
    )
    return e.EdgeShard.create(folder, config)


def fill(s: e.EdgeShard, multis: list) -> float:
    t0 = time.perf_counter()
    for start in range(0, len(multis), 512):
        batch = [
            e.Point(i, {"pooled": m.pooled.tolist(), "landmarks": m.vectors.tolist()}, {})
            for i, m in enumerate(multis[start : start + 512], start)
        ]
        s.update(e.UpdateOperation.upsert_points(batch))
    s.optimize()
    return time.perf_counter() - t0


def landmark_shard(folder: str, dim: int, m: int, ef_construct: int) -> e.EdgeShard:
    config = e.EdgeConfig(
        vectors={
            "lm": e.EdgeVectorParams(
                size=dim,
                distance=e.Distance.Cosine,
                hnsw_config=e.HnswIndexConfig(m=m, ef_construct=ef_construct, full_scan_threshold=10000),
            )
        },
    )
    return e.EdgeShard.create(folder, config)


def fill_landmarks(s: e.EdgeShard, multis: list) -> float:
    t0 = time.perf_counter()
    rows = [(d, v) for d, mv in enumerate(multis) for v in mv.vectors]
    for start in range(0, len(rows), 4096):
        batch = [e.Point(i, {"lm": v.tolist()}, {"d": d}) for i, (d, v) in enumerate(rows[start : start + 4096], start)]
        s.update(e.UpdateOperation.upsert_points(batch))
    s.optimize()
    return time.perf_counter() - t0


def run_grouped(s: e.EdgeShard, queries: np.ndarray, limit: int, ef: int) -> tuple[float, list[list[int]]]:
    times, found = [], []
    for q in queries:
        t0 = time.perf_counter()
        points = s.query(
            e.QueryRequest(
                limit=limit,
                query=e.Query.Nearest(q.tolist(), using="lm"),
                params=e.SearchParams(hnsw_ef=ef),
                with_payload=True,
            )
        )
        docs: list[int] = []
        for p in points:  # best first: a document's first landmark is its best
            d = int(p.payload["d"])
            if d not in docs:
                docs.append(d)
                if len(docs) == K:
                    break
        times.append(time.perf_counter() - t0)
        found.append(docs)
    return float(np.percentile(np.array(times) * 1000, 50)), found


def run(s: e.EdgeShard, queries: np.ndarray, request) -> tuple[float, list[list[int]]]:
    times, found = [], []
    for q in queries:
        t0 = time.perf_counter()
        points = s.query(request(q.tolist()))
        times.append(time.perf_counter() - t0)
        found.append([int(p.id) for p in points])
    return float(np.percentile(np.array(times) * 1000, 50)), found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", required=True)
    ap.add_argument("--docs", type=int, nargs="+", default=[10000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construct", type=int, default=100)
    ap.add_argument("--limits", type=int, nargs="*", default=[200, 800, 1600])
    ap.add_argument("--efs", type=int, nargs="*", default=[32, 64, 128, 256])
    ap.add_argument("--group-limits", type=int, nargs="*", default=[50, 100, 200])
    ap.add_argument("--variants", default="ABC", help="which of A, B, C to run")
    args = ap.parse_args()
    real = load(args.real)
    queries = real.queries[: args.queries]
    dim = queries.shape[1]
    for n in args.docs:
        multis, _ = corpus_of(real, n)
        exact, numpy_p50 = exact_top(multis, queries)
        print(f"== {n} documents, {sum(len(m.vectors) for m in multis)} landmarks; numpy exact p50 {numpy_p50:.1f} ms")
        for name, m in (("A pooled-HNSW prefetch", 0), (f"B landmark HNSW m={args.m}", args.m)):
            if name[0] not in args.variants:
                continue
            folder = tempfile.mkdtemp()
            try:
                s = shard(folder, dim, m, args.ef_construct)
                seconds = fill(s, multis)
                print(f"{name}: ingest + optimize {seconds:.1f} s ({n / seconds:.0f} docs/s)")
                if m == 0:
                    for limit in args.limits:
                        p50, found = run(
                            s,
                            queries,
                            lambda v, limit=limit: e.QueryRequest(
                                limit=K,
                                query=e.Query.Nearest([v], using="landmarks"),
                                prefetches=[e.Prefetch(limit=limit, query=e.Query.Nearest(v, using="pooled"))],
                            ),
                        )
                        print(
                            f"  prefetch {limit:5d}: p50 {p50:6.2f} ms (1/{numpy_p50 / p50:.0f} of numpy)  "
                            f"recall@10 {recall(found, exact):.3f}"
                        )
                else:
                    for ef in args.efs:
                        p50, found = run(
                            s,
                            queries,
                            lambda v, ef=ef: e.QueryRequest(
                                limit=K,
                                query=e.Query.Nearest([v], using="landmarks"),
                                params=e.SearchParams(hnsw_ef=ef),
                            ),
                        )
                        print(
                            f"  HNSW ef {ef:4d}: p50 {p50:6.2f} ms (1/{numpy_p50 / p50:.0f} of numpy)  "
                            f"recall@10 {recall(found, exact):.3f}"
                        )
                s.close()
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        if "C" not in args.variants:
            continue
        folder = tempfile.mkdtemp()
        try:
            s = landmark_shard(folder, dim, args.m, args.ef_construct)
            seconds = fill_landmarks(s, multis)
            print(f"C landmark points m={args.m}: ingest + optimize {seconds:.1f} s ({n / seconds:.0f} docs/s)")
            for limit in args.group_limits:
                for ef in args.efs:
                    p50, found = run_grouped(s, queries, limit, max(ef, limit))
                    print(
                        f"  {limit:4d} landmarks, ef {max(ef, limit):4d}: p50 {p50:6.2f} ms "
                        f"(1/{numpy_p50 / p50:.0f} of numpy)  recall@10 {recall(found, exact):.3f}"
                    )
            s.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
