"""Ingestion throughput: single process vs ``--ray`` with 1 and 2 actors, on one corpus, in one run.

Each method ingests the same files into a fresh embedded Qdrant index (the driver writes, as
``lmk-rag ingest --ray`` does for a folder index). Printed: docs/s and tokens/s per method, the
ratio to the single process, Ray's fixed cost (cluster start; actor pool start with model
load, measured as a one-document run) and its per-document overhead, from the 1-actor run
against a single process limited to the same one thread. Run it on an otherwise idle machine:

    LMK_DOCS_ROOT=... python benchmarks/bench_ingest.py --max-docs 200
    python benchmarks/bench_ingest.py --corpus my_docs/ --max-docs 500
    LMK_DOCS_ROOT=... python benchmarks/bench_ingest.py --max-docs 145 --only-two-actors   # the 0.9x target
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex
from lmk_rag.ingest import discover, ingest
from lmk_rag.ingest.ray import RayExecutor, connect


def corpus_folder(source: Path, max_docs: int, into: Path) -> Path:
    """The first ``max_docs`` ingestible files of ``source`` (sorted), copied flat into ``into``."""
    files = discover([source]).files[:max_docs]
    into.mkdir(parents=True)
    for doc_id, path in files:
        shutil.copyfile(path, into / doc_id.replace("/", "__"))
    return into


def timed(run) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = run()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    default = Path(os.environ.get("LMK_DOCS_ROOT", "")) / "sqlite3-doc" / "usr" / "share" / "doc" / "sqlite3"
    ap.add_argument("--corpus", type=Path, default=default, help="folder of documents (default: sqlite3-doc)")
    ap.add_argument("--max-docs", type=int, default=200)
    ap.add_argument("--batch-docs", type=int, default=16)
    ap.add_argument(
        "--only-two-actors",
        action="store_true",
        help="time only the single process and 2 actors (a long corpus, to check the 0.9x target)",
    )
    args = ap.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus folder {args.corpus}; give --corpus or set LMK_DOCS_ROOT (see the README)")

    encoder = LMKEncoder(device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        folder = corpus_folder(args.corpus, args.max_docs, Path(tmp) / "corpus")
        one = corpus_folder(folder, 1, Path(tmp) / "one")

        def single(name: str, threads: int):
            torch.set_num_threads(threads)
            index = QdrantIndex(Path(tmp) / name, encoder=encoder)
            try:
                return timed(lambda: ingest(index, [folder], batch_docs=args.batch_docs, show_progress=False))
            finally:
                index.close()
                torch.set_num_threads(os.cpu_count() or 1)

        def distributed(name: str, actors: int, source: Path = folder):
            index = QdrantIndex(Path(tmp) / name, encoder=encoder)
            try:
                return timed(
                    lambda: ingest(
                        index,
                        [source],
                        executor=RayExecutor(actors=actors),
                        batch_docs=args.batch_docs,
                        show_progress=False,
                    )
                )
            finally:
                index.close()

        encoder.encode_multi(["warm up the model once before timing"])
        results = {"single process": single("single", os.cpu_count() or 1)}
        if not args.only_two_actors:
            results["single process, 1 thread"] = single("single1", 1)
        cluster_s, _ = timed(lambda: connect(None))
        pool_s, _ = distributed("ray-one", 1, one)
        if not args.only_two_actors:
            results["ray, 1 actor"] = distributed("ray1", 1)
        results["ray, 2 actors"] = distributed("ray2", 2)

    base_s, base = results["single process"]
    n, tokens = base.added, base.tokens
    print(f"\n{n} documents, {tokens} tokens ({tokens / max(n, 1):.0f} per document), {os.cpu_count()} CPUs\n")
    print("| method | seconds | docs/s | tokens/s | vs single process |")
    print("|---|---:|---:|---:|---:|")
    for name, (seconds, summary) in results.items():
        assert summary.added == n and not summary.failed, (name, summary.lines())
        print(f"| {name} | {seconds:.1f} | {n / seconds:.2f} | {tokens / seconds:.0f} | {base_s / seconds:.2f}x |")
    print(f"\nRay cluster start (local, once per process): {cluster_s:.1f} s")
    print(f"actor pool start + 1 document (model load on the actor): {pool_s:.1f} s")
    steady_s = max(results["ray, 2 actors"][0] - pool_s, 1e-9)
    print(f"2 actors after the pool start: {n / steady_s:.2f} docs/s = {base_s / steady_s:.2f}x the single process")
    if args.only_two_actors:
        return
    one_thread_s = results["single process, 1 thread"][0]
    ray1_s = results["ray, 1 actor"][0]
    print(
        f"Ray's cost per document, 1 actor vs 1 thread in-process, pool start included: "
        f"{(ray1_s - one_thread_s) / n * 1000:.0f} ms ({(ray1_s - one_thread_s - pool_s) / n * 1000:.0f} ms without it)"
    )
    per_actor = n / max(ray1_s - pool_s, 1e-9)
    print(
        f"measured per-actor throughput (1 CPU thread): {per_actor:.2f} docs/s; N actors scale to about "
        f"N x that per-actor rate until the writer or the cluster's I/O saturates"
    )


if __name__ == "__main__":
    main()
