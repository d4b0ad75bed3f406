"""Encode speed and agreement of each backend against PyTorch fp32, on the same texts, in one process.

Long documents are real pages of the dev documentation domains (``LMK_DOCS_ROOT``, see the
README's out-of-domain section; without it, long texts built from the sample corpus); short texts
are up to ~380 words. For each backend: tokens/s and its ratio to PyTorch fp32 (best of N), and
the lowest cosine between its vectors and PyTorch fp32's (pooled, and every landmark vector).

    LMK_DOCS_ROOT=... python benchmarks/bench_backends.py [--docs 24] [--repeats 2]
"""

from __future__ import annotations

import argparse
import functools
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from _texts import varied_texts
from _timing import machine_line, timed

from lmk_rag import LMKEncoder

CONFIGS: list[tuple[str, dict]] = [
    ("torch fp32", {}),
    ("torch bf16", {"dtype": "bf16"}),
    ("onnx fp32", {"backend": "onnx"}),
    ("onnx int8", {"backend": "onnx", "quantize": "int8"}),
    ("openvino fp32", {"backend": "openvino"}),
    ("openvino bf16", {"backend": "openvino", "dtype": "bf16"}),
]


def long_documents(n: int) -> list[str]:
    """``n`` long pages of the dev domains, about 1,000-2,500 words each (or long texts built from
    the sample corpus), spread over the domains."""
    if os.environ.get("LMK_DOCS_ROOT"):
        from lmk_rag.corpora.domains import domains_of, read_domain_pages

        pages = [p.text for d in domains_of("dev") for p in read_domain_pages(d) if 6_000 <= len(p.text) <= 15_000]
        step = max(1, len(pages) // n)
        return pages[::step][:n]
    return [" ".join(varied_texts(6, max_words=380, seed=i)) for i in range(n)]


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return float(((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)).min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=24, help="long documents (default 24)")
    parser.add_argument("--short", type=int, default=256, help="short texts (default 256)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per row, best kept (default 2)")
    args = parser.parse_args()
    long_docs, short = long_documents(args.docs), varied_texts(args.short, max_words=380)
    reference = LMKEncoder(device="cpu")
    tokens = {
        name: int(reference.tokenize(texts).n_tokens.sum()) for name, texts in (("long", long_docs), ("short", short))
    }
    print(machine_line())
    print(f"long: {len(long_docs)} documents, {tokens['long']} tokens")
    print(f"short: {len(short)} texts, {tokens['short']} tokens")
    ref_long = reference.encode_multi(long_docs)
    base: dict[str, float] = {}
    print(
        f"{'backend':16s} {'long tok/s':>11s} {'x fp32':>7s} {'short tok/s':>12s} {'x fp32':>7s} "
        f"{'min cos pooled':>15s} {'min cos landmarks':>18s}"
    )
    for name, options in CONFIGS:
        try:
            encoder = LMKEncoder(device="cpu", **options)
        except Exception as exc:  # noqa: BLE001 - a backend this machine lacks: say so and go on
            print(f"{name:16s} not available: {exc}")
            continue
        warm = functools.partial(encoder.encode, short[:8])
        secs = {
            "long": timed(functools.partial(encoder.encode_multi, long_docs), args.repeats, warm),
            "short": timed(functools.partial(encoder.encode_multi, short), args.repeats, warm),
        }
        base = base or secs
        got = encoder.encode_multi(long_docs)
        pooled = min(min_cosine(r.pooled, g.pooled) for r, g in zip(ref_long, got))
        landmarks = min(min_cosine(r.vectors, g.vectors) for r, g in zip(ref_long, got))
        print(
            f"{name:16s} {tokens['long'] / secs['long']:11.0f} {base['long'] / secs['long']:7.2f} "
            f"{tokens['short'] / secs['short']:12.0f} {base['short'] / secs['short']:7.2f} "
            f"{pooled:15.5f} {landmarks:18.5f}"
        )


if __name__ == "__main__":
    main()
