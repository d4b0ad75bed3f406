"""What reaches the LLM: answer coverage of a context of B tokens.

A context is the list of passages (document, character span) a method would hand an LLM for a
query, best first, within a token budget counted by one tokenizer for every method. Against the
query's answer span (the queried section; a short task's whole relevant document):

- ``recall``: the share of the answer's characters inside the context;
- ``hit``: 1 when the context touches the answer at all;
- ``full``: 1 when the context holds the whole answer;
- ``precision``: the share of the context's characters inside the answer (what of the budget
  was spent on the answer; characters stand for tokens, as every row's passages are text).

Rows: chunk-then-embed (chunks ranked over the whole corpus, best first: fixed token chunks,
LangChain's ``RecursiveCharacterTextSplitter`` and LlamaIndex's ``SentenceSplitter`` as their
users configure them), BM25 over the same chunks, and lmk-rag's context builder
(:mod:`lmk_rag.context`) over the landmark vectors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..context import DEFAULT_RULE, ContextRule, ScoredDocument, build_context
from ..encoder import LMKEncoder
from ..encoding.landmarks import build_layout, fixed_chunk_ends
from ..errors import InvalidInputError
from ..index.fusion import fuse
from ..types import MultiVector
from .tasks import RetrievalTask

if TYPE_CHECKING:
    from .runner import EvalRow

#: How the builder's candidate documents are ranked: MaxSim, or MaxSim fused with BM25 (the index's default).
Ranking = Literal["maxsim", "hybrid"]

Span = tuple[int, int, int]  # document index, start, end
CHUNKERS = ("tokens:N", "langchain", "llamaindex")


@dataclass
class ContextRun:
    """Per budget, per query (in task order): the context's passages."""

    method: str
    contexts: dict[int, list[list[Span]]]
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def answer_spans(task: RetrievalTask) -> dict[int, Span]:
    """Query index -> its answer: the task's answer span, else the whole relevant document."""
    doc_index = {d: i for i, d in enumerate(task.doc_ids)}
    out: dict[int, Span] = {}
    for qi, qid in enumerate(task.query_ids):
        if qid in task.answers:
            doc, a, b = task.answers[qid]
            out[qi] = (doc_index[doc], int(a), int(b))
            continue
        relevant = [d for d, grade in task.qrels.get(qid, {}).items() if grade > 0 and d in doc_index]
        if len(relevant) == 1:
            d = doc_index[relevant[0]]
            out[qi] = (d, 0, len(task.doc_texts[d]))
    return out


def precision(context: Sequence[Span], answer: Span) -> float:
    """The share of ``context``'s characters inside ``answer`` (0 for an empty context)."""
    doc, a, b = answer
    total = sum(max(e - s, 0) for _, s, e in context)
    inside = sum(max(min(e, b) - max(s, a), 0) for d, s, e in context if d == doc)
    return inside / total if total else 0.0


def coverage(context: Sequence[Span], answer: Span) -> tuple[float, float, float]:
    """(recall, hit, full) of one context against one answer span."""
    doc, a, b = answer
    if b <= a:
        return 0.0, 0.0, 0.0
    covered = np.zeros(b - a, dtype=bool)
    for d, s, e in context:
        if d == doc and e > a and s < b:
            covered[max(s, a) - a : min(e, b) - a] = True
    n = int(covered.sum())
    return n / (b - a), float(n > 0), float(n == b - a)


