"""The first searches of a freshly started process on a cold page cache, with and without
``index.warm()`` (issue #49 item 5: 105 ms p50 at 1M on a dropped cache, 6-7 ms warm).

Builds an embedded index of ``--docs`` documents from the benchmark's real vectors (the real ones,
then jittered copies: ``benchmarks/bench_index.py``'s corpus) unless ``--path`` holds one, then per
round and variant: drops the page cache (needs root), starts a fresh process that opens the index,
with ``warm`` calls ``index.warm()`` and waits for its read-ahead to finish, and times the default
search over the real queries (the store's work, as ``bench_index`` does). Variants alternate so
that a drift in the machine touches both.

    python research/scripts/cold_start_warm.py --real /tmp/bench/real.npz --docs 100000 --path /tmp/cw100k
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def drop_page_cache() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def child(path: str, real_path: str, warm: bool, queries: int) -> dict[str, float]:
    import numpy as np
    from _real_vectors import load
    from bench_index import search_fn, timed

    from lmk_rag import LMKEncoder
    from lmk_rag.index import QdrantIndex

    real = load(real_path)  # before the clock: the vectors file is not the index
    encoder = LMKEncoder(device="cpu")
    t0 = time.perf_counter()
    index = QdrantIndex(path, encoder=encoder)
    opened = time.perf_counter() - t0
    warmed, size = 0.0, 0
    if warm:
        t0 = time.perf_counter()
        size = index.warm()
        for thread in threading.enumerate():
            if thread.name == "lmk-rag warm":
                thread.join()
        warmed = time.perf_counter() - t0
    p50, p95, _ = timed(search_fn(index, "prefetch"), np.asarray(real.queries[:queries]))
    index.close()
    return {"open_s": opened, "warm_s": warmed, "warm_mb": size / 1e6, "p50_ms": p50, "p95_ms": p95}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", required=True)
    ap.add_argument("--docs", type=int, default=100000)
    ap.add_argument("--path", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", choices=["none", "warm"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.path, args.real, args.child == "warm", args.queries)))
        return
    if not os.path.exists(args.path):
        from _real_vectors import load
        from bench_index import build_once

        from lmk_rag import LMKEncoder

        seconds = build_once(args.path, load(args.real), args.docs, LMKEncoder(device="cpu"))
        print(f"built {args.docs} documents in {seconds:.0f} s", flush=True)
    for round_ in range(args.rounds):
        for variant in ("none", "warm"):
            drop_page_cache()
            command = [sys.executable, __file__, "--real", args.real, "--path", args.path, "--docs", str(args.docs)]
            command += ["--queries", str(args.queries), "--child", variant]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"round {round_} {variant:4s}: open {row['open_s']:.2f} s, read-ahead {row['warm_mb']:.0f} MB in "
                f"{row['warm_s']:.2f} s; first {args.queries} queries p50 {row['p50_ms']:.1f} ms, "
                f"p95 {row['p95_ms']:.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
