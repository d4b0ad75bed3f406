"""``lmk-rag serve`` against the same work in-process, on loopback, one run, ratios printed:

1. throughput of ``/v1/embeddings`` with C concurrent clients each sending single sentences,
   against ``encoder.encode`` of the same sentences in batches;
2. p50 latency of one short request alone against the in-process call;
3. a long document (100k tokens by default) embedded over HTTP: every token counted, the vector
   equal to the in-process one;
4. ``/context`` p50 at N documents against ``index.context`` in-process.

The server runs in its own process (as deployed) and shares the machine's cores with the
clients, so the HTTP figures include the clients' own cost.

    python benchmarks/bench_serve.py --docs 10000 --clients 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import httpx
import numpy as np
from _texts import varied_texts
from _timing import machine_line
from bench_context import CORPUS, QUESTIONS, jittered

from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex
from tests.serve.server import start_server, stop

#: Seconds between paired calls: this process's OpenMP threads stop spinning before the server
#: computes (they would take its cores), and the other way round.
PAUSE = 0.05


def _p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def _concurrent(url: str, texts: list[str], clients: int) -> float:
    """Seconds for ``clients`` connections, each sending one sentence at a time, to embed ``texts``.
    The clients speak HTTP/1.1 over asyncio streams, as a load generator (wrk, hey) would: an
    HTTP library in Python costs more CPU per request than the server, and shares its two cores."""
    host, port = url.removeprefix("http://").split(":")
    queue = list(reversed(texts))

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while queue:
                body = json.dumps({"input": queue.pop(), "encoding_format": "base64"}).encode()
                writer.write(
                    b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(head.decode(errors="replace"))
                length = int(
                    next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1]
                )
                await reader.readexactly(length)
        finally:
            writer.close()

    httpx.post(url + "/v1/embeddings", json={"input": "warm up"}).raise_for_status()
    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - t0


def _local_throughput(encoder: LMKEncoder, sentences: list[str], batch: int | None) -> float:
    t0 = time.perf_counter()
    if batch is None:
        encoder.encode(sentences)
    else:
        for i in range(0, len(sentences), batch):
            encoder.encode(sentences[i : i + batch])
    return len(sentences) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000, help="documents in the index for /context (default 10000)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    ap.add_argument("--sentences", type=int, default=512, help="single sentences sent (default 512)")
    ap.add_argument("--long-tokens", type=int, default=100_000, help="tokens of the long document (default 100000)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per query; latency samples x5")
    args = ap.parse_args()
    print(machine_line())
    encoder = LMKEncoder(device="cpu")
    sentences = varied_texts(args.sentences, 25, seed=1)
    words = " ".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.md")))
    long_text = words
    while encoder.count_tokens([long_text])[0] < args.long_tokens:
        long_text += "\n\n" + words
    long_tokens = encoder.count_tokens([long_text])[0]
    short = "How do I rotate the signing keys?"
    texts = [p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.md"))]
    multis, doc_texts = jittered(encoder.encode_multi(texts), texts, args.docs)

    with tempfile.TemporaryDirectory() as tmp:
        # Two copies of one index: one opened here, one by the server (an embedded index has one owner).
        local_folder, served_folder = Path(tmp) / "local", Path(tmp) / "served"
        index = QdrantIndex(served_folder, encoder=encoder)
        index.add_encoded(multis, doc_texts, ids=[f"d{i}" for i in range(args.docs)])
        index.optimize()
        index.close()
        shutil.copytree(served_folder, local_folder)
        index = QdrantIndex(local_folder, encoder=encoder)
        proc, url = start_server(served_folder)
        try:
            client = httpx.Client(base_url=url, timeout=600)
            # 1. throughput, in-process and served runs interleaved; best of two each
            encoder.encode(sentences[:32])
            local_all, local_batched, served = [], [], []
            for _ in range(2):
                local_all.append(_local_throughput(encoder, sentences, None))
                local_batched.append(_local_throughput(encoder, sentences, args.clients))
                served.append(len(sentences) / asyncio.run(_concurrent(url, sentences, args.clients)))
            batches = client.get("/metrics").text
            # 2. latency of one short request, paired samples
            local_latency, http_latency = [], []
            for i in range(args.runs * 5 + 5):
                t = time.perf_counter()
                encoder.encode([short])
                a = time.perf_counter() - t
                time.sleep(PAUSE)
                t = time.perf_counter()
                client.post("/v1/embeddings", json={"input": short}).raise_for_status()
                b = time.perf_counter() - t
                time.sleep(PAUSE)
                if i >= 5:
                    local_latency.append(a)
                    http_latency.append(b)
            # 3. the long document
            t0 = time.perf_counter()
            long_local = encoder.encode([long_text])[0]
            long_local_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            r = client.post("/v1/embeddings", json={"input": long_text})
            long_http_s = time.perf_counter() - t0
            r.raise_for_status()
            long_http = np.array(r.json()["data"][0]["embedding"], dtype=np.float32)
            served_tokens = r.json()["usage"]["prompt_tokens"]
            # 4. /context, paired samples
            local_context, http_context, same = [], [], True
            for q in QUESTIONS:
                index.context(q, 512)
                client.post("/context", json={"query": q, "max_tokens": 512})
            for _ in range(args.runs):
                for q in QUESTIONS:
                    t = time.perf_counter()
                    want = index.context(q, 512)
                    local_context.append(time.perf_counter() - t)
                    time.sleep(PAUSE)
                    t = time.perf_counter()
                    got = client.post("/context", json={"query": q, "max_tokens": 512}).json()["passages"]
                    http_context.append(time.perf_counter() - t)
                    time.sleep(PAUSE)
                    same &= [(p["id"], p["span"]["start"], p["span"]["end"]) for p in got] == [
                        (p.id, p.span[0], p.span[1]) for p in want
                    ]
            client.close()
        finally:
            stop(proc)
            index.close()

    count = next(float(x.split()[-1]) for x in batches.splitlines() if x.startswith("lmk_rag_batch_inputs_count"))
    total = next(float(x.split()[-1]) for x in batches.splitlines() if x.startswith("lmk_rag_batch_inputs_sum"))
    print(
        f"1. throughput, {len(sentences)} single sentences (best of 2, interleaved): in-process encode of the whole "
        f"list {max(local_all):.0f}/s, in batches of {args.clients} {max(local_batched):.0f}/s; /v1/embeddings with "
        f"{args.clients} clients {max(served):.0f}/s (forward batches of {total / count:.1f} inputs on average): "
        f"ratio {max(served) / max(local_all):.2f} to the whole list (target >= 0.8), "
        f"{max(served) / max(local_batched):.2f} to batches of {args.clients}"
    )
    extra = _p50_ms(http_latency) - _p50_ms(local_latency)
    print(
        f"2. one short request alone, {len(local_latency)} paired samples: p50 in-process {_p50_ms(local_latency):.1f} "
        f"ms, over HTTP {_p50_ms(http_latency):.1f} ms: {extra:+.1f} ms (target <= +5 ms)"
    )
    cosine = float(long_http @ long_local / (np.linalg.norm(long_http) * np.linalg.norm(long_local)))
    print(
        f"3. long document: {long_tokens} tokens, usage says {served_tokens}; cosine to in-process {cosine:.6f}; "
        f"{long_http_s:.1f} s over HTTP vs {long_local_s:.1f} s in-process (ratio {long_http_s / long_local_s:.2f})"
    )
    extra = _p50_ms(http_context) - _p50_ms(local_context)
    print(
        f"4. /context at {args.docs} documents, {len(local_context)} paired samples: p50 in-process "
        f"{_p50_ms(local_context):.1f} ms, over HTTP {_p50_ms(http_context):.1f} ms: {extra:+.1f} ms "
        f"(target <= +5 ms); same passages: {same}"
    )


if __name__ == "__main__":
    main()
