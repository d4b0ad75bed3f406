"""Issue #49 item 1's quality gate for a bf16 default: landmark cosines of bf16 vs fp32 encodes.

Encodes the same dev-domain section bodies with ``LMKEncoder(dtype="fp32")`` and ``dtype="bf16"``
(PyTorch autocast; the numbers are bf16's, whatever the CPU: a CPU without native bf16 only runs
them slower) and prints the mean, the 0.1 % quantile and the minimum cosine of each landmark to
its fp32 twin, and of the pooled vectors. The gate: min landmark cosine >= 0.9999.

    LMK_DOCS_ROOT=... python research/scripts/bf16_gate.py --docs 300
"""

from __future__ import annotations

import argparse
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np

from lmk_rag import LMKEncoder
from lmk_rag.corpora.domains import domains_of, read_domain_pages
from lmk_rag.corpora.rst import query_sections


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--split", default="dev")
    args = ap.parse_args()
    pages = [p for d in domains_of(args.split) for p in read_domain_pages(d)]
    bodies = [page.text[s.start : s.end].strip() for page, s in query_sections(pages, min_body_chars=150)]
    texts = random.Random(0).sample(bodies, min(args.docs, len(bodies)))
    fp32, bf16 = LMKEncoder(device="cpu", dtype="fp32"), LMKEncoder(device="cpu", dtype="bf16")
    a, b = fp32.encode_multi(texts), bf16.encode_multi(texts)
    lm = np.concatenate([np.sum(x.vectors * y.vectors, axis=1) for x, y in zip(a, b)])
    pooled = np.array([float(x.pooled @ y.pooled) for x, y in zip(a, b)])
    print(f"{len(texts)} {args.split} sections, {len(lm)} landmarks")
    print(f"landmark cosine bf16 vs fp32: mean {lm.mean():.6f}  0.1% {np.quantile(lm, 0.001):.6f}  min {lm.min():.6f}")
    print(f"pooled cosine: mean {pooled.mean():.6f}  min {pooled.min():.6f}")
    print(f"gate (min landmark cosine >= 0.9999): {'met' if lm.min() >= 0.9999 else 'not met'}")


if __name__ == "__main__":
    main()
