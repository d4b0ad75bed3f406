"""Landmark layout of 10,000 texts: lmk-rag (one tokenizer call, numpy) vs a per-text loop.

The reference loop is written in the style of the paper's reference code: the tokenizer is
called once per text, and landmarks are appended chunk by chunk in Python.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
from _texts import varied_texts

from lmk_rag import LMKEncoder


def reference(tokenizer, texts: list[str], k: int) -> list[list[int]]:
    out = []
    for text in texts:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"]
        seq = [tokenizer.cls_token_id]
        for i in range(0, max(len(ids), 1), k):
            seq += ids[i : i + k] + [tokenizer.sep_token_id]
        out.append(seq)
    return out


def main(n: int = 10_000, k: int = 32) -> None:
    texts = varied_texts(n, max_words=300)
    enc = LMKEncoder(device="cpu", granularity=k)
    t0 = time.perf_counter()
    ref = reference(enc.tokenizer, texts, k)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, layout, _ = enc.lay_out(texts)
    t_lmk = time.perf_counter() - t0
    assert all(np.array_equal(layout.sequence(i), np.asarray(r)) for i, r in enumerate(ref[:500]))
    print(f"{n} texts, k={k}, {int(layout.lengths.sum())} laid-out tokens, {os.cpu_count()} cores")
    print(f"per-text loop (tokenizer per text): {t_ref:6.2f} s")
    print(f"lmk-rag layout (one batched call):  {t_lmk:6.2f} s   ratio x{t_ref / t_lmk:.1f} faster")


if __name__ == "__main__":
    main()
