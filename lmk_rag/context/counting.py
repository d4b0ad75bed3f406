"""The budget's yardstick: token counters (the encoder's, the user's, a tokenizer's) and the budget check."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..encoding.inputs import check_int, is_int_in
from ..encoding.tokenization import load_token_counter
from ..errors import InvalidInputError, InvalidTypeError

if TYPE_CHECKING:
    from ..encoder import LMKEncoder

BatchCounter = Callable[[list[str]], list[int]]


def check_max_tokens(max_tokens: object) -> int:
    """``max_tokens`` if it is a positive int (a token budget), else an error naming it."""
    return check_int("max_tokens", max_tokens, what=" (a token budget)")


def user_counter(counter: object) -> BatchCounter:
    """A user's ``str -> int`` token counter as a batch counter whose failures name the counter."""
    if not callable(counter):
        raise InvalidTypeError(f"token_counter must be a callable str -> int, got {type(counter).__name__}")

    def count(texts: list[str]) -> list[int]:
        out = []
        for text in texts:
            try:
                n = counter(text)
            except Exception as exc:
                raise InvalidInputError(
                    f"token_counter raised {type(exc).__name__}: {exc} (on a text of {len(text)} characters); "
                    "it must take a str and return its token count"
                ) from exc
            if not is_int_in(int(n) if isinstance(n, np.integer) else n, 0):
                raise InvalidInputError(f"token_counter must return an int >= 0, returned {n!r}")
            out.append(int(n))
        return out

    return count


def token_counter_of(encoder: LMKEncoder, token_counter: Callable[[str], int] | str | None) -> BatchCounter:
    """The budget's counter: the user's ``str -> int`` (checked, see :func:`user_counter`) or the
    tokenizer it names (a folder with ``tokenizer.json``), else the encoder's (``count_tokens``)."""
    if isinstance(token_counter, str):
        token_counter = load_token_counter(token_counter)
    return user_counter(token_counter) if token_counter is not None else encoder.count_tokens
