"""The public article-extraction benchmark (scrapinghub/article-extraction-benchmark, 181 news and
blog pages with their article body written out) scored for lmk-rag's HTML reader and the
alternatives, with the benchmark's own measure: 4-word shingles, per-page precision and recall
normalised by the page's shingle count, averaged over pages, F1 of the two means.

    git archive HEAD ground-truth.json html | tar -x -C DATA   # in a clone of the benchmark
    python research/scripts/article_benchmark.py --data DATA
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from html_main_text import EXTRACTORS, lmk_rag_reader

_WORDS = re.compile(r"\w+")


def shingles(text: str, n: int = 4) -> Counter[tuple[str, ...]]:
    tokens = _WORDS.findall(text or "")
    return Counter(tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)) if tokens[i : i + n])


def tp_fp_fn(true: str, pred: str) -> tuple[float, float, float]:
    t, p = shingles(true), shingles(pred)
    tp = sum((t & p).values())
    fp = sum((p - t).values())
    fn = sum((t - p).values())
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (0.0, 0.0, 0.0)


def precision(tp: float, fp: float, fn: float) -> float:
    return 1.0 if fp == fn == 0 else (0.0 if tp == fp == 0 else tp / (tp + fp))


def recall(tp: float, fp: float, fn: float) -> float:
    return 1.0 if fp == fn == 0 else (0.0 if tp == fn == 0 else tp / (tp + fn))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True, help="folder with ground-truth.json and html/")
    args = ap.parse_args()
    truth = json.loads((args.data / "ground-truth.json").read_text(encoding="utf-8"))
    pages = {key: gzip.decompress((args.data / "html" / f"{key}.html.gz").read_bytes()) for key in truth}
    extractors = {**EXTRACTORS, "lmk-rag reader": lmk_rag_reader}
    print(f"{len(pages)} pages; 4-word shingles, as the benchmark's evaluate.py measures")
    for name, fn in extractors.items():
        rows = []
        for key, raw in pages.items():
            try:
                got = fn(raw)
            except ValueError:  # lmk-rag refuses a page without main text: an empty prediction
                got = ""
            rows.append(tp_fp_fn(truth[key]["articleBody"], got))
        p = statistics.mean(precision(*r) for r in rows if r[0] + r[1] > 0)
        r_ = statistics.mean(recall(*r) for r in rows if r[0] + r[2] > 0)
        print(f"{name:30s} F1 {2 * p * r_ / (p + r_):.3f}  P {p:.3f}  R {r_:.3f}")


if __name__ == "__main__":
    main()
