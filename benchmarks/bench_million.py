"""An embedded index of a million documents (issue #49 item 5): ingest rate, disk, RAM of the
process that searches it, recall@10 against exact MaxSim and p50/p95 of the default search.

Documents are the benchmark's real LMK vectors (``benchmarks/_real_vectors.py``) followed by seeded
jittered copies of them (noise 0.02 per landmark, as ``bench_index.corpus_of``), generated one
batch at a time so that neither the corpus nor the exact MaxSim ground truth is ever held whole:
each batch is scored against the queries with numpy (the running top 10 per query kept) and
written with ``add_encoded``. Ingest time counts ``add_encoded`` and the final ``optimize`` only.

    python benchmarks/bench_million.py build  --real /tmp/real.npz --docs 1000000 --path /data/m1
    python benchmarks/bench_million.py search --real /tmp/real.npz --path /data/m1   # a fresh process
    python benchmarks/bench_million.py exact  --real /tmp/real.npz --path /data/m1   # ground truth only
    python benchmarks/bench_million.py optimize --real /tmp/real.npz --path /data/m1 # a merge that stopped

Merging the segments at the end (``optimize``) writes a new copy of them first: keep about twice the
index's size free.

``search`` reports RSS after opening and after the queries, split into anonymous memory (what the
process needs) and mapped file pages (page cache the kernel reclaims under pressure).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
from _real_vectors import RealCorpus, load
from bench_index import K, du, recall, search_fn, timed

from lmk_rag import LMKEncoder, MultiVector
from lmk_rag.index import QdrantIndex
from lmk_rag.index.hits import Hit

BATCH = 512
NOISE = 0.02
TIE = 0.01


def batches(real: RealCorpus, n: int, seed: int = 0) -> Iterator[tuple[int, list[MultiVector], list[str]]]:
    """(first document number, vectors, texts) per batch of ``BATCH`` documents: the real ones
    first, then jittered copies (each batch seeded by its position, so a build is reproducible)."""
    for start in range(0, n, BATCH):
        rng = np.random.default_rng([seed, start])
        multis, texts = [], []
        for i in range(start, min(start + BATCH, n)):
            m = real.multis[i % len(real.multis)]
            if i >= len(real.multis):
                v = m.vectors + NOISE * rng.standard_normal(m.vectors.shape, dtype=np.float32)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                p = v.mean(0)
                m = MultiVector(p / np.linalg.norm(p), v, m.spans, m.n_tokens)
            multis.append(m)
            texts.append(real.texts[i % len(real.texts)])
        yield start, multis, texts


class RunningTop:
    """The exact MaxSim top ``K`` documents per query over the batches seen so far."""

    def __init__(self, queries: np.ndarray) -> None:
        self.queries = queries
        self.scores = np.full((len(queries), K), -np.inf, dtype=np.float32)
        self.ids = np.full((len(queries), K), -1, dtype=np.int64)

    def add(self, start: int, multis: list[MultiVector]) -> None:
        counts = [len(m.vectors) for m in multis]
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        best = np.maximum.reduceat(self.queries @ np.concatenate([m.vectors for m in multis]).T, starts, axis=1)
        scores = np.concatenate([self.scores, best], axis=1)
        ids = np.concatenate([self.ids, np.broadcast_to(np.arange(start, start + len(multis)), best.shape)], axis=1)
        keep = np.argsort(-scores, axis=1, kind="stable")[:, :K]
        self.scores = np.take_along_axis(scores, keep, axis=1)
        self.ids = np.take_along_axis(ids, keep, axis=1)


def memory_mib() -> dict[str, float]:
    """Resident memory of this process: anonymous (heap) and file-backed (mapped pages), MiB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def save_exact(path: str, top: RunningTop) -> None:
    np.savez(Path(path).with_suffix(".exact.npz"), ids=top.ids, scores=top.scores)


def exact(args: argparse.Namespace, real: RealCorpus) -> None:
    """The ground truth alone (for an index built before, or by another run of ``build``)."""
    top = RunningTop(real.queries[: args.queries])
    for start, multis, _ in batches(real, args.docs):
        top.add(start, multis)
    save_exact(args.path, top)
    print(f"exact MaxSim top {K} of {args.docs} documents for {len(top.ids)} queries saved")


