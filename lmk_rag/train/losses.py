"""The training objectives over landmark states: MaxSim scores, the landmark localisation loss and
landmark distillation (the contrastive InfoNCE terms use these in :class:`~lmk_rag.train.Trainer`)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def maxsim_scores(q: torch.Tensor, states: torch.Tensor, text_of_chunk: torch.Tensor, n_docs: int) -> torch.Tensor:
    """(queries, documents) MaxSim: each query's best dot product over each document's landmark
    states (``text_of_chunk`` names each state's document; documents without one score -1e4)."""
    sims = q @ states.T
    index = text_of_chunk.unsqueeze(0).expand_as(sims)
    out = torch.full((len(q), n_docs), -1e4, device=q.device, dtype=sims.dtype)
    return out.scatter_reduce(1, index, sims, reduce="amax", include_self=True)


def answer_landmarks(spans: np.ndarray, text_of_chunk: np.ndarray, answers: list[tuple[int, int] | None]) -> np.ndarray:
    """Mask of the landmarks whose chunk covers their text's answer span (texts past ``answers``,
    or with ``None``, have none): overlap >= half of the shorter of chunk and answer, the rule
    passage hit@1 scores with (:func:`lmk_rag.passages.spans_cover`)."""
    from ..passages import spans_cover

    known = text_of_chunk < len(answers)
    bounds = np.array([a if a is not None else (0, 0) for a in answers], dtype=np.int64).reshape(-1, 2)
    mask: np.ndarray = known & spans_cover(spans, bounds[np.where(known, text_of_chunk, 0)])
    return mask


def _segment_logsumexp(values: torch.Tensor, segment: torch.Tensor, n: int) -> torch.Tensor:
    """logsumexp of ``values`` within each of ``n`` segments (-inf for an empty one)."""
    top = torch.full((n,), -torch.inf, device=values.device, dtype=values.dtype)
    top = top.scatter_reduce(0, segment, values.detach(), reduce="amax").nan_to_num(neginf=0.0)
    shifted = (values - top[segment]).exp()
    total = torch.zeros(n, device=values.device, dtype=values.dtype).index_add(0, segment, shifted)
    return total.log() + top


def landmark_loss(
    q: torch.Tensor, states: torch.Tensor, owner: torch.Tensor, positive: torch.Tensor, temperature: float
) -> torch.Tensor | None:
    """Multi-positive InfoNCE within each query's own landmarks: -log(sum over the answer's
    landmarks / sum over all its landmarks) of exp(cos / temperature), mean over the queries that
    have both kinds. ``owner[m]`` is the query landmark m belongs to (-1: none), ``positive[m]``
    whether it covers the answer; ``q`` and ``states`` are normalised. None when no query qualifies."""
    mine = owner >= 0
    if not bool(mine.any()):
        return None
    who, vectors, hit = owner[mine], states[mine], positive[mine]
    sims = (q[who] * vectors).sum(-1) / temperature
    n = len(q)
    counts = torch.bincount(who, minlength=n)
    hits = torch.bincount(who[hit], minlength=n)
    usable = (hits > 0) & (hits < counts)
    if not bool(usable.any()):
        return None
    every = _segment_logsumexp(sims, who, n)
    answer = _segment_logsumexp(sims[hit], who[hit], n)
    return (every - answer)[usable].mean()


def distill_loss(states: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean (1 - cosine) between each landmark state and the base's embedding of its chunk alone."""
    return (1 - F.cosine_similarity(states, teacher, dim=-1)).mean()
