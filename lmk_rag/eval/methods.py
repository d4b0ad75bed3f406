"""Retrieval methods compared on the same model: native CLS/mean, LMK single and multi-vector,
chunk-then-embed, and BM25. Each method encodes a task's corpus once and may yield several
result rows (e.g. LMK single-vector and multi-vector from one encode)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..encoder import LMKEncoder
from ..encoding.landmarks import build_layout, fixed_chunk_ends
from ..encoding.pooling import Pooling, check_pooling
from ..errors import InvalidInputError
from ..passages import DEFAULT_PASSAGE_RULE, PASSAGE_RULES, check_passage_rule, locate_passage
from .tasks import RetrievalTask


@dataclass
class MethodResult:
    """Scores (queries x documents), the top passage's span per (query, doc), and timing."""

    method: str
    scores: np.ndarray
    passage_spans: dict[tuple[int, int], tuple[int, int]] | None
    encode_seconds: float
    tokens: int
    vectors_per_doc: float


def _maxsim(
    q: np.ndarray,
    vectors: np.ndarray,
    counts: np.ndarray,
    spans: np.ndarray,
    locates: Sequence[Callable[..., Any]] = (np.argmax,),
) -> tuple[np.ndarray, list[dict[tuple[int, int], tuple[int, int]]]]:
    """Doc score = max over its vectors; also, per ``locate`` in ``locates``, the span of the
    vector it picks from each (q, top-10 doc)'s similarities (chunk-then-embed: the best chunk;
    landmarks: a passage rule of :func:`lmk_rag.passages.locate_passage`). The similarities and
    the ranking are computed once for all of them."""
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sims = q @ vectors.T
    scores = np.maximum.reduceat(sims, starts, axis=1)
    bests: list[dict[tuple[int, int], tuple[int, int]]] = [{} for _ in locates]
    for qi in range(len(q)):
        for di in np.argsort(-scores[qi])[:10]:
            seg = sims[qi, starts[di] : starts[di] + counts[di]]
            for locate, best in zip(locates, bests):
                a, b = spans[starts[di] + int(locate(seg))]
                best[(qi, int(di))] = (int(a), int(b))
    return scores, bests


def _normalise(x: np.ndarray) -> np.ndarray:
    unit: np.ndarray = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return unit


class Method:
    """Base: ``run(task)`` returns one or more :class:`MethodResult`."""

    name: str
    suffix: str = ""  # "@model" when the method names its own model

    def run(self, task: RetrievalTask) -> list[MethodResult]:  # pragma: no cover - interface
        """Encode the task's documents and queries; one result per row this method reports."""
        raise NotImplementedError


class NativePooling(Method):
    """The model as usually used: ``[CLS] text [SEP]``, truncated to its window, CLS or mean."""

    def __init__(self, pooling: Pooling, **encoder_kwargs: Any) -> None:
        probe = LMKEncoder(**encoder_kwargs)
        limit = probe.trained_max_length - 2
        self.encoder = LMKEncoder(pooling=pooling, granularity=None, truncate_tokens=limit, **encoder_kwargs)
        self.limit = limit
        self.name = pooling

    def run(self, task: RetrievalTask) -> list[MethodResult]:
        """The model's own pooling over each document truncated to its window."""
        t0 = time.perf_counter()
        docs = self.encoder.encode(task.doc_texts)
        seconds = time.perf_counter() - t0
        q = self.encoder.encode_query(task.query_texts)
        tokens = int(np.minimum(self.encoder.tokenize(task.doc_texts).n_tokens, self.limit).sum())
        return [MethodResult(f"{self.name}-truncated", q @ docs.T, None, seconds, tokens, 1.0)]


def passage_rules(passage: str | Sequence[str]) -> tuple[str, ...]:
    """One rule or several (``"peak,region"`` or a sequence), each checked, without repeats."""
    items = passage.split(",") if isinstance(passage, str) else list(passage)
    rules = tuple(dict.fromkeys(check_passage_rule(r.strip()) for r in items if r.strip()))
    if not rules:
        raise InvalidInputError(f"passage must name at least one of {PASSAGE_RULES}, got {passage!r}")
    return rules


class LandmarkPooling(Method):
    """LMK at granularity k: single vector (mean of landmarks) and multi-vector (MaxSim).

    With several passage rules, the documents are encoded once and each rule gets its own
    multi-vector row (``lmk-multi-k32-peak``, ``lmk-multi-k32-region``): same ranking, different
    passages, compared on the same vectors at the cost of one encoding."""

    def __init__(
        self,
        k: int | str,
        readout: Pooling = "lmk",
        passage: str | Sequence[str] = DEFAULT_PASSAGE_RULE,
        **encoder_kwargs: Any,
    ) -> None:
        self.passages = passage_rules(passage)
        self.encoder = LMKEncoder(pooling=readout, granularity=k, **encoder_kwargs)
        self.prefix = {"lmk": "lmk", "mean": "lmkmean", "lmk+mean": "lmkmix"}[readout]
        self.name = f"{self.prefix}-k{k}"
        self.k = k

    def run(self, task: RetrievalTask) -> list[MethodResult]:
        """Pooled (single-vector) and MaxSim (multi-vector) rankings from one encoding, with passages."""
        t0 = time.perf_counter()
        multi = self.encoder.encode_multi(task.doc_texts)
        seconds = time.perf_counter() - t0
        q = self.encoder.encode_query(task.query_texts)
        pooled = np.stack([m.pooled for m in multi])
        counts = np.array([len(m) for m in multi])
        vectors = np.concatenate([m.vectors for m in multi])
        spans = np.concatenate([np.asarray(m.spans) for m in multi])
        tokens = int(sum(m.n_tokens for m in multi))
        results = [MethodResult(f"{self.prefix}-k{self.k}", q @ pooled.T, None, seconds, tokens, 1.0)]
        locates = [lambda sims, r=rule: locate_passage(sims, r) for rule in self.passages]
        scores, bests = _maxsim(q, vectors, counts, spans, locates)
        for rule, best in zip(self.passages, bests):
            name = f"{self.prefix}-multi-k{self.k}" + (f"-{rule}" if len(self.passages) > 1 else "")
            results.append(MethodResult(name, scores, best, seconds, tokens, float(counts.mean())))
        return results


