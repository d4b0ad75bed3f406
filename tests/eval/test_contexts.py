"""`lmk-rag eval --context-tokens`: answer coverage of contexts, against hand-computed values; the
chunkers' spans map back to the text; every row fits its budget; the report and the CLI."""

from __future__ import annotations

import pytest

from lmk_rag.eval import default_haystack, needle_tasks
from lmk_rag.eval.contexts import (
    ChunkContexts,
    ContextRun,
    LandmarkContexts,
    TokenBudget,
    answer_spans,
    chunk_spans,
    context_metrics,
    coverage,
    fill_budget,
    precision,
)
from lmk_rag.eval.tasks import RetrievalTask

from ..cli_runner import run_cli


def test_coverage_by_hand():
    answer = (0, 100, 200)
    assert coverage([(0, 0, 150)], answer) == (0.5, 1.0, 0.0)
    assert coverage([(0, 90, 130), (0, 120, 210)], answer) == (1.0, 1.0, 1.0)  # overlaps counted once
    assert coverage([(1, 100, 200)], answer) == (0.0, 0.0, 0.0)  # another document
    assert coverage([], answer) == (0.0, 0.0, 0.0)
    assert precision([(0, 0, 150)], answer) == pytest.approx(50 / 150)  # 100..150 of 0..150 is the answer
    assert precision([(0, 110, 130), (1, 0, 20)], answer) == pytest.approx(20 / 40)
    assert precision([], answer) == 0.0


def _task() -> RetrievalTask:
    return RetrievalTask(
        "t",
        ["a", "b"],
        ["x" * 300, "y" * 50],
        ["q1", "q2"],
        ["first", "second"],
        {"q1": {"a": 1}, "q2": {"b": 1}},
        answers={"q1": ("a", 100, 200)},
    )


def test_metrics_per_budget_and_a_task_without_spans_answers_with_the_whole_document():
    task = _task()
    assert answer_spans(task) == {0: (0, 100, 200), 1: (1, 0, 50)}
    run = ContextRun("m", {64: [[(0, 150, 300)], [(1, 0, 25)]], 128: [[(0, 0, 300)], [(1, 0, 50)]]})
    aggregate, per_query = context_metrics(task, run)
    assert per_query["q1"]["ctx64_recall"] == 0.5 and per_query["q2"]["ctx64_recall"] == 0.5
    assert aggregate["ctx64_recall"] == 0.5 and aggregate["ctx128_full"] == 1.0 and aggregate["ctx64_hit"] == 1.0


def test_fill_budget_takes_chunks_best_first_and_clips_the_last():
    texts = ["one two three four five six"]
    words = lambda t: len(t.split())

    def clip(text: str, n: int) -> int:
        return len(" ".join(text.split()[:n]))

    ranked = [(0, 8, 18), (0, 0, 7), (0, 19, 28)]  # "three four", "one two", "five six"
    assert fill_budget(ranked, texts, 3, words, clip) == [(0, 8, 18), (0, 0, 3)]
    assert fill_budget(ranked, texts, 100, words, clip) == ranked


@pytest.fixture(scope="module")
def needle_task(encoder):
    counter = lambda xs: encoder.tokenize(xs).n_tokens
    return needle_tasks(
        default_haystack("eval"), counter, lengths=[512], positions=[0.5], docs_per_length=4, kind="needle", seed=3
    )[0]


@pytest.mark.parametrize("chunker", ["tokens:64", "langchain", "llamaindex"])
def test_chunkers_give_spans_that_cover_the_documents(needle_task, encoder, chunker):
    spans = chunk_spans(chunker, needle_task, encoder)
    for d, text in enumerate(needle_task.doc_texts):
        mine = sorted((a, b) for doc, a, b in spans if doc == d)
        assert mine and mine[0][0] <= 5 and mine[-1][1] >= len(text.rstrip()) - 5
        assert all(0 <= a < b <= len(text) for a, b in mine)


def test_every_row_fits_its_budget(needle_task, encoder):
    budget = TokenBudget(encoder)
    runs = [ChunkContexts("tokens:64", "dense", encoder, budget).run(needle_task, [32, 128])]
    runs += [ChunkContexts("tokens:64", "bm25", encoder, budget).run(needle_task, [32, 128])]
    runs += LandmarkContexts(encoder, budget, k=3).run(needle_task, [32, 128])
    for run in runs:
        for b, contexts in run.contexts.items():
            for context in contexts:
                assert context and sum(budget.count(needle_task.doc_texts[d][s:e]) for d, s, e in context) <= b
        aggregate, _ = context_metrics(needle_task, run)
        assert 0 <= aggregate["ctx32_recall"] <= aggregate["ctx128_recall"] <= 1, run.method
    with pytest.raises(ValueError, match="ranker"):
        ChunkContexts("tokens:64", "sparse", encoder, budget)
    with pytest.raises(ValueError, match="unknown chunker"):
        chunk_spans("words:10", needle_task, encoder)


@pytest.mark.slow
def test_cli_eval_context_tokens_report_and_paired_comparison(tmp_path):
    out = tmp_path / "report"
    args = ["eval", "--device", "cpu", "--methods", "none", "--task", "needle", "--lengths", "256"]
    args += ["--docs-per-length", "3", "--context-tokens", "64,128", "--baseline", "chunk128", "--out", str(out)]
    proc = run_cli(*args, "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (out / "report.md").read_text()
    assert "what reaches the LLM" in report
    for row in ("chunk128", "chunk256", "langchain", "llamaindex", "chunk128-bm25", "lmk-context"):
        assert f"| {row} |" in report
    assert "| lmk-context | ctx128_recall |" in report  # the paired comparison covers the context metrics
    bad = run_cli("eval", "--methods", "none", "--task", "needle", "--context-tokens", "0", "--out", str(out))
    assert bad.returncode == 2 and "--context-tokens" in bad.stderr
