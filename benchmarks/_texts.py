"""Deterministic benchmark texts of varied length, built from the sample corpus."""

from __future__ import annotations

import random
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"


def varied_texts(n: int, max_words: int, seed: int = 0) -> list[str]:
    words = " ".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.md"))).split()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(5, max_words)
        start = rng.randrange(0, len(words) - length)
        out.append(" ".join(words[start : start + length]))
    return out
