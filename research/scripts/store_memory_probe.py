"""Resident memory of an opened embedded index, with the collection's landmark multivector held as
the engine's default does or in another ``qdrant_edge.Memory`` placement (issue #49 item 5's RAM).

    python research/scripts/store_memory_probe.py default /tmp/c10k-default 10000   # builds it
    python research/scripts/store_memory_probe.py default /tmp/c10k-default 10000   # measures it
    python research/scripts/store_memory_probe.py Cold /tmp/c10k-Cold 10000         # (the same)

Run from the repository root with the benchmark's vectors at /tmp/bench/real.npz. RSS counts the
mapped file pages a search touched (reclaimable page cache) as well as the heap.
"""

from __future__ import annotations

import sys

sys.path.insert(0, "benchmarks")

import qdrant_edge as e
from _real_vectors import load
from bench_index import build_once, rss_mb, search_fn, timed

from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex
from lmk_rag.index.qdrant import edge_store
from lmk_rag.index.qdrant.layout import LANDMARKS

engine_default = edge_store.edge_config


def placed(variant: str):
    """The collection's configuration with its landmark multivector held as ``variant``."""

    def config(dimension, quantization):
        vectors = engine_default(dimension, quantization).vectors
        vectors[LANDMARKS] = e.EdgeVectorParams(
            size=dimension,
            distance=e.Distance.Cosine,
            multivector_config=e.MultiVectorConfig(e.MultiVectorComparator.MaxSim),
            hnsw_config=e.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10000),
            memory=getattr(e.Memory, variant),
        )
        return e.EdgeConfig(vectors=vectors, sparse_vectors=engine_default(dimension, quantization).sparse_vectors)

    return config


def main() -> None:
    variant, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if variant != "default":
        edge_store.edge_config = placed(variant)
    real = load("/tmp/bench/real.npz")
    enc = LMKEncoder(device="cpu")
    enc.encode_query(["warm"])
    seconds = build_once(path, real, n, enc)
    if seconds is not None:
        print(f"built {n} in {seconds:.1f} s")
        return
    before = rss_mb()
    idx = QdrantIndex(path, encoder=enc)
    out = [f"{variant}: open +{rss_mb() - before:.0f} MiB"]
    for mode in ["prefetch", "hybrid", "maxsim"]:
        timed(search_fn(idx, mode), real.queries[:20], real.query_texts[:20])  # warm
        p50, _, _ = timed(search_fn(idx, mode), real.queries[:200], real.query_texts[:200])
        out.append(f"{mode} {p50:.2f} ms (+{rss_mb() - before:.0f} MiB)")
    print(", ".join(out))
    idx.close()


if __name__ == "__main__":
    main()
