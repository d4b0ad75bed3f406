"""Encode throughput: lmk-rag vs sentence-transformers on the same model and texts.

Prints texts/s and tokens/s for each, and the ratio. By default texts are up to ~512 tokens, so
the comparison is of batching and pooling, not of windowing. ``--long``: long documents (dev-domain
pages of 1,000-2,500 words with ``LMK_DOCS_ROOT``, else long texts from the sample corpus), lmk-rag's
multi-vector encode (``encode_multi``, every landmark vector) against chunk-then-embed with
sentence-transformers (the same model over 128-token chunks of the same documents), and the ratio.
Both run under the same torch thread settings, in one process, on identical inputs, best of 2.

    python benchmarks/bench_encode.py [--long] [--docs 24]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from _texts import varied_texts
from _timing import machine_line, timed

from lmk_rag import LMKEncoder
from lmk_rag.folders.models import packaged_model_path


def chunks_of(tokenizer, docs: list[str], size: int = 128) -> list[str]:
    """Each document cut into pieces of ``size`` tokens (by the tokenizer's offsets), as a
    chunk-then-embed pipeline would."""
    out = []
    for doc in docs:
        offsets = tokenizer(doc, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        for start in range(0, len(offsets), size):
            piece = offsets[start : start + size]
            out.append(doc[piece[0][0] : piece[-1][1]])
    return out


def long_main(n_docs: int) -> None:
    from bench_backends import long_documents
    from sentence_transformers import SentenceTransformer

    docs = long_documents(n_docs)
    st = SentenceTransformer(str(packaged_model_path()), device="cpu")
    lmk = LMKEncoder(device="cpu")
    chunks = chunks_of(st.tokenizer, docs)
    n_tokens = int(lmk.tokenize(docs).n_tokens.sum())
    rows = [
        ("sentence-transformers, 128-token chunks", timed(lambda: st.encode(chunks, batch_size=32))),
        ("lmk-rag encode_multi (every landmark)", timed(lambda: lmk.encode_multi(docs))),
    ]
    print(machine_line())
    print(f"{len(docs)} long documents, {n_tokens} tokens, {len(chunks)} chunks of 128 tokens")
    base = rows[0][1]
    for name, secs in rows:
        print(f"{name:42s} {secs:7.2f} s  {n_tokens / secs:8.0f} tok/s  time vs chunk-then-embed x{secs / base:.2f}")


def main(n: int = 512) -> None:
    from sentence_transformers import SentenceTransformer

    texts = varied_texts(n, max_words=380)
    st = SentenceTransformer(str(packaged_model_path()), device="cpu")
    st.max_seq_length = 512
    lmk = LMKEncoder(device="cpu", batch_size=32)
    mean = LMKEncoder(device="cpu", pooling="mean", granularity=None, batch_size=32)
    n_tokens = int(lmk.tokenize(texts).n_tokens.sum())

    rows = [
        ("sentence-transformers encode (mean)", timed(lambda: st.encode(texts, batch_size=32))),
        ("lmk-rag encode pooling=mean, native layout", timed(lambda: mean.encode(texts))),
        ("lmk-rag encode pooling=lmk, k=32", timed(lambda: lmk.encode(texts))),
    ]
    print(machine_line())
    print(f"{n} texts, {n_tokens} content tokens (mean {n_tokens / n:.0f}/text)")
    base = rows[0][1]
    for name, secs in rows:
        print(
            f"{name:45s} {secs:7.2f} s  {n / secs:7.1f} texts/s  {n_tokens / secs:8.0f} tok/s  "
            f"speed vs sentence-transformers x{base / secs:.2f}"
        )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", action="store_true", help="long documents vs 128-token chunk-then-embed")
    parser.add_argument("--docs", type=int, default=24, help="long documents (default 24)")
    args = parser.parse_args()
    long_main(args.docs) if args.long else main()
