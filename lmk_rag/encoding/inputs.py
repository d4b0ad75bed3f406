"""Checks of what users hand the encoder, each failing with an error that names the argument and
what is allowed (never a crash deep in the tokenizer or a NaN vector), and warnings about text
the model cannot read."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence, Set
from typing import TYPE_CHECKING, TypeGuard

import torch

from ..errors import InvalidInputError, InvalidTypeError, NonFiniteVectorError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)


def check_texts(texts: object, name: str = "texts") -> list[str]:
    """A list of str, or a clear TypeError naming what was passed. Unordered or keyed
    containers (set, dict) are refused: their order, or what would be encoded, is not obvious."""
    if texts is None:
        raise InvalidTypeError(f"{name} must be a list of str, got None")
    if isinstance(texts, (str, bytes)):
        raise InvalidTypeError(f"{name} must be a list of str, got a bare {type(texts).__name__}; wrap it: [text]")
    if isinstance(texts, (Mapping, Set)) or not hasattr(texts, "__iter__"):
        raise InvalidTypeError(f"{name} must be a list of str, got {type(texts).__name__}")
    items = list(texts)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            hint = ""
            if hasattr(item, "get_content") and hasattr(item, "node_id"):
                hint = (
                    "; to use an lmk-rag index as a LlamaIndex vector store, wrap it: "
                    "from llama_index.vector_stores.lmk import LMKVectorStore; LMKVectorStore(index)"
                )
            raise InvalidTypeError(f"{name}[{i}] must be str, got {type(item).__name__}{hint}")
    return items


def find_unencodable(texts: Sequence[str], name: str = "texts") -> InvalidInputError | None:
    """An error naming the first text that is not valid Unicode (a lone surrogate), else None."""
    for i, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return InvalidInputError(
                f"{name}[{i}] is not valid Unicode: a lone surrogate {text[exc.start]!r} at character {exc.start} "
                "(text decoded with errors='surrogateescape'?); clean it, e.g. "
                "text.encode('utf-8', 'replace').decode('utf-8')"
            )
    return None


def check_granularity(granularity: object) -> int | str | list[int] | None:
    """int k > 0, 'sentence', None (no inner landmarks), or a list of k for variable granularity."""
    allowed = "a positive int k, 'sentence', None, or a list of positive ints (variable k)"
    if granularity is None:
        return None
    if granularity == "sentence":
        return "sentence"
    if isinstance(granularity, bool):
        raise InvalidTypeError(f"granularity must be {allowed}, got {granularity!r}")
    if isinstance(granularity, int):
        if granularity < 1:
            raise InvalidInputError(f"granularity must be {allowed}, got {granularity}")
        return granularity
    if isinstance(granularity, str):
        raise InvalidInputError(f"granularity must be {allowed}, got {granularity!r}")
    if isinstance(granularity, Sequence):
        ks = list(granularity)
        if not ks or not all(is_int_in(k, 1) for k in ks):
            raise InvalidInputError(f"granularity must be {allowed}, got {granularity!r}")
        return ks
    raise InvalidTypeError(f"granularity must be {allowed}, got {type(granularity).__name__}")


def check_int(name: str, value: object, minimum: int = 1, *, maximum: int | None = None, what: str = "") -> int:
    """``value`` if it is an int (a bool is not) from ``minimum`` up to ``maximum``, else an error
    naming ``name`` and what is allowed; ``what`` adds what the number means, e.g. " (a token budget)"."""
    if is_int_in(value, minimum, maximum):
        return value
    raise InvalidInputError(f"{name} must be {_int_range(minimum, maximum)}{what}, got {value!r}")


def check_optional_int(
    name: str, value: object, minimum: int = 1, *, maximum: int | None = None, what: str = ""
) -> int | None:
    """Like :func:`check_int`, with None allowed (and passed through)."""
    if value is None or is_int_in(value, minimum, maximum):
        return value
    raise InvalidInputError(f"{name} must be {_int_range(minimum, maximum)} or None{what}, got {value!r}")


def is_int_in(value: object, minimum: int, maximum: int | None = None) -> TypeGuard[int]:
    """Whether ``value`` is an int (a bool is not) from ``minimum`` up to ``maximum``: the test of
    :func:`check_int`, for values read leniently (a model's config) rather than refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return value >= minimum and (maximum is None or value <= maximum)


def _int_range(minimum: int, maximum: int | None) -> str:
    return f"an int >= {minimum}" if maximum is None else f"an int from {minimum} to {maximum:,}"


def check_number(name: str, value: object, minimum: float | None = None, maximum: float | None = None) -> float:
    """``value`` as a float if it is a finite int or float (a bool is not) within the bounds given,
    else an error naming ``name`` and what is allowed."""
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (minimum is None or value >= minimum)
        and (maximum is None or value <= maximum)
    ):
        return float(value)
    if minimum is not None and maximum is not None:
        allowed = f"a number in [{minimum:g}, {maximum:g}]"
    elif minimum is not None:
        allowed = f"a number >= {minimum:g}"
    elif maximum is not None:
        allowed = f"a number <= {maximum:g}"
    else:
        allowed = "a finite number"
    raise InvalidInputError(f"{name} must be {allowed}, got {value!r}")


#: The most results one search or context asks for: an int beyond it would overflow the engines'
#: 64-bit limits and allocations long before it returned anything useful.
MAX_K = 10_000


def check_k(k: object) -> int:
    """``k`` if it is an int from 1 to :data:`MAX_K`, else an error saying what is allowed."""
    return check_int("k", k, 1, maximum=MAX_K)


def check_finite(x: torch.Tensor, dtype: torch.dtype) -> None:
    """Refuse vectors with NaN or inf (an fp16 overflow) instead of handing them to an index."""
    if not torch.isfinite(x).all():
        hint = " (fp16 overflows on some models: try dtype='bf16' or 'fp32')" if dtype == torch.float16 else ""
        raise NonFiniteVectorError(f"the encoder produced non-finite vectors{hint}")


def warn_unknown_words(texts: Sequence[str], tokenizer: Tokenizer) -> None:
    """Warn when words are longer than a WordPiece tokenizer reads (100 characters for BERT):
    each becomes one unknown token, so a base64 blob, a hash or a 200k-character run of minified
    code is silently unsearchable."""
    model = getattr(tokenizer, "model", None)
    limit = getattr(model, "max_input_chars_per_word", None)
    if not isinstance(limit, int) or type(model).__name__ != "WordPiece":
        return
    pattern = re.compile(r"[^\W_]{" + str(limit + 1) + ",}")
    long_words = [m for text in texts for m in pattern.finditer(text)]
    if long_words:
        chars = sum(m.end() - m.start() for m in long_words)
        sample = long_words[0].group()[:24]
        logger.warning(
            "%d characters in %d words longer than %d characters (e.g. %r...) become one unknown token each and "
            "cannot be found by search (base64, hashes, minified code); split or drop them before indexing",
            chars,
            len(long_words),
            limit,
            sample,
        )


#: Arguments renamed so that one name means one thing everywhere: the old name -> the new.
RENAMED_ARGUMENTS = {"where": "filter"}


def refuse_renamed(method: str, given: Mapping[str, object]) -> None:
    """Refuse keyword arguments a method does not take, naming the new name of a renamed one."""
    for name in given:
        if name in RENAMED_ARGUMENTS:
            raise InvalidTypeError(
                f"{method}() takes {RENAMED_ARGUMENTS[name]}= (formerly {name}=); rename the argument"
            )
        raise InvalidTypeError(f"{method}() got an unexpected keyword argument {name!r}")
