"""Paired significance against a baseline: exact small cases, task weighting, reports and the CLI."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from lmk_rag.errors import InvalidInputError
from lmk_rag.eval import EvalRow, write_report
from lmk_rag.eval.significance import compare_to_baseline, paired_test

from ..cli_runner import run_cli


def exact_sign_flip_p(diffs: np.ndarray) -> float:
    """Two-sided p of the sign-flip test by enumerating all 2^n sign patterns."""
    observed = abs(diffs.mean())
    means = [abs((diffs * np.array(signs)).mean()) for signs in itertools.product((1, -1), repeat=len(diffs))]
    return float(np.mean([m >= observed - 1e-12 for m in means]))


def test_small_sample_p_value_is_the_exact_sign_flip_test():
    x = np.array([0.9, 0.8, 1.0, 0.7, 0.6, 0.95, 0.85, 0.5])
    y = np.array([0.7, 0.8, 0.6, 0.75, 0.3, 0.9, 0.5, 0.55])
    delta, low, high, p = paired_test([x], [y])
    assert delta == pytest.approx((x - y).mean())
    assert p == pytest.approx(exact_sign_flip_p(x - y))  # 256 patterns < n_resamples: scipy enumerates them
    assert low <= delta <= high


def test_identical_runs_and_a_clear_shift():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 300)
    assert paired_test([base], [base]) == (0.0, 0.0, 0.0, 1.0)
    better = np.clip(base + 0.1 + rng.normal(0, 0.05, 300), 0, 1)
    delta, low, high, p = paired_test([better], [base], seed=1)
    assert 0.08 < low < delta < high < 0.12 and p < 0.001
    # Noise around zero: an interval that holds 0 and a large p.
    noisy = base + rng.normal(0, 0.2, 300)
    delta, low, high, p = paired_test([noisy], [base], seed=1)
    assert low < 0 < high and p > 0.05


def test_tasks_weigh_the_same_whatever_their_size():
    # Task a: 4 queries, +0.4 each; task b: 400 queries, 0 each. Mean of task means = 0.2 (pooled: ~0.004).
    a_x, a_y = np.full(4, 0.9), np.full(4, 0.5)
    b = np.linspace(0, 1, 400)
    delta, low, high, _ = paired_test([a_x, b], [a_y, b])
    assert delta == pytest.approx(0.2)
    assert low == pytest.approx(0.2) and high == pytest.approx(0.2)  # no spread within either task


def test_bad_inputs_are_named():
    with pytest.raises(InvalidInputError, match="same, non-zero number of tasks"):
        paired_test([], [])
    with pytest.raises(InvalidInputError, match="same queries"):
        paired_test([np.ones(3)], [np.ones(4)])


def row(task: str, method: str, values: dict[str, float], passage: dict[str, float] | None = None) -> EvalRow:
    per_query = {q: {"nDCG@10": v} for q, v in values.items()}
    for q, hit in (passage or {}).items():
        per_query[q]["passage_hit@1"] = hit
    metrics = {"nDCG@10": float(np.mean(list(values.values())))}
    return EvalRow(task, method, metrics, 1.0, 10, 1.0, per_query)


def test_compare_to_baseline_pairs_queries_per_task_and_over_tasks(tmp_path):
    q = [f"q{i}" for i in range(6)]
    rows = [
        row("t1", "base", dict(zip(q, [0.5, 0.4, 0.6, 0.5, 0.3, 0.2]))),
        row("t1", "lmk", dict(zip(q, [0.6, 0.5, 0.6, 0.7, 0.4, 0.3])), passage={"q0": 1.0, "q1": 0.0}),
        row("t2", "base", dict(zip(q[:3], [1.0, 0.0, 0.5]))),
        row("t2", "lmk", dict(zip(q[:3], [1.0, 0.5, 0.5]))),
    ]
    found = {(c.method, c.metric, c.tasks): c for c in compare_to_baseline(rows, "base")}
    # passage hit@1: the baseline has none, so no comparison; nDCG per task and over both.
    assert set(found) == {("lmk", "nDCG@10", ("t1",)), ("lmk", "nDCG@10", ("t2",)), ("lmk", "nDCG@10", ("t1", "t2"))}
    t1, t2 = found["lmk", "nDCG@10", ("t1",)], found["lmk", "nDCG@10", ("t2",)]
    both = found["lmk", "nDCG@10", ("t1", "t2")]
    assert t1.delta == pytest.approx(0.1) and t1.n_queries == 6
    assert t2.delta == pytest.approx(0.5 / 3) and t2.n_queries == 3
    assert both.delta == pytest.approx((t1.delta + t2.delta) / 2) and both.n_queries == 9
    with pytest.raises(InvalidInputError, match=r"baseline 'nope' is not a method.*\['base', 'lmk'\]"):
        compare_to_baseline(rows, "nope")
    paths = write_report(rows, tmp_path, comparisons=list(found.values()))
    text = paths["markdown"].read_text()
    assert "## paired comparison with base" in text and "| lmk | nDCG@10 | mean over 2 | 9 | +0.1333 |" in text
    saved = json.loads(paths["json"].read_text())["comparisons"]
    assert {tuple(c["tasks"]) for c in saved} == {("t1",), ("t2",), ("t1", "t2")}


@pytest.mark.slow
def test_cli_eval_baseline(tmp_path):
    args = ["eval", "--device", "cpu", "--methods", "lmk:64,bm25", "--lengths", "256", "--docs-per-length", "4"]
    out = tmp_path / "report"
    proc = run_cli(*args, "--baseline", "bm25", "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "## paired comparison with bm25" in proc.stdout and "| lmk-multi-k64 | nDCG@10 |" in proc.stdout
    assert json.loads((out / "report.json").read_text())["comparisons"]
    # A wrong name: the evaluation is still written, then the error names the rows to choose from.
    wrong = tmp_path / "wrong"
    bad = run_cli(*args, "--baseline", "BM25", "--out", str(wrong), "--no-progress")
    assert bad.returncode == 2 and "--baseline" in bad.stderr and "'bm25'" in bad.stderr
    assert (wrong / "report.md").is_file() and not json.loads((wrong / "report.json").read_text())["comparisons"]