def build(args: argparse.Namespace, real: RealCorpus) -> None:
    if os.path.exists(args.path):
        raise SystemExit(f"{args.path} exists; give a new folder (or run `search` on it)")
    encoder = LMKEncoder(device="cpu")
    top = RunningTop(real.queries[: args.queries])
    idx = QdrantIndex(args.path, encoder=encoder)
    writing = landmarks = 0.0
    peak_rss = 0.0
    t_all = time.perf_counter()
    for start, multis, texts in batches(real, args.docs):
        top.add(start, multis)
        landmarks += sum(len(m.vectors) for m in multis)
        t0 = time.perf_counter()
        idx.add_encoded(multis, texts, [f"d{i}" for i in range(start, start + len(multis))])
        writing += time.perf_counter() - t0
        peak_rss = max(peak_rss, memory_mib()["VmRSS"])
        if (start // BATCH) % 200 == 0:
            done = start + len(multis)
            print(f"{done} documents, {writing:.0f} s writing, {time.perf_counter() - t_all:.0f} s in all", flush=True)
    save_exact(args.path, top)  # before the merge, which can stop for want of disk
    record: dict[str, float] = {
        "documents": args.docs,
        "landmarks": int(landmarks),
        "writing_s": writing,
        "peak_rss_during_writing_mib": peak_rss,
        "disk_before_optimize_bytes": du(args.path),
    }
    record_file = Path(args.path).with_suffix(".build.json")
    record_file.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.docs} documents ({int(landmarks)} landmarks) in {writing:.0f} s; peak RSS {peak_rss:.0f} MiB")
    t0 = time.perf_counter()
    idx.optimize()
    record["optimize_s"] = time.perf_counter() - t0
    idx.close()
    record["ingest_docs_per_s"] = args.docs / (writing + record["optimize_s"])
    record["disk_bytes"], record["landmark_index_bytes"] = du(args.path), du(args.path, ".landmarks")
    record_file.write_text(json.dumps(record, indent=1))
    print(
        f"built: writing {writing:.0f} s + optimize {record['optimize_s']:.0f} s = "
        f"{record['ingest_docs_per_s']:.0f} docs/s; {record['disk_bytes'] / 2**30:.1f} GiB on disk "
        f"(landmark index {record['landmark_index_bytes'] / 2**30:.1f} GiB)"
    )


def near_tie_recall(run: Callable, queries: np.ndarray, texts: list[str], tenth: np.ndarray) -> float:
    """Recall@10 counting as right every hit whose exact MaxSim (the score these modes return) is
    within ``TIE`` of the exact 10th: on a corpus of ~100 jittered copies per document the exact
    top 10 is a crowd a few hundredths apart (see ``research/results/candidate-budget``)."""
    return float(np.mean([near_tie_share(run(q, texts[i]), tenth[i]) for i, q in enumerate(queries)]))


def near_tie_share(hits: list[Hit], tenth: float) -> float:
    """The share of the first ``K`` hits within ``TIE`` of the exact 10th score (one query)."""
    return sum(h.score >= tenth - TIE for h in hits[:K]) / K


def optimize(args: argparse.Namespace, real: RealCorpus) -> None:
    """Finish a build whose final merge stopped (for want of disk): open, merge, close, report."""
    t0 = time.perf_counter()
    idx = QdrantIndex(args.path, encoder=LMKEncoder(device="cpu"))
    t1 = time.perf_counter()
    print(f"opened in {t1 - t0:.0f} s; {memory_mib()}", flush=True)
    idx.optimize()
    t2 = time.perf_counter()
    print(f"optimize {t2 - t1:.0f} s; {memory_mib()}", flush=True)
    idx.close()
    size, landmark_index = du(args.path) / 2**30, du(args.path, ".landmarks") / 2**30
    print(f"closed in {time.perf_counter() - t2:.0f} s; disk {size:.2f} GiB, landmark index {landmark_index:.2f} GiB")


def search(args: argparse.Namespace, real: RealCorpus) -> None:
    truth = np.load(Path(args.path).with_suffix(".exact.npz"))
    exact, tenth = truth["ids"].tolist(), truth["scores"][:, K - 1]
    queries, texts = real.queries[: len(exact)], real.query_texts[: len(exact)]
    encoder = LMKEncoder(device="cpu")
    encoder.encode_query(["warm"])
    before = memory_mib()
    idx = QdrantIndex(args.path, encoder=encoder)
    opened = memory_mib()
    print(
        f"opened: +{opened['VmRSS'] - before['VmRSS']:.0f} MiB RSS "
        f"(anonymous +{opened['RssAnon'] - before['RssAnon']:.0f}, mapped +{opened['RssFile'] - before['RssFile']:.0f})"
    )
    for mode in args.modes:
        timed(search_fn(idx, mode), queries[: args.warm], texts[: args.warm])
        p50, p95, found = timed(search_fn(idx, mode), queries, texts)
        now = memory_mib()
        ties = near_tie_recall(search_fn(idx, mode), queries, texts, tenth) if mode != "hybrid" else float("nan")
        print(
            f"{mode:8s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  recall@10 vs exact {recall(found, exact):.3f} "
            f"({len(exact)} queries), {ties:.3f} counting near-ties; RSS +{now['VmRSS'] - before['VmRSS']:.0f} MiB "
            f"(anonymous +{now['RssAnon'] - before['RssAnon']:.0f}, mapped +{now['RssFile'] - before['RssFile']:.0f}); "
            f"process RSS {now['VmRSS']:.0f} MiB, peak {now['VmHWM']:.0f} MiB",
            flush=True,
        )
    idx.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["build", "optimize", "exact", "search"])
    ap.add_argument("--real", required=True, help="cache written by benchmarks/_real_vectors.py")
    ap.add_argument("--path", required=True, help="the index folder (its exact top 10 is kept beside it)")
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warm", type=int, default=20, help="queries run first, untimed, per mode")
    ap.add_argument("--modes", nargs="+", default=["prefetch"], help="search modes to time (prefetch: the default)")
    args = ap.parse_args()
    real = load(args.real)
    {"build": build, "optimize": optimize, "exact": exact, "search": search}[args.step](args, real)


if __name__ == "__main__":
    main()
