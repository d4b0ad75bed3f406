"""The context over documents encoded without an index: what ``index.context`` builds, from
texts and their :meth:`~lmk_rag.LMKEncoder.encode_multi` vectors ranked by MaxSim."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..encoding.inputs import check_k, check_texts
from ..errors import InvalidInputError
from .builder import build_context, check_min_score
from .counting import check_max_tokens, token_counter_of
from .model import CONTEXT_DOCUMENTS, DEFAULT_MAX_TOKENS, ContextRule, Passage, ScoredDocument

if TYPE_CHECKING:
    from ..encoder import LMKEncoder
    from ..types import MultiVector


def context(
    query: str,
    texts: Sequence[str],
    encoded: Sequence[MultiVector],
    encoder: LMKEncoder,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    ids: Sequence[str] | None = None,
    k: int | None = None,
    token_counter: Callable[[str], int] | str | None = None,
    min_score: float | None = None,
    rule: ContextRule | None = None,
) -> list[Passage]:
    """:meth:`MultiVectorIndex.context <lmk_rag.index.MultiVectorIndex.context>` without an index:
    the passages, best first, for ``query`` within ``max_tokens`` from documents ``texts`` encoded by
    ``encoder.encode_multi`` (``encoded``), ranked by MaxSim. ``ids`` name the documents (default
    their positions as str)."""
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be str, got {type(query).__name__}")
    budget = check_max_tokens(max_tokens)
    floor = check_min_score(min_score)
    items = check_texts(texts)
    if len(encoded) != len(items):
        raise InvalidInputError(f"encoded has {len(encoded)} entries for {len(items)} texts; encode each text once")
    names = [str(i) for i in range(len(items))] if ids is None else check_texts(ids, "ids")
    if any(not name for name in names):
        raise InvalidInputError("ids must be non-empty str")
    if len(names) != len(items):
        raise InvalidInputError(f"ids has {len(names)} entries for {len(items)} texts")
    count = check_k(CONTEXT_DOCUMENTS if k is None else k)
    q = encoder.encode_query(query)
    sims = [m.vectors @ q for m in encoded]
    scores = np.array([float(s.max()) if len(s) else -1.0 for s in sims])  # MaxSim
    candidates = [
        ScoredDocument(names[i], float(scores[i]), items[i], tuple(encoded[i].spans), sims[i])
        for i in np.argsort(-scores, kind="stable")[:count]
    ]
    return build_context(query, candidates, budget, token_counter_of(encoder, token_counter), rule, min_score=floor)
