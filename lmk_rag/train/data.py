"""Training pairs: (query, positive[, negative][, answer span]) from JSONL, or built from raw text."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..encoding.sentences import sentence_starts
from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..corpora.rst import Page, Section
    from ..encoding.landmarks import TokenizedBatch
    from .config import TrainConfig


@dataclass(frozen=True)
class Pair:
    """A query, a text that answers it, an optional hard negative, and optionally where in the
    positive the answer lies (character span ``[start, end)``), so training can tell the landmarks
    that cover the answer from the other landmarks of the same text."""

    query: str
    positive: str
    negative: str | None = None
    answer: tuple[int, int] | None = None


def _answer_span(value: object, positive: str, where: str) -> tuple[int, int] | None:
    """A JSONL line's ``answer`` field: absent/null, or [start, end) with 0 <= start < end <= len(positive)."""
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise InvalidInputError(
            f"{where}: 'answer' must be [start, end] character offsets into 'positive', got {value!r}"
        )
    start, end = value
    if not 0 <= start < end <= len(positive):
        raise InvalidInputError(
            f"{where}: 'answer' [{start}, {end}] must satisfy 0 <= start < end <= len(positive) = {len(positive)}"
        )
    return (start, end)


def load_pairs(path: str | Path) -> list[Pair]:
    """JSONL lines with ``query`` (or ``anchor``), ``positive`` (or ``pos``), optional ``negative``
    and optional ``answer`` ([start, end) character offsets of the answer inside ``positive``)."""
    pairs = []
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            query = row.get("query", row.get("anchor"))
            positive = row.get("positive", row.get("pos"))
            negative = row.get("negative", row.get("neg"))
            if isinstance(positive, list):
                positive = positive[0] if positive else None
            if isinstance(negative, list):
                negative = negative[0] if negative else None
            if not isinstance(query, str) or not isinstance(positive, str):
                raise InvalidInputError(f"{path}:{n}: each line needs string 'query' and 'positive' fields")
            answer = _answer_span(row.get("answer"), positive, f"{path}:{n}")
            pairs.append(Pair(query, positive, negative if isinstance(negative, str) else None, answer))
    if not pairs:
        raise InvalidInputError(f"{path}: no training pairs found")
    return pairs


def save_pairs(pairs: Sequence[Pair], path: str | Path) -> int:
    """Write ``pairs`` as the JSONL :func:`load_pairs` reads back (the same pairs, field for field),
    so the pairs one build makes can feed several training runs; returns how many were written."""
    with Path(path).open("w", encoding="utf-8") as f:
        for pair in pairs:
            row: dict[str, object] = {"query": pair.query, "positive": pair.positive}
            if pair.negative:
                row["negative"] = pair.negative
            if pair.answer:
                row["answer"] = list(pair.answer)
            f.write(json.dumps(row) + "\n")
    return len(pairs)


def text_windows(
    texts: list[str], tokenize: Callable[[list[str]], TokenizedBatch], min_tokens: int, max_tokens: int, seed: int
) -> list[str]:
    """Cut documents into consecutive windows of min..max tokens (char slices via token offsets)."""
    rng = random.Random(seed)
    batch = tokenize(texts)
    windows = []
    for i, text in enumerate(texts):
        starts = batch.starts[batch.offsets[i] : batch.offsets[i + 1]]
        pos = 0
        while pos < len(starts):
            size = rng.randint(min_tokens, max_tokens)
            end = min(pos + size, len(starts))
            if end - pos >= min_tokens // 2:
                a = int(starts[pos])
                b = int(starts[end]) if end < len(starts) else len(text)
                windows.append(text[a:b].strip())
            pos = end
    return [w for w in windows if w]


def _sentence_starts_of(windows: list[str], workers: int) -> list[list[int]]:
    """Sentence starts of every window; pysbd (~100 KB/s a core) in ``workers`` processes."""
    if workers <= 1 or len(windows) < 1000:
        return [sentence_starts(w).tolist() for w in windows]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: the trainer may hold CUDA and threads by now, which forked children must not inherit
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [s.tolist() for s in pool.map(sentence_starts, windows, chunksize=256)]


def inverse_cloze_pairs(windows: list[str], keep_prob: float, seed: int, workers: int = 1) -> list[Pair]:
    """A sentence of each window as query, the window (without it, most of the time) as positive.

    ``workers`` > 1 splits sentences in that many processes; the pairs are the same.
    """
    rng = random.Random(seed)
    pairs = []
    for window, starts in zip(windows, _sentence_starts_of(windows, workers)):
        bounds = [0, *starts, len(window)]
        sentences = [(a, b) for a, b in zip(bounds, bounds[1:]) if 6 <= len(window[a:b].split()) <= 60]
        if len(sentences) < 2:
            continue
        a, b = sentences[rng.randrange(len(sentences))]
        query = " ".join(window[a:b].split())
        if rng.random() < keep_prob:
            pairs.append(Pair(query, window, answer=(a, b)))  # the sentence is still there: it is the answer
        else:
            pairs.append(Pair(query, (window[:a] + window[b:]).strip()))
    return pairs


