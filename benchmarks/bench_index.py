"""Index benchmark on real LMK vectors: ingest docs/s, p50/p95 per search mode, recall@10 against
exact MaxSim, bytes on disk, for Qdrant Edge (``qdrant:PATH``), qdrant-client local mode (the old
embedded store, as the reference) and Chroma, in one run; then quantized landmarks (memory, p50,
recall vs float32). The default mode (``prefetch``: candidates from the landmark index, exact MaxSim)
is printed with its ratio to numpy's brute force; ``research/scripts/landmark_hnsw_probe.py`` compares candidate stages.

Vectors: ``benchmarks/_real_vectors.py`` (section bodies of the train documentation domains,
their headings as queries), encoded once into a cache. Sizes above the real set are filled with
seeded jittered copies of real documents (noise 0.02 per landmark), so the larger corpora keep
real shapes. Exact MaxSim is computed with numpy over every landmark (the ground truth for recall).

    LMK_DOCS_ROOT=... python benchmarks/_real_vectors.py --docs 10000 --out /tmp/real.npz
    python benchmarks/bench_index.py --real /tmp/real.npz --docs 1000 10000 100000
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
from _real_vectors import RealCorpus, load

from lmk_rag import LMKEncoder, MultiVector
from lmk_rag.index import ChromaIndex, QdrantIndex
from lmk_rag.index.hits import PassageRequest
from lmk_rag.index.qdrant import layout
from lmk_rag.index.qdrant.layout import LANDMARK_DATATYPE, LANDMARK_DATATYPES

K = 10


def corpus_of(real: RealCorpus, n: int, seed: int = 0) -> tuple[list[MultiVector], list[str]]:
    """n documents: the real ones first, then jittered copies of them."""
    rng = np.random.default_rng(seed)
    multis, texts = list(real.multis[:n]), list(real.texts[:n])
    for i in range(len(multis), n):
        m = real.multis[i % len(real.multis)]
        v = m.vectors + rng.normal(0, 0.02, m.vectors.shape).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        p = v.mean(0)
        multis.append(MultiVector(p / np.linalg.norm(p), v, m.spans, m.n_tokens))
        texts.append(real.texts[i % len(real.texts)])
    return multis, texts


def exact_top(multis: list[MultiVector], queries: np.ndarray) -> tuple[list[list[int]], float]:
    """Exact MaxSim top-K by numpy over every landmark; returns the rankings and p50 ms per query."""
    matrix = np.concatenate([m.vectors for m in multis])
    owner = np.repeat(np.arange(len(multis)), [len(m.vectors) for m in multis])
    starts = np.concatenate([[0], np.cumsum([len(m.vectors) for m in multis])[:-1]])
    out, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        best = np.maximum.reduceat(matrix @ q, starts)
        top = np.argpartition(-best, K)[:K]
        out.append([int(i) for i in top[np.argsort(-best[top])]])
        times.append(time.perf_counter() - t0)
    del owner
    return out, float(np.percentile(np.array(times) * 1000, 50))


def du(path: str, part: str = "") -> int:
    """Bytes a folder (or the files whose path holds ``part``) occupies on disk (blocks, not
    preallocated sizes: Qdrant's mmap files are sparse)."""
    return sum(f.stat().st_blocks * 512 for f in Path(path).rglob("*") if f.is_file() and part in str(f))


def timed(fn: Callable, queries, texts=None) -> tuple[float, float, list[list[int]]]:
    times, found = [], []
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        hits = fn(q, texts[i] if texts is not None else None)
        times.append(time.perf_counter() - t0)
        found.append([int(h.id[1:]) for h in hits])
    ms = np.array(times) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95)), found


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return float(np.mean([len(set(a[:K]) & set(b)) / K for a, b in zip(found, exact)]))


def ingest(idx, multis, texts, ids) -> float:
    t0 = time.perf_counter()
    for s in range(0, len(ids), 512):
        idx.add_encoded(multis[s : s + 512], texts[s : s + 512], ids[s : s + 512])
    if isinstance(idx, QdrantIndex):
        idx.optimize()  # embedded: build the HNSW graph the data has grown into (part of ingest)
    return time.perf_counter() - t0


