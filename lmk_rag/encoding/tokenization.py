"""Batched fast-tokenizer calls -> flat token ids and character offsets, bounded in memory for
huge texts, and treating special-token strings in text as text."""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInputError
from .inputs import find_unencodable, warn_unknown_words
from .landmarks import TokenizedBatch

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerBase

#: The most characters one token is counted for in a budget (English runs 4-5 per token).
MAX_CHARS_PER_TOKEN = 32

# Huge texts are tokenized in pieces of at most this many characters, at most CALL_CHARS per call.
PIECE_CHARS = 100_000
CALL_CHARS = 1_000_000


def split_at_whitespace(texts: list[str], limit: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Cut texts longer than ``limit`` characters into pieces that end at whitespace (hard cuts
    only where there is none); returns the pieces, each piece's text index and character offset."""
    if all(len(t) <= limit for t in texts):
        n = len(texts)
        return texts, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    pieces: list[str] = []
    owner: list[int] = []
    shift: list[int] = []
    for i, text in enumerate(texts):
        start = 0
        while len(text) - start > limit:
            cut = max(
                text.rfind(" ", start + limit // 2, start + limit), text.rfind("\n", start + limit // 2, start + limit)
            )
            cut = cut if cut > start else start + limit  # no whitespace: a hard cut
            pieces.append(text[start:cut])
            owner.append(i)
            shift.append(start)
            start = cut
        pieces.append(text[start:])
        owner.append(i)
        shift.append(start)
    return pieces, np.asarray(owner, dtype=np.int64), np.asarray(shift, dtype=np.int64)


def tokenize_texts(text_tokenizer: Tokenizer, texts: list[str], prefix: str = "") -> TokenizedBatch:
    """Batched fast-tokenizer calls -> flat ids and character offsets into ``texts``.

    Texts longer than :data:`PIECE_CHARS` are cut at whitespace into pieces, and pieces are
    tokenized :data:`CALL_CHARS` characters at a time, so the tokenizer's own per-token
    objects never hold more than that much text at once (a 20 MB file does not need GBs).
    Word-level pre-tokenizers split at whitespace anyway, so the tokens are the same.
    """
    inputs = [prefix + t for t in texts] if prefix else texts
    warn_unknown_words(texts, text_tokenizer)
    pieces, owner, shift = split_at_whitespace(inputs, PIECE_CHARS)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    calls = np.searchsorted(np.cumsum(lengths), np.arange(CALL_CHARS, int(lengths.sum()), CALL_CHARS))
    parts_ids, parts_offs, parts_counts = [], [], []
    for lo, hi in zip(np.concatenate([[0], calls]), np.concatenate([calls, [len(pieces)]])):
        if hi <= lo:
            continue
        try:
            encodings = text_tokenizer.encode_batch(pieces[lo:hi], add_special_tokens=False)
        except Exception as exc:  # the tokenizer's message names neither the text nor the cause
            bad = find_unencodable(texts)
            if bad is not None:
                raise bad from exc
            raise
        counts = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
        total = int(counts.sum())
        parts_ids.append(np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=total))
        offs = np.fromiter(
            chain.from_iterable(chain.from_iterable(e.offsets for e in encodings)), dtype=np.int64, count=2 * total
        ).reshape(-1, 2)
        parts_offs.append(offs + np.repeat(shift[lo:hi], counts)[:, None])
        parts_counts.append(counts)
        del encodings
    ids = np.concatenate(parts_ids) if parts_ids else np.zeros(0, dtype=np.int64)
    offs = np.concatenate(parts_offs) if parts_offs else np.zeros((0, 2), dtype=np.int64)
    piece_counts = np.concatenate(parts_counts) if parts_counts else np.zeros(0, dtype=np.int64)
    counts = np.bincount(owner, weights=piece_counts, minlength=len(texts)).astype(np.int64)
    starts, ends = offs[:, 0], offs[:, 1]
    if prefix:
        starts = np.maximum(starts - len(prefix), 0)
        ends = np.maximum(ends - len(prefix), 0)
    text_lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return TokenizedBatch(ids, starts, ends, offsets, text_lengths)


def text_tokenizer(tokenizer: PreTrainedTokenizerBase) -> Tokenizer:
    """A private copy of the Rust tokenizer that treats special-token strings in text as text."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    backend.encode_special_tokens = True
    return backend


def budget_tokens(tokenizer: Tokenizer, texts: list[str]) -> list[int]:
    """Tokens of each text by ``tokenizer`` (a ``tokenizers.Tokenizer``), without special tokens,
    and at least one per :data:`MAX_CHARS_PER_TOKEN` characters: a word the tokenizer cannot read
    (a 100k-character base64 run) is one unknown token to it, but thousands to an LLM."""
    try:
        encoded = tokenizer.encode_batch(texts, add_special_tokens=False)
    except Exception as exc:  # the tokenizer's message names neither the text nor the cause
        bad = find_unencodable(texts)
        if bad is not None:
            raise bad from exc
        raise
    return [max(len(e.ids), -(-len(t) // MAX_CHARS_PER_TOKEN)) for e, t in zip(encoded, texts)]


def load_token_counter(name: str) -> Callable[[str], int]:
    """A ``str -> int`` token counter from a tokenizer's name: a folder (or file) holding a Hugging
    Face ``tokenizer.json``, or a model id already in the local cache. Counts without special
    tokens, as an LLM's prompt holds them."""
    from pathlib import Path

    from tokenizers import Tokenizer

    path = Path(name).expanduser()
    file = path / "tokenizer.json" if path.is_dir() else path
    try:
        if file.is_file():
            tokenizer = Tokenizer.from_file(str(file))
        else:
            from transformers import AutoTokenizer

            backend = AutoTokenizer.from_pretrained(name, local_files_only=True).backend_tokenizer
            tokenizer = Tokenizer.from_str(backend.to_str())
    except Exception as exc:
        raise InvalidInputError(
            f"token_counter {name!r} names no tokenizer here ({type(exc).__name__}); give a folder holding a "
            "tokenizer.json (your LLM's), or a callable str -> int"
        ) from exc
    tokenizer.no_truncation()  # a tokenizer.json may pad or cut to its model's length: a count does neither
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)
