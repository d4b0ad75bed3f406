"""Paired significance of a method against a baseline, over the same queries.

A difference of 0.001 nDCG@10 on a few hundred queries says nothing by itself. For each method
and metric this gives the mean per-query difference to the baseline, a 95% confidence interval
from a bootstrap over queries, and a two-sided p-value from a paired randomization (sign-flip)
test, the usual tests of IR evaluation (Smucker et al., CIKM 2007), both from ``scipy.stats``.

Over several tasks the statistic is the mean over tasks of each task's mean difference, the
same weighting as the report's "mean over tasks" table: the bootstrap resamples queries within
each task (stratified), and the sign flips weigh each query by ``1 / (tasks * its task's queries)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import InvalidInputError
from .runner import EvalRow

COMPARED_METRICS = ("nDCG@10", "passage_hit@1")


@dataclass(frozen=True)
class PairedComparison:
    """``method`` minus ``baseline`` on ``metric`` over ``tasks`` (``n_queries`` pairs)."""

    method: str
    baseline: str
    metric: str
    tasks: tuple[str, ...]
    n_queries: int
    delta: float
    ci_low: float
    ci_high: float
    p_value: float

    def to_dict(self) -> dict[str, object]:
        """The comparison as a JSON-ready dict."""
        return asdict(self)


def paired_test(
    method: Sequence[np.ndarray],
    baseline: Sequence[np.ndarray],
    n_resamples: int = 9999,
    seed: int = 0,
) -> tuple[float, float, float, float]:
    """(delta, ci_low, ci_high, p_value) of ``method - baseline``; one array of per-query values per
    task, the two aligned query by query. Each task weighs the same."""
    from scipy import stats

    if len(method) != len(baseline) or not method:
        raise InvalidInputError("need the same, non-zero number of tasks for the method and the baseline")
    xs = [np.asarray(m, dtype=np.float64) for m in method]
    ys = [np.asarray(b, dtype=np.float64) for b in baseline]
    if any(x.shape != y.shape or x.ndim != 1 or len(x) == 0 for x, y in zip(xs, ys)):
        raise InvalidInputError("each task needs the same queries, at least one, for the method and the baseline")
    diffs = [x - y for x, y in zip(xs, ys)]
    delta = float(np.mean([d.mean() for d in diffs]))
    if all(np.all(d == 0) for d in diffs):
        return 0.0, 0.0, 0.0, 1.0  # identical runs: nothing to resample (scipy would warn on a degenerate sample)
    weights = np.concatenate([np.full(len(d), 1.0 / (len(diffs) * len(d))) for d in diffs])

    def weighted_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        total: np.ndarray = np.sum((x - y) * weights, axis=axis)
        return total

    rng = np.random.default_rng(seed)
    batch = max(1, min(1000, 4_000_000 // len(weights)))  # resamples at a time: ~32 MB per array, any query count
    flips = stats.permutation_test(
        (np.concatenate(xs), np.concatenate(ys)),
        weighted_difference,
        permutation_type="samples",  # paired: swap the two values of a query, i.e. flip its difference's sign
        vectorized=True,
        n_resamples=n_resamples,
        batch=batch,
        alternative="two-sided",
        rng=rng,
    )

    def mean_of_task_means(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        mean: np.ndarray = np.mean([s.mean(axis=axis) for s in samples], axis=0)
        return mean

    if all(len(d) > 1 for d in diffs):
        ci = stats.bootstrap(
            tuple(diffs),
            mean_of_task_means,
            n_resamples=n_resamples,
            batch=batch,
            vectorized=True,
            paired=False,  # several samples resampled independently: a bootstrap stratified by task
            method="percentile",
            rng=rng,
        ).confidence_interval
        low, high = float(ci.low), float(ci.high)
    else:
        low = high = float("nan")  # a task of one query has no spread to resample
    return delta, low, high, float(min(1.0, flips.pvalue))


def compare_to_baseline(
    rows: Sequence[EvalRow],
    baseline: str,
    metrics: Sequence[str] = COMPARED_METRICS,
    n_resamples: int = 9999,
    seed: int = 0,
) -> list[PairedComparison]:
    """Every other method against the rows named ``baseline``, per task and over all tasks both ran.

    A metric is compared only on queries both rows scored (passage hit@1 exists for landmark
    and chunk methods alone); the "all tasks" comparison needs more than one task."""
    if metrics is COMPARED_METRICS:  # the context metrics too, where the rows have them
        metrics = (*COMPARED_METRICS, *sorted({k for r in rows for k in r.metrics if k.startswith("ctx")}))
    names = sorted({r.method for r in rows})
    if baseline not in names:
        raise InvalidInputError(f"baseline {baseline!r} is not a method of this evaluation; use one of {names}")
    base_rows = {r.task: r for r in rows if r.method == baseline}
    results: list[PairedComparison] = []
    for name in (n for n in dict.fromkeys(r.method for r in rows) if n != baseline):
        mine = {r.task: r for r in rows if r.method == name and r.task in base_rows}
        for metric in metrics:
            per_task: dict[str, tuple[np.ndarray, np.ndarray]] = {}
            for task, row in mine.items():
                base = base_rows[task]
                qids = [q for q in row.per_query if metric in row.per_query[q] and metric in base.per_query.get(q, {})]
                if qids:
                    per_task[task] = (
                        np.array([row.per_query[q][metric] for q in qids]),
                        np.array([base.per_query[q][metric] for q in qids]),
                    )
            groups = [(task,) for task in per_task] + ([tuple(per_task)] if len(per_task) > 1 else [])
            for tasks in groups:
                delta, low, high, p = paired_test(
                    [per_task[t][0] for t in tasks], [per_task[t][1] for t in tasks], n_resamples, seed
                )
                n = sum(len(per_task[t][0]) for t in tasks)
                results.append(PairedComparison(name, baseline, metric, tasks, n, delta, low, high, p))
    return results