def build_once(path: str, real: RealCorpus, n: int, encoder: LMKEncoder) -> float | None:
    """Build an embedded index of ``n`` documents of ``real`` at ``path`` unless it exists (probes
    keep one and time searches only); the seconds it took, None when it was there already."""
    if os.path.exists(path):
        return None
    multis, texts = corpus_of(real, n)
    idx = QdrantIndex(path, encoder=encoder)
    seconds = ingest(idx, multis, texts, [f"d{i}" for i in range(n)])
    idx.close()
    return seconds


def search_fn(idx, mode: str, prefetch: int | None = None) -> Callable:
    def run(q, text):
        if prefetch is not None:
            idx.prefetch_limit = prefetch
        return idx._search(q, K, None, mode, PassageRequest(), text=text)  # the store's work, not the encoder's

    return run


def rss_mb() -> float:
    """Resident memory now (file-backed pages of the mmap'd vectors included)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", required=True, help="cache written by benchmarks/_real_vectors.py")
    ap.add_argument("--docs", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--backends", nargs="+", default=["edge", "local", "chroma"], choices=["edge", "local", "chroma"])
    ap.add_argument("--local-max", type=int, default=10000, help="largest size for qdrant-client local mode")
    ap.add_argument("--local-queries", type=int, default=10**9, help="queries for local mode (seconds each at 100k)")
    ap.add_argument("--local-modes", nargs="+", default=["prefetch", "maxsim", "pooled", "hybrid"])
    ap.add_argument("--chroma-max", type=int, default=10000, help="largest size for Chroma")
    ap.add_argument("--quantization", nargs="*", default=["int8", "binary"])
    ap.add_argument(
        "--landmark-datatypes",
        nargs="+",
        default=[LANDMARK_DATATYPE],
        choices=LANDMARK_DATATYPES,
        help="how the embedded landmark index stores its vectors: one edge run each (the first is the default's row)",
    )
    ap.add_argument("--tmp", default=None, help="folder for the stores (default: the system's temp)")
    args = ap.parse_args()

    real = load(args.real)
    queries = real.queries[: args.queries]
    qtexts = real.query_texts[: args.queries]
    enc = LMKEncoder(device="cpu")
    n_landmarks = sum(len(m) for m in real.multis)
    print(f"real corpus: {len(real.texts)} documents, {n_landmarks} landmarks, {len(queries)} queries")
    for n in args.docs:
        multis, texts = corpus_of(real, n)
        ids = [f"d{i}" for i in range(n)]
        exact, numpy_p50 = exact_top(multis, queries)
        landmarks = sum(len(m) for m in multis)
        print(f"\n== {n} documents, {landmarks} landmarks; numpy exact MaxSim p50 {numpy_p50:.1f} ms")
        results: dict[str, float] = {"numpy": numpy_p50}
        runs = [(b, dt) for b in args.backends for dt in (args.landmark_datatypes if b == "edge" else [None])]
        for backend, datatype in runs:
            if (backend == "local" and n > args.local_max) or (backend == "chroma" and n > args.chroma_max):
                print(f"{backend:6s} skipped at {n} documents (--{backend}-max)")
                continue
            folder = tempfile.mkdtemp(dir=args.tmp)
            if datatype is not None and datatype != args.landmark_datatypes[0]:
                backend = f"edge-{datatype}"  # the first datatype's row is "edge", what the ratios read
            try:
                if datatype is not None:
                    layout.LANDMARK_DATATYPE = datatype
                    print(f"edge landmark index stored as {datatype}")
                    idx = QdrantIndex(os.path.join(folder, "idx"), encoder=enc)
                elif backend == "local":
                    from qdrant_client import QdrantClient

                    idx = QdrantIndex(client=QdrantClient(path=os.path.join(folder, "idx")), encoder=enc)
                else:
                    idx = ChromaIndex(os.path.join(folder, "idx"), encoder=enc)
                t_ingest = ingest(idx, multis, texts, ids)
                print(f"{backend:6s} ingest {n / t_ingest:7.0f} docs/s ({t_ingest:.1f} s)")
                nq = min(args.local_queries, len(queries)) if backend == "local" else len(queries)
                for mode in args.local_modes if backend == "local" else idx.modes:
                    p50, p95, found = timed(search_fn(idx, mode), queries[:nq], qtexts[:nq])
                    results[f"{backend}:{mode}"] = p50
                    results[f"{backend}:{mode}:recall"] = recall(found, exact[:nq])
                    # hybrid ranks differently on purpose: its overlap with exact MaxSim is not a recall
                    overlap = "overlap" if mode == "hybrid" else "recall@10"
                    print(
                        f"{backend:6s} {mode:8s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  "
                        f"{overlap} vs exact {recall(found, exact[:nq]):.3f}  ({nq} queries)"
                    )
                results[f"{backend}:ingest"] = n / t_ingest
                idx.close()
                # On disk once closed (flushed; the engine's transient files gone), write-ahead logs included.
                size, landmark_index = du(folder), du(folder, ".landmarks")
                print(
                    f"{backend:6s} {size / 2**20:.0f} MiB on disk"
                    + (f" (landmark index {landmark_index / 2**20:.0f} MiB)" if landmark_index else "")
                )
                results[f"{backend}:disk"] = size
                results[f"{backend}:disk-landmarks"] = landmark_index
            finally:
                shutil.rmtree(folder, ignore_errors=True)
                gc.collect()
        ref = results.get("local:maxsim", results["numpy"])
        ref_name = "local mode exact MaxSim" if "local:maxsim" in results else "numpy exact MaxSim"
        if "edge:prefetch" in results:
            print(f"ratio: edge default (prefetch) p50 = 1/{ref / results['edge:prefetch']:.0f} of {ref_name}")
            if ref_name != "numpy exact MaxSim":
                fraction = numpy_p50 / results["edge:prefetch"]
                print(f"ratio: edge default (prefetch) p50 = 1/{fraction:.0f} of numpy exact")
        if "edge:ingest" in results and "local:ingest" in results:
            print(f"ratio: edge ingest = x{results['edge:ingest'] / results['local:ingest']:.1f} local mode's docs/s")
        for label in sorted({key.split(":")[0] for key in results if key.startswith("edge")}):
            r = results
            if f"{label}:prefetch" in r and f"{label}:maxsim" in r:
                before = r[f"{label}:disk"] - r[f"{label}:disk-landmarks"]  # the collection alone
                print(
                    f"ratio: {label} default p50 = {r[f'{label}:prefetch'] / r[f'{label}:maxsim']:.2f} of its exact "
                    f"MaxSim, 1/{numpy_p50 / r[f'{label}:prefetch']:.1f} of numpy; recall@10 "
                    f"{r[f'{label}:prefetch:recall']:.3f}; disk x{r[f'{label}:disk'] / before:.2f} the collection alone"
                    + (f"; ingest x{r[f'{label}:ingest'] / r['local:ingest']:.1f} local" if "local:ingest" in r else "")
                )
        if args.quantization and "edge" in args.backends:
            quantized(args, n, multis, texts, ids, queries, exact, enc)


def quantized(args, n, multis, texts, ids, queries, exact, enc) -> None:
    """Each quantization in a fresh process (so its RSS is its own), against float32."""
    for q in [None, *args.quantization]:
        folder = tempfile.mkdtemp(dir=args.tmp)
        try:
            idx = QdrantIndex(os.path.join(folder, "idx"), encoder=enc, quantization=q)
            t = ingest(idx, multis, texts, ids)
            idx.close()
            landmark_dir = "vector_storage-landmarks"
            vec_bytes = du(folder, landmark_dir + "/vectors")
            quant_bytes = du(folder, landmark_dir + "/quantized")
            np.save(os.path.join(folder, "queries.npy"), queries)
            out = subprocess.run(
                [sys.executable, __file__, "--probe", os.path.join(folder, "idx"), os.path.join(folder, "queries.npy")],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            p50, rss = float(out[0]), float(out[1])
            found = [[int(x) for x in line.split(",")] for line in out[2:]]
            print(
                f"edge quantization={q!s:6s} ingest {t:5.1f} s  "
                f"landmarks float32 on disk {vec_bytes / 2**20:7.1f} MiB, "
                f"quantized (in RAM) {quant_bytes / 2**20:6.1f} MiB  index RSS {rss:6.0f} MiB  "
                f"maxsim p50 {p50:6.2f} ms  recall@10 {recall(found, exact):.3f}"
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def probe(path: str, queries_path: str) -> None:
    """Open an index read-only in this fresh process, run exact MaxSim for every query: p50, peak RSS, ids."""
    enc = LMKEncoder(device="cpu")
    before = rss_mb()
    idx = QdrantIndex(path, encoder=enc)
    qs = np.load(queries_path)
    p50, _, found = timed(search_fn(idx, "maxsim"), qs)
    print(p50, rss_mb() - before)
    for f in found:
        print(",".join(map(str, f)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        probe(sys.argv[2], sys.argv[3])
    else:
        main()