class ChunkThenEmbed(Method):
    """Fixed n-token chunks embedded alone (native layout and pooling); doc = max or mean of chunks."""

    def __init__(self, n: int, pooling: Pooling = "mean", **encoder_kwargs: Any) -> None:
        self.encoder = LMKEncoder(pooling=pooling, granularity=None, **encoder_kwargs)
        self.n = n

    def run(self, task: RetrievalTask) -> list[MethodResult]:
        """Fixed-token chunks embedded alone; documents ranked by their best chunk (max) and by the
        average of their chunks (avg)."""
        enc = self.encoder
        t0 = time.perf_counter()
        batch = enc.tokenize(task.doc_texts)
        ends, offsets = fixed_chunk_ends(batch.n_tokens, self.n)
        spans = build_layout(batch, ends, offsets, enc.special.landmark_id, enc.special.cls_id).spans
        doc_of = np.repeat(np.arange(len(task.doc_texts)), np.diff(offsets))
        chunk_texts = [task.doc_texts[d][a:b] for d, (a, b) in zip(doc_of, spans)]
        vectors = enc.encode(chunk_texts)
        seconds = time.perf_counter() - t0
        q = enc.encode_query(task.query_texts)
        counts = np.diff(offsets)
        scores, (best,) = _maxsim(q, vectors, counts, spans)
        sums = np.zeros((len(counts), vectors.shape[1]), dtype=np.float32)
        np.add.at(sums, doc_of, vectors)
        avg = _normalise(sums / counts[:, None])
        tokens = int(batch.n_tokens.sum())
        return [
            MethodResult(f"chunk-max-{self.n}", scores, best, seconds, tokens, float(counts.mean())),
            MethodResult(f"chunk-avg-{self.n}", q @ avg.T, None, seconds, tokens, 1.0),
        ]


class BM25(Method):
    """Lexical reference (bm25s, English stopwords)."""

    name = "bm25"

    def run(self, task: RetrievalTask) -> list[MethodResult]:
        """BM25 (bm25s, English stopwords) over the whole documents."""
        import bm25s

        t0 = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(task.doc_texts, stopwords="en", show_progress=False), show_progress=False)
        seconds = time.perf_counter() - t0
        tokens = sum(len(t.split()) for t in task.doc_texts)
        scores = np.zeros((len(task.query_texts), len(task.doc_texts)), dtype=np.float32)
        for i, query in enumerate(task.query_texts):
            q_tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
            scores[i] = retriever.get_scores(q_tokens) if q_tokens else 0.0
        return [MethodResult("bm25", scores, None, seconds, tokens, 1.0)]


_SPEC = re.compile(r"^(cls|mean|lmk|lmkmean|lmkmix|chunk|bm25)(?::(\w+))?(?:@(.+))?$")
METHOD_HELP = (
    "cls, mean, lmk:K (K an int or 'sentence'), lmkmean:K (the landmark layout read out as chunk token means), "
    "lmkmix:K (landmark state + chunk mean), chunk:N, bm25; add @MODEL to use another model"
)
_READOUT: dict[str, Pooling] = {"lmk": "lmk", "lmkmean": "mean", "lmkmix": "lmk+mean"}


def parse_methods(
    specs: str | list[str], passage: str | Sequence[str] = DEFAULT_PASSAGE_RULE, **encoder_kwargs: Any
) -> list[Method]:
    """``"cls,mean,lmk:32,chunk:128,bm25"`` -> methods sharing one loaded model; ``passage``: the
    rule(s) that name the passage of the landmark methods' hits (:mod:`lmk_rag.passages`;
    several, e.g. ``"peak,region"``, give one multi-vector row each from one encoding)."""
    rules = passage_rules(passage)  # checked before any model loads
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    methods: list[Method] = []
    for raw in items:
        spec = raw.strip()
        m = _SPEC.match(spec)
        if not m:
            raise InvalidInputError(f"unknown method {spec!r}; use {METHOD_HELP}")
        kind, arg, model = m.groups()
        kwargs = {**encoder_kwargs, "model": model} if model else encoder_kwargs
        if kind in ("cls", "mean"):
            method: Method = NativePooling(check_pooling(kind), **kwargs)
        elif kind in _READOUT:
            k: int | str = 32 if arg is None else (arg if arg == "sentence" else int(arg))
            method = LandmarkPooling(k, readout=_READOUT[kind], passage=rules, **kwargs)
        elif kind == "chunk":
            method = ChunkThenEmbed(int(arg or 128), **kwargs)
        else:
            method = BM25()
        method.suffix = f"@{Path(model).name}" if model else ""
        methods.append(method)
    return methods
