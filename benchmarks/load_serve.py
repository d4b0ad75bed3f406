"""A bounded load test of ``lmk-rag serve`` on loopback: R requests at C concurrency over mixed
routes (embeddings in both shapes, landmarks, search, context, document upserts and deletes, and
a share of bad requests), counting answers by status and sampling the server's resident memory
after every tenth of the run. Pass: no 5xx, and memory flat after warm-up.

    python benchmarks/load_serve.py --requests 2000 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import httpx
from _texts import varied_texts
from _timing import machine_line

from tests.serve.server import start_server, stop


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _requests(n: int, seed: int = 0, writes: bool = True) -> list[tuple[str, str, object]]:
    """(method, path, body) for n requests, the mix fixed by the seed (``writes``: upserts and
    deletes included; without them those turns are searches)."""
    rng = random.Random(seed)
    texts = varied_texts(400, 60, seed=seed)
    mix: list[tuple[str, str, object]] = []
    for i in range(n):
        text = rng.choice(texts)
        roll = rng.random()
        if roll < 0.30:
            mix.append(("POST", "/v1/embeddings", {"input": [text, rng.choice(texts)], "encoding_format": "base64"}))
        elif roll < 0.40:
            mix.append(("POST", "/embed", {"inputs": text}))
        elif roll < 0.48:
            mix.append(("POST", "/embed_landmarks", {"inputs": text + " " + rng.choice(texts)}))
        elif roll < 0.63:
            mix.append(("POST", "/search", {"query": text[:80], "k": 5}))
        elif roll < 0.78:
            mix.append(("POST", "/context", {"query": text[:80], "max_tokens": 256}))
        elif roll < 0.90 and not writes:
            mix.append(("POST", "/search", {"query": text[:60], "k": 3}))
        elif roll < 0.86:  # upserts over a fixed set of ids: the index does not grow without bound
            doc = {"id": f"load-{rng.randrange(50)}", "text": " ".join(rng.choices(texts, k=3)), "metadata": {"n": i}}
            mix.append(("POST", "/documents", {"documents": [doc]}))
        elif roll < 0.90:
            mix.append(("DELETE", f"/documents/load-{rng.randrange(50)}", None))
        elif roll < 0.95:
            mix.append(("GET", "/info", None))
        else:  # bad requests: each must be a 4xx
            mix.append(
                rng.choice(
                    [
                        ("POST", "/v1/embeddings", {"input": []}),
                        ("POST", "/search", {"query": "x", "filter": {"a": {"$bogus": 1}}}),
                        ("POST", "/embed", {"inputs": "x", "truncate": True}),
                        ("GET", "/no/such/route", None),
                        ("POST", "/context", {"query": "x", "max_tokens": "many"}),
                    ]
                )
            )
    return mix


async def _run(url: str, pid: int, mix: list[tuple[str, str, object]], concurrency: int) -> tuple[dict, list]:
    statuses: collections.Counter[int] = collections.Counter()
    memory: list[tuple[int, float]] = []
    done = 0
    queue = collections.deque(mix)
    step = max(1, len(mix) // 10)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300) as client:

        async def worker() -> None:
            nonlocal done
            while queue:
                method, path, body = queue.popleft()
                response = await client.request(method, path, json=body)
                statuses[response.status_code] += 1
                done += 1
                if done % step == 0:
                    memory.append((done, _rss_mb(pid)))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return dict(statuses), memory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--no-writes", action="store_true", help="no upserts or deletes (searches instead)")
    args = ap.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "index")
        try:
            seed_docs = [{"id": f"seed-{i}", "text": t} for i, t in enumerate(varied_texts(300, 400, seed=7))]
            httpx.post(url + "/documents", json={"documents": seed_docs}, timeout=600).raise_for_status()
            print(f"server RSS after start and 300 documents: {_rss_mb(proc.pid):.0f} MB")
            t0 = time.perf_counter()
            mix = _requests(args.requests, writes=not args.no_writes)
            statuses, memory = asyncio.run(_run(url, proc.pid, mix, args.concurrency))
            seconds = time.perf_counter() - t0
        finally:
            status = stop(proc)
    errors_5xx = sum(n for s, n in statuses.items() if s >= 500)
    print(
        f"{args.requests} requests at concurrency {args.concurrency} in {seconds:.0f} s "
        f"({args.requests / seconds:.0f}/s)"
    )
    print("answers by status:", dict(sorted(statuses.items())), f"-> 5xx: {errors_5xx}")
    print("server RSS (MB) after n requests:", ", ".join(f"{n}: {mb:.0f}" for n, mb in memory))
    warm = [mb for n, mb in memory if n > args.requests * 0.3]
    if warm:
        print(
            f"after warm-up (30%): min {min(warm):.0f} MB, max {max(warm):.0f} MB, growth {max(warm) - warm[0]:+.0f} MB"
        )
    print(f"server exit status after SIGTERM: {status}")


if __name__ == "__main__":
    main()
