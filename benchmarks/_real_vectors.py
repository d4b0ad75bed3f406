"""Real LMK multi-vectors for the index benchmarks, encoded once and cached.

Documents are section bodies (32..1024 tokens) of the *train* documentation domains (Linux,
Rust, R, bash: ``lmk-rag eval --domains`` protocol; never the dev/test domains, FAQ pages or
Perl's docs); each section's heading is a real query whose relevant document is its section.
The cache (``.npz``) holds every landmark vector, each document's pooled vector and the
encoded queries, so stores can be benchmarked on real shapes without re-encoding.

    python benchmarks/_real_vectors.py --docs 10000 --out /tmp/lmk_real.npz   # needs LMK_DOCS_ROOT
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np

from lmk_rag import LMKEncoder, MultiVector
from lmk_rag.corpora.domains import domains_of, read_domain_pages
from lmk_rag.corpora.rst import query_sections


@dataclass
class RealCorpus:
    texts: list[str]
    multis: list[MultiVector]
    queries: np.ndarray  # (n_queries, dim), encoded as queries
    query_texts: list[str]
    relevant: list[int]  # the document each query's heading belongs to


#: The train domains the recorded index benchmarks were run on (the train split has grown since).
BENCHMARK_DOMAINS = ("linux", "rust", "r", "bash")


def build(
    encoder: LMKEncoder, n_docs: int, n_queries: int, seed: int = 0, domains: tuple[str, ...] = BENCHMARK_DOMAINS
) -> RealCorpus:
    pages = [p for d in domains_of("train") if d.name in domains for p in read_domain_pages(d)]
    sections = query_sections(pages, min_body_chars=150)
    bodies = [page.text[s.start : s.end].strip() for page, s in sections]
    tokens = encoder.tokenize(bodies).n_tokens
    keep = [i for i, n in enumerate(tokens) if 32 <= n <= 1024]
    random.Random(seed).shuffle(keep)
    keep = keep[:n_docs]
    texts = [bodies[i] for i in keep]
    titles = [sections[i][1].title for i in keep]
    t0 = time.perf_counter()
    multis = encoder.encode_multi(texts, show_progress=True)
    n_tokens = int(sum(tokens[i] for i in keep))
    print(f"encoded {len(texts)} documents ({n_tokens} tokens) in {time.perf_counter() - t0:.0f} s")
    picked = sorted(random.Random(seed + 1).sample(range(len(texts)), min(n_queries, len(texts))))
    query_texts = [titles[i] for i in picked]
    return RealCorpus(texts, multis, encoder.encode_query(query_texts), query_texts, picked)


def save(corpus: RealCorpus, path: str | Path) -> None:
    counts = np.array([len(m.vectors) for m in corpus.multis])
    np.savez(
        path,
        vectors=np.concatenate([m.vectors for m in corpus.multis]),
        pooled=np.stack([m.pooled for m in corpus.multis]),
        counts=counts,
        spans=np.concatenate([np.asarray(m.spans, dtype=np.int64).reshape(-1, 2) for m in corpus.multis]),
        n_tokens=np.array([m.n_tokens for m in corpus.multis]),
        queries=corpus.queries,
        relevant=np.array(corpus.relevant),
        texts=np.array(json.dumps(corpus.texts)),
        query_texts=np.array(json.dumps(corpus.query_texts)),
    )


def load(path: str | Path) -> RealCorpus:
    data = dict(np.load(path))  # each array read once (an npz member is re-read on every access)
    bounds = np.concatenate([[0], np.cumsum(data["counts"])])
    vectors, pooled, spans, n_tokens = data["vectors"], data["pooled"], data["spans"].tolist(), data["n_tokens"]
    multis = [
        MultiVector(
            pooled[i],
            vectors[bounds[i] : bounds[i + 1]],
            [(a, b) for a, b in spans[bounds[i] : bounds[i + 1]]],
            int(n_tokens[i]),
        )
        for i in range(len(bounds) - 1)
    ]
    return RealCorpus(
        json.loads(str(data["texts"])),
        multis,
        data["queries"],
        json.loads(str(data["query_texts"])),
        [int(x) for x in data["relevant"]],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--domains",
        default=",".join(BENCHMARK_DOMAINS),
        help="train domains, joined by commas (another set gives an independent vector set)",
    )
    args = ap.parse_args()
    domains = tuple(args.domains.split(","))
    save(build(LMKEncoder(device="cpu"), args.docs, args.queries, domains=domains), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