def sample_batch(n_items: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """Indices of the batch for ``step``: a pure function of (seed, step), so resuming is exact."""
    rng = np.random.default_rng([seed, step])
    return rng.choice(n_items, size=min(batch_size, n_items), replace=False)


def section_pairs(pages: Sequence[Page], seed: int, min_chars: int = 1000, max_chars: int = 2000) -> list[Pair]:
    """A section heading as query, a passage of its page (headings removed) holding the section's start.

    The passage begins up to a fifth of its length before the section, so the answer is not
    always at the front; documentation headings are real, human-written statements of need.
    The hard negative is a passage of the same page that does not overlap the positive (so the
    landmarks learn which part of a document answers), when the page has room for one. The
    pair's ``answer`` is the part of the section's body inside the positive.
    """
    from ..corpora.rst import query_sections

    rng = random.Random(seed)

    def passage(text: str, at: int, size: int) -> tuple[int, str]:
        start = max(text.rfind(" ", 0, at), text.rfind("\n", 0, at)) + 1  # whole words
        return start, text[start : start + size].strip()

    def answer_in(text: str, start: int, size: int, section: Section) -> tuple[int, int] | None:
        raw = text[start : start + size]
        first = start + len(raw) - len(raw.lstrip())  # where the stripped positive begins in the page
        a, b = max(section.start, first) - first, min(section.end, start + size) - first
        length = len(raw.strip())
        a, b = min(a, length), min(b, length)
        return (a, b) if a < b else None

    pairs = []
    for page, section in query_sections(pages):
        size = rng.randint(min_chars, max_chars)
        start, positive = passage(page.text, max(0, section.start - rng.randint(0, size // 5)), size)
        others = [
            s.start for s in page.sections if s.start + size <= start or s.start >= start + size + 1
        ]  # passages that miss the positive
        negative = passage(page.text, rng.choice(others), size)[1] if others else ""
        if positive:
            answer = answer_in(page.text, start, size, section)
            pairs.append(Pair(section.title, positive, negative or None, answer))
    return pairs


def split_key(name: str) -> str:
    """A stable pseudo-random order of page names (which pages a capped domain keeps)."""
    import hashlib

    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def build_pairs(config: TrainConfig, tokenize: Callable[[list[str]], TokenizedBatch]) -> list[Pair]:
    """Every training pair the config asks for: its JSONL pairs, section pairs of its docs and domains,
    and inverse-cloze pairs from windows of all their text."""
    from ..corpora.domains import domains_of, read_domain_pages
    from ..corpora.rst import pages_as_texts, read_rst_pages
    from ..corpora.texts import SourceText, read_folder, training_texts

    pairs: list[Pair] = load_pairs(config.pairs) if config.pairs else []
    sources = []
    for spec in config.texts:
        sources += training_texts() if spec == "default" else read_folder(spec)
    for spec in config.sections:
        # The train half of the pages: heading -> section pairs, and their text for inverse cloze.
        pages = read_rst_pages(None if spec == "default" else spec, split="train")
        pairs += section_pairs(
            pages, config.seed, min_chars=4 * config.window_min_tokens, max_chars=4 * config.window_max_tokens
        )  # ~4 characters a token
        sources += pages_as_texts(pages)
    for spec in config.domains:
        for domain in domains_of(spec):
            # Other projects' documentation: the same heading -> passage pairs and inverse cloze.
            pages = read_domain_pages(domain, config.docs_root)
            pages = sorted(pages, key=lambda p: split_key(p.name))[: config.max_pages_per_domain]
            pairs += section_pairs(
                pages, config.seed, min_chars=4 * config.window_min_tokens, max_chars=4 * config.window_max_tokens
            )
            sources += [SourceText(p.name, p.text) for p in pages]
    if sources:
        windows = text_windows(
            [s.text for s in sources], tokenize, config.window_min_tokens, config.window_max_tokens, config.seed
        )
        pairs += inverse_cloze_pairs(windows, config.ict_keep_prob, config.seed, workers=os.cpu_count() or 1)
    if len(pairs) < config.batch_size:
        raise InvalidInputError(f"only {len(pairs)} training pairs; need at least batch_size={config.batch_size}")
    return pairs
