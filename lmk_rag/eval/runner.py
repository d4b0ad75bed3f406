"""Run methods over tasks and collect scored rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from tqdm.auto import tqdm

from .methods import Method
from .metrics import passage_hits, retrieval_metrics, score_run
from .tasks import RetrievalTask


@dataclass
class EvalRow:
    """One method on one task: its metrics, encode time, tokens and per-query scores."""

    task: str
    method: str
    metrics: dict[str, float]
    encode_seconds: float
    tokens: int
    vectors_per_doc: float
    per_query: dict[str, dict[str, float]] = field(repr=False, default_factory=dict)
    query_meta: dict[str, dict[str, float]] = field(repr=False, default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        """Document tokens encoded per second."""
        return self.tokens / self.encode_seconds if self.encode_seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, object]:
        """The row as a JSON-ready dict (with tokens per second)."""
        d = asdict(self)
        d["tokens_per_second"] = self.tokens_per_second
        return d


def evaluate(tasks: Sequence[RetrievalTask], methods: Sequence[Method], progress: bool = True) -> list[EvalRow]:
    """Every method on every task; rows carry aggregate and per-query metrics."""
    rows: list[EvalRow] = []
    bar = tqdm(total=len(tasks) * len(methods), desc="eval", disable=not progress)
    for task in tasks:
        for method in methods:
            bar.set_postfix_str(f"{task.name} / {getattr(method, 'name', type(method).__name__)}")
            for result in method.run(task):
                run = score_run(result.scores, task.query_ids, task.doc_ids)
                aggregate, per_query = retrieval_metrics(task.qrels, run)
                if task.answers and result.passage_spans is not None:
                    hits = passage_hits(result.scores, task.query_ids, task.doc_ids, task.answers, result.passage_spans)
                    for qid, hit in hits.items():
                        per_query.setdefault(qid, {})["passage_hit@1"] = hit
                    aggregate["passage_hit@1"] = sum(hits.values()) / max(len(hits), 1)
                rows.append(
                    EvalRow(
                        task.name,
                        result.method + getattr(method, "suffix", ""),
                        aggregate,
                        result.encode_seconds,
                        result.tokens,
                        result.vectors_per_doc,
                        per_query,
                        task.query_meta,
                    )
                )
            bar.update(1)
    bar.close()
    return rows
