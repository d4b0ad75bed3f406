"""Passage ends at sentence and paragraph boundaries: snapping a span outward, clipping one to a budget."""

from __future__ import annotations

import re

from .counting import BatchCounter

# A sentence ends at . ! ? (closing quotes or brackets may follow) before whitespace, or at a blank
# line (a paragraph's end). A single line break is not a boundary: hard-wrapped text (Markdown, reST,
# plain text at 80 columns) breaks lines inside sentences.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+|\n[ \t]*\n\s*")


def snap(text: str, start: int, end: int, floor: int, ceiling: int, reach: int) -> tuple[int, int]:
    """Move ``start`` back to a sentence or paragraph start, and ``end`` on to a sentence end,
    each at most ``reach`` characters and never past a neighbouring passage (``floor``, ``ceiling``)."""
    if reach <= 0:
        return start, end
    starts = [m.end() for m in _SENTENCE_END.finditer(text, max(floor, start - reach), start + 1)]
    starts = [s for s in starts if s <= start]
    if start > 0 and starts:
        start = starts[-1]
    if end < len(text):
        found = _SENTENCE_END.search(text, max(end - 1, start), min(ceiling, end + reach))
        if found is not None and found.start() + 1 > end:
            end = past_closers(text, found.start() + (1 if text[found.start()] in ".!?" else 0), ceiling)
    return start, max(min(end, ceiling), start)


def past_closers(text: str, end: int, hi: int) -> int:
    """``end`` moved past closing quotes and brackets (a sentence's end includes them), not past ``hi``."""
    while end < hi and text[end] in "\"')]":
        end += 1
    return end


def clip(text: str, start: int, end: int, budget: int, count_tokens: BatchCounter) -> tuple[int, int, int] | None:
    """The longest prefix of ``text[start:end]`` (cut at whitespace, at a sentence end when one is
    in its last third) of at most ``budget`` tokens."""
    piece = text[start:end]
    n = count_tokens([piece])[0]
    if n <= budget:
        return (start, end, n) if piece.strip() else None
    cuts = [m.start() for m in re.finditer(r"\s+", piece)] + [len(piece)]
    lo, hi, best = 0, len(cuts) - 1, -1
    while lo <= hi:  # the last whitespace cut whose prefix fits
        mid = (lo + hi) // 2
        if count_tokens([piece[: cuts[mid]]])[0] <= budget:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best < 0:
        return None
    cut = cuts[best]
    sentence_ends = [m.end() for m in _SENTENCE_END.finditer(piece, 0, cut) if m.end() >= cut * 2 // 3]
    if sentence_ends and sentence_ends[-1] < cut:
        cut = sentence_ends[-1]
    kept = piece[:cut].rstrip()
    if not kept.strip():
        return None
    return start, start + len(kept), count_tokens([kept])[0]
