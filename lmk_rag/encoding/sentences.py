"""Sentence boundaries (character offsets) with pysbd, for sentence-granularity landmarks."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import numpy as np

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@lru_cache(maxsize=8)
def _segmenter(language: str) -> Any:
    import pysbd

    return pysbd.Segmenter(language=language, clean=False)


def sentence_starts(text: str, language: str = "en") -> np.ndarray:
    """Character offsets where each sentence after the first begins.

    Paragraph breaks are always boundaries; pysbd splits inside paragraphs (run per
    paragraph, which keeps it fast on long documents).
    """
    seg = _segmenter(language)
    starts: list[int] = []
    pos = 0
    paragraph_starts = [0] + [m.end() for m in _PARAGRAPH_BREAK.finditer(text)]
    paragraph_ends = paragraph_starts[1:] + [len(text)]
    for p_start, p_end in zip(paragraph_starts, paragraph_ends):
        if p_start > 0:
            starts.append(p_start)
        paragraph = text[p_start:p_end]
        if not paragraph.strip():
            continue
        pos = p_start
        for sentence in seg.segment(paragraph)[:-1]:
            found = text.find(sentence, pos, p_end)
            pos = (found if found >= 0 else pos) + len(sentence)
            starts.append(pos)
    return np.unique(np.asarray([s for s in starts if 0 < s < len(text)], dtype=np.int64))
