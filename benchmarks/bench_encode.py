"""Encode throughput: lmk-rag vs sentence-transformers on the same model and texts.

Prints texts/s and tokens/s for each, and the ratio. Texts are up to ~512 tokens, so the
comparison is of batching and pooling, not of windowing. Both run under the same torch
thread settings, in one process, on identical inputs.
"""

from __future__ import annotations

import os
import platform
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from _texts import varied_texts

from lmk_rag import LMKEncoder
from lmk_rag.models import packaged_model_path


def timed(fn, repeats: int = 2) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


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
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"{n} texts, {n_tokens} content tokens (mean {n_tokens / n:.0f}/text)")
    base = rows[0][1]
    for name, secs in rows:
        print(
            f"{name:45s} {secs:7.2f} s  {n / secs:7.1f} texts/s  {n_tokens / secs:8.0f} tok/s  "
            f"speed vs sentence-transformers x{base / secs:.2f}"
        )


if __name__ == "__main__":
    main()