def context_metrics(task: RetrievalTask, run: ContextRun) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Aggregate and per-query ``ctxB_recall`` / ``_hit`` / ``_full`` / ``_precision`` for every budget B."""
    answers = answer_spans(task)
    per_query: dict[str, dict[str, float]] = {task.query_ids[qi]: {} for qi in answers}
    for budget, contexts in run.contexts.items():
        for qi, answer in answers.items():
            recall, hit, full = coverage(contexts[qi], answer)
            values = per_query[task.query_ids[qi]]
            values[f"ctx{budget}_recall"], values[f"ctx{budget}_hit"], values[f"ctx{budget}_full"] = recall, hit, full
            values[f"ctx{budget}_precision"] = precision(contexts[qi], answer)
    names = sorted({k for v in per_query.values() for k in v})
    aggregate = {k: float(np.mean([v[k] for v in per_query.values()])) for k in names} if per_query else {}
    return aggregate, per_query


# ---------------------------------------------------------------------- chunk rows
def chunk_spans(chunker: str, task: RetrievalTask, encoder: LMKEncoder) -> list[Span]:
    """Every chunk of the corpus as (document, start, end), by ``chunker``: ``tokens:N`` (N
    tokens of the encoder's tokenizer), ``langchain`` (``RecursiveCharacterTextSplitter(1000,
    200)``) or ``llamaindex`` (``SentenceSplitter(chunk_size=256, chunk_overlap=20)``)."""
    texts = task.doc_texts
    if chunker.startswith("tokens:"):
        n = int(chunker.split(":", 1)[1])
        batch = encoder.tokenize(texts)
        ends, offsets = fixed_chunk_ends(batch.n_tokens, n)
        spans = build_layout(batch, ends, offsets, encoder.special.landmark_id, encoder.special.cls_id).spans
        doc_of = np.repeat(np.arange(len(texts)), np.diff(offsets))
        return [(int(d), int(a), int(b)) for d, (a, b) in zip(doc_of, spans)]
    if chunker == "langchain":
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200, add_start_index=True)
        out = []
        for d, text in enumerate(texts):
            for doc in splitter.create_documents([text]):
                start = int(doc.metadata["start_index"])
                out.append((d, start, start + len(doc.page_content)))
        return out
    if chunker == "llamaindex":
        from llama_index.core import Document
        from llama_index.core.node_parser import SentenceSplitter

        parser = SentenceSplitter(chunk_size=256, chunk_overlap=20)
        out = []
        for d, text in enumerate(texts):
            for node in parser.get_nodes_from_documents([Document(text=text)]):
                first, last = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
                if first is not None and last is not None:
                    out.append((d, int(first), int(last)))
        return out
    raise InvalidInputError(f"unknown chunker {chunker!r}; use one of {CHUNKERS}")


def fill_budget(
    ranked: Sequence[Span],
    texts: Sequence[str],
    budget: int,
    count: Callable[[str], int],
    clip: Callable[[str, int], int],
) -> list[Span]:
    """Chunks best first while they fit; the first that does not is clipped to what is left."""
    out: list[Span] = []
    left = budget
    for d, a, b in ranked:
        n = count(texts[d][a:b])
        if n <= left:
            out.append((d, a, b))
            left -= n
            if left == 0:
                break
            continue
        end = clip(texts[d][a:b], left)
        if end > 0:
            out.append((d, a, a + end))
        break
    return out


class TokenBudget:
    """Token counts and clipping by the encoder's tokenizer, the one yardstick every row uses."""

    def __init__(self, encoder: LMKEncoder) -> None:
        self.encoder = encoder
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Tokens of ``text`` by the budget's tokenizer (cached)."""
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self.encoder.count_tokens([text])[0]
        return n

    def counts(self, texts: list[str]) -> list[int]:
        """Tokens of each text."""
        return [self.count(t) for t in texts]

    def clip(self, text: str, tokens: int) -> int:
        """Characters of ``text`` its first ``tokens`` tokens cover."""
        offsets = self.encoder._text_tokenizer.encode(text, add_special_tokens=False).offsets
        return int(offsets[min(tokens, len(offsets)) - 1][1]) if tokens > 0 and offsets else 0


class ChunkContexts:
    """Chunks of a corpus ranked for each query (dense: the encoder's vectors; ``bm25``), contexts
    filled best first."""

    def __init__(self, chunker: str, ranker: str, encoder: LMKEncoder, budget: TokenBudget) -> None:
        if ranker not in ("dense", "bm25"):
            raise InvalidInputError(f"ranker must be dense or bm25, got {ranker!r}")
        self.chunker, self.ranker, self.encoder, self.budget = chunker, ranker, encoder, budget
        label = chunker.replace("tokens:", "chunk")
        self.name = f"{label}-{ranker}" if ranker == "bm25" else label

    def run(self, task: RetrievalTask, budgets: Sequence[int]) -> ContextRun:
        """Chunk the task's documents, rank the chunks per query and fill each budget with the best."""
        t0 = time.perf_counter()
        spans = chunk_spans(self.chunker, task, self.encoder)
        texts = [task.doc_texts[d][a:b] for d, a, b in spans]
        scores = self._scores(texts, task.query_texts)
        seconds = time.perf_counter() - t0
        contexts: dict[int, list[list[Span]]] = {b: [] for b in budgets}
        for qi in range(len(task.query_texts)):
            order = np.argsort(-scores[qi], kind="stable")
            ranked = [spans[j] for j in order[:200]]
            for b in budgets:
                contexts[b].append(fill_budget(ranked, task.doc_texts, b, self.budget.count, self.budget.clip))
        return ContextRun(self.name, contexts, seconds)

    def _scores(self, chunks: list[str], queries: list[str]) -> np.ndarray:
        if self.ranker == "dense":
            scores: np.ndarray = self.encoder.encode_query(queries) @ self.encoder.encode(chunks).T
            return scores
        import bm25s

        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(chunks, stopwords="en", show_progress=False), show_progress=False)
        out = np.zeros((len(queries), len(chunks)), dtype=np.float32)
        for i, q in enumerate(queries):
            words = bm25s.tokenize([q], stopwords="en", show_progress=False, return_ids=False)[0]
            out[i] = retriever.get_scores(words) if words else 0.0
        return out


# ---------------------------------------------------------------------- lmk-rag's builder
class LandmarkContexts:
    """The context builder over a task's landmark vectors: documents ranked by MaxSim (or
    ``hybrid``: BM25 and MaxSim fused as the Qdrant index does), the top ``k`` handed to
    :func:`lmk_rag.context.build_context` with each ``rule``."""

    def __init__(
        self,
        encoder: LMKEncoder,
        budget: TokenBudget,
        *,
        k: int = 10,
        ranking: Ranking = "maxsim",
        rules: dict[str, ContextRule] | None = None,
        min_score: float | None = None,
    ) -> None:
        if ranking not in ("maxsim", "hybrid"):
            raise InvalidInputError(f"ranking must be maxsim or hybrid, got {ranking!r}")
        self.encoder, self.budget, self.k, self.ranking = encoder, budget, k, ranking
        self.rules = rules or {"": DEFAULT_RULE}
        self.min_score = min_score
        self.name = "lmk-context" if ranking == "hybrid" else "lmk-context-maxsim"  # hybrid: the index's default
        self._encoded: dict[str, tuple[list[MultiVector], np.ndarray, float]] = {}

    def encode(self, task: RetrievalTask) -> tuple[list[MultiVector], np.ndarray, float]:
        """The task's landmark vectors (each document's, the queries', seconds taken), encoded once
        however many rules and budgets run."""
        if task.name not in self._encoded:
            t0 = time.perf_counter()
            multi = self.encoder.encode_multi(task.doc_texts)
            q = self.encoder.encode_query(task.query_texts)
            self._encoded[task.name] = (list(multi), q, time.perf_counter() - t0)
        return self._encoded[task.name]

    def doc_scores(self, task: RetrievalTask) -> np.ndarray:
        """(queries, documents) ranking scores: MaxSim, or MaxSim fused with BM25 (``ranking``)."""
        multi, q, _ = self.encode(task)
        maxsim = np.stack([(m.vectors @ q.T).max(axis=0) for m in multi], axis=1)
        if self.ranking == "maxsim":
            return maxsim
        from .methods import BM25

        bm25 = BM25().run(task)[0].scores
        pool = max(10 * self.k, 50)
        out = np.full_like(maxsim, -np.inf)
        for qi in range(len(q)):
            lexical_top = set(np.argsort(-bm25[qi])[:pool].tolist())
            ids = np.union1d(np.argsort(-maxsim[qi])[:pool], list(lexical_top))
            lexical = [float(bm25[qi, j]) if j in lexical_top and bm25[qi, j] > 0 else None for j in ids]
            out[qi, ids] = fuse(maxsim[qi, ids], lexical, "weighted", 0.5)
        return out

    def run(self, task: RetrievalTask, budgets: Sequence[int]) -> list[ContextRun]:
        """One context per query and budget from lmk-rag's builder, for each passage rule."""
        multi, q, seconds = self.encode(task)
        scores = self.doc_scores(task)
        runs = []
        for label, rule in self.rules.items():
            contexts: dict[int, list[list[Span]]] = {b: [] for b in budgets}
            for qi, query in enumerate(task.query_texts):
                top = np.argsort(-scores[qi], kind="stable")[: self.k]
                candidates = [
                    ScoredDocument(
                        str(d), float(scores[qi, d]), task.doc_texts[d], tuple(multi[d].spans), multi[d].vectors @ q[qi]
                    )
                    for d in top
                ]
                for b in budgets:
                    passages = build_context(query, candidates, b, self.budget.counts, rule, min_score=self.min_score)
                    contexts[b].append([(int(p.id), p.span[0], p.span[1]) for p in passages])
            runs.append(ContextRun(self.name + (f"-{label}" if label else ""), contexts, seconds))
        return runs


def context_rows(
    tasks: Sequence[RetrievalTask],
    budgets: Sequence[int],
    encoder: LMKEncoder,
    chunk_encoder: LMKEncoder,
    *,
    ranking: Ranking = "hybrid",
    progress: bool = True,
) -> list[EvalRow]:
    """``lmk-rag eval --context-tokens``: per task, one row per context method with the
    ``ctxB_recall`` / ``ctxB_hit`` / ``ctxB_full`` metrics of every budget B. Chunk rows use
    ``chunk_encoder`` (chunk-then-embed with a plain model); the builder row, ``encoder``, from the
    ``ranking`` the Qdrant index uses by default (``hybrid``: BM25 + MaxSim)."""
    from tqdm.auto import tqdm

    from .runner import EvalRow

    budget = TokenBudget(encoder)
    methods: list[Any] = [ChunkContexts(c, "dense", chunk_encoder, budget) for c in ("tokens:128", "tokens:256")]
    methods += [ChunkContexts(c, "dense", chunk_encoder, budget) for c in ("langchain", "llamaindex")]
    methods += [ChunkContexts("tokens:128", "bm25", chunk_encoder, budget)]
    builder = LandmarkContexts(encoder, budget, ranking=ranking)
    rows = []
    bar = tqdm(total=len(tasks) * (len(methods) + 1), desc="contexts", disable=not progress)
    for task in tasks:
        runs = []
        for method in methods:
            runs.append(method.run(task, budgets))
            bar.update(1)
        runs += builder.run(task, budgets)
        bar.update(1)
        for run in runs:
            aggregate, per_query = context_metrics(task, run)
            rows.append(EvalRow(task.name, run.method, aggregate, run.seconds, 0, 0.0, per_query, task.query_meta))
    bar.close()
    return rows
