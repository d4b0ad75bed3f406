"""Eval harness: tasks, metrics against hand-computed values, methods, reports, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmk_rag.corpora.texts import SourceText, package_readmes, split_of, strip_faq_sections
from lmk_rag.eval import beir_task, default_haystack, evaluate, is_faq, needle_tasks, parse_methods, write_report
from lmk_rag.eval.metrics import passage_hits, retrieval_metrics, score_run

from ..cli_runner import run_cli


@pytest.fixture(scope="module")
def counter(encoder):
    return lambda xs: encoder.tokenize(xs).n_tokens


@pytest.fixture(scope="module")
def small_tasks(counter):
    return needle_tasks(
        default_haystack("eval"),
        counter,
        lengths=[256, 512],
        positions=[0.0, 0.5, 1.0],
        docs_per_length=6,
        kind="needle",
        seed=1,
    )


def test_metrics_match_hand_computed_values():
    qrels = {"q1": {"d1": 1}, "q2": {"d3": 1}}
    scores = np.array([[0.9, 0.5, 0.1], [0.9, 0.2, 0.5]])
    run = score_run(scores, ["q1", "q2"], ["d1", "d2", "d3"])
    agg, per_query = retrieval_metrics(qrels, run)
    # q1: relevant at rank 1; q2: relevant at rank 2 -> RR 0.5, nDCG 1/log2(3).
    assert per_query["q1"] == {"nDCG@10": 1.0, "R@10": 1.0, "MRR": 1.0, "top1": 1.0}
    assert per_query["q2"]["MRR"] == 0.5 and per_query["q2"]["top1"] == 0.0
    assert per_query["q2"]["nDCG@10"] == pytest.approx(1 / np.log2(3))
    assert agg["MRR"] == pytest.approx(0.75) and agg["top1"] == pytest.approx(0.5)
    hits = passage_hits(
        scores,
        ["q1", "q2"],
        ["d1", "d2", "d3"],
        {"q1": ("d1", 10, 15), "q2": ("d3", 0, 4)},
        {(0, 0): (5, 20), (1, 0): (0, 4)},
    )
    assert hits == {"q1": 1.0, "q2": 0.0}


def test_needle_tasks_are_deterministic_and_place_the_answer(small_tasks, counter):
    again = needle_tasks(
        default_haystack("eval"),
        counter,
        lengths=[256, 512],
        positions=[0.0, 0.5, 1.0],
        docs_per_length=6,
        kind="needle",
        seed=1,
    )
    assert [t.doc_texts for t in again] == [t.doc_texts for t in small_tasks]
    for task in small_tasks:
        tokens = counter(task.doc_texts)
        length = int(task.name.split("-")[1])
        assert (tokens >= length).all() and (tokens < length * 1.3).all()
        for qid, query in zip(task.query_ids, task.query_texts):
            doc_id, a, b = task.answers[qid]
            text = task.doc_texts[task.doc_ids.index(doc_id)]
            answer = text[a:b]
            assert answer and answer in text
            assert query.rstrip("?").split("What is ")[1].split("'s")[0] in text[max(0, a - 80) : b]
            relative = a / len(text)
            assert abs(relative - task.query_meta[qid]["position"]) < 0.25


def test_planted_passkey_found_by_chunks_and_bm25(counter):
    tasks = needle_tasks(
        default_haystack("eval"),
        counter,
        lengths=[256, 512],
        positions=[0.0, 0.5, 1.0],
        docs_per_length=6,
        kind="passkey",
        seed=1,
    )
    rows = evaluate(tasks, parse_methods("chunk:32,bm25", device="cpu"), progress=False)
    by = {(r.task, r.method): r.metrics for r in rows}
    for task in ("passkey-256", "passkey-512"):
        assert by[(task, "bm25")]["top1"] == 1.0
        assert by[(task, "chunk-max-32")]["top1"] >= 0.8
        assert by[(task, "chunk-max-32")]["passage_hit@1"] >= 0.6
        # Local evidence: the best chunk beats the average of all chunks.
        assert by[(task, "chunk-max-32")]["top1"] > by[(task, "chunk-avg-32")]["top1"]


def test_all_methods_report_and_plots(small_tasks, tmp_path):
    methods = parse_methods("cls,mean,lmk:32,chunk:128,bm25", device="cpu")
    rows = evaluate(small_tasks[:1], methods, progress=False)
    names = {r.method for r in rows}
    assert names == {
        "cls-truncated",
        "mean-truncated",
        "lmk-k32",
        "lmk-multi-k32",
        "chunk-max-128",
        "chunk-avg-128",
        "bm25",
    }
    for r in rows:
        assert 0.0 <= r.metrics["top1"] <= r.metrics["R@10"] <= 1.0 and r.tokens > 0
    paths = write_report(rows, tmp_path, command="lmk-rag eval ...")
    md = paths["markdown"].read_text()
    assert "| lmk-multi-k32 |" in md and "top-1 accuracy by needle position" in md
    data = json.loads(paths["json"].read_text())
    assert len(data["rows"]) == len(rows) and "lmk-k32" in data["by_length"]
    import matplotlib.image

    for key in ("position", "length"):
        img = matplotlib.image.imread(paths[key])
        assert img.shape[0] > 300 and img.shape[1] > 500 and img.std() > 0.01  # a real picture, not blank


def test_beir_folder(tmp_path):
    (tmp_path / "qrels").mkdir()
    corpus = [
        {"_id": "d1", "title": "Tides", "text": "Spring tides come at new and full moon."},
        {"_id": "d2", "title": "Bread", "text": "Feed a sourdough starter daily."},
        {"_id": "d3", "title": "FAQ", "text": "Frequently asked questions about tides."},
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus))
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "when are spring tides"}\n{"_id": "q9", "text": "x"}'
    )
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td3\t1\n")
    (tmp_path / "spans.jsonl").write_text('{"query_id": "q1", "doc_id": "d1", "start": 7, "end": 19}')
    task = beir_task(tmp_path)
    assert task.doc_ids == ["d1", "d2"] and task.query_ids == ["q1"] and task.qrels == {"q1": {"d1": 1}}
    assert task.answers == {"q1": ("d1", 7, 19)}
    rows = evaluate([task], parse_methods("lmk:32,bm25", device="cpu"), progress=False)
    assert all(r.metrics["top1"] == 1.0 for r in rows)
    with pytest.raises(ValueError, match="not a BEIR folder"):
        beir_task(tmp_path / "qrels")


def test_faq_documents_are_held_out():
    assert is_faq("docs/faq.md") and is_faq("FAQ.rst") and is_faq("guide.md", "# Frequently Asked Questions\n...")
    assert not is_faq("docs/faquier.md", "# Installation") and not is_faq("tides.md", "# How tides work")
    md = "# Tool\nintro\n## FAQ\n### Why?\nbecause\n## Usage\nrun it\n"
    assert strip_faq_sections(md) == "# Tool\nintro\n## Usage\nrun it\n"
    names = [s.name for s in default_haystack("eval")]
    assert names and all(split_of(n) == "eval" for n in names)
    assert not set(names) & {s.name for s in default_haystack("train")}


def test_package_readmes_leave_out_this_projects_own():
    from importlib.metadata import metadata

    assert len(metadata("lmk-rag").get_payload() or "") > 2000  # long enough that only the rule keeps it out
    names = {s.name for s in package_readmes()}
    assert names and "readme/lmk-rag" not in names


def test_bad_method_and_task_specs(counter):
    with pytest.raises(ValueError, match="unknown method"):
        parse_methods("lmk:32,maxpool")
    with pytest.raises(ValueError, match="kind"):
        needle_tasks([SourceText("a", "x. " * 100)], counter, kind="haystack")
    with pytest.raises(ValueError, match="too little prose"):
        needle_tasks([SourceText("a", "One sentence only.")], counter)


@pytest.mark.slow
def test_cli_eval_end_to_end(tmp_path):
    out = tmp_path / "report"
    args = ["eval", "--device", "cpu", "--methods", "lmk:64,bm25", "--lengths", "256", "--docs-per-length", "4"]
    proc = run_cli(*args, "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| lmk-multi-k64 |" in proc.stdout and (out / "accuracy_by_length.png").is_file()
    bad = run_cli(*args[:3], "--methods", "nope")
    assert bad.returncode == 2 and "unknown method" in bad.stderr


def test_methods_may_name_their_own_model(small_tasks, tiny_bert_dir):
    methods = parse_methods(f"lmk:16@{tiny_bert_dir},bm25", device="cpu")
    assert methods[0].encoder.dimension == 32
    rows = evaluate(small_tasks[:1], methods, progress=False)
    assert {r.method for r in rows} == {f"lmk-k16@{tiny_bert_dir.name}", f"lmk-multi-k16@{tiny_bert_dir.name}", "bm25"}


def test_several_passage_rules_share_one_encoding(small_tasks, tiny_bert_dir):
    methods = parse_methods(f"lmk:16@{tiny_bert_dir}", passage="peak, region,peak", device="cpu")
    assert methods[0].passages == ("peak", "region")  # trimmed, checked, repeats dropped
    rows = {r.method.split("@")[0]: r for r in evaluate(small_tasks[:1], methods, progress=False)}
    assert set(rows) == {"lmk-k16", "lmk-multi-k16-peak", "lmk-multi-k16-region"}
    peak, region = rows["lmk-multi-k16-peak"], rows["lmk-multi-k16-region"]
    # One encoding: the same ranking and cost; only the passage (and its hit rate) may differ.
    assert peak.encode_seconds == region.encode_seconds
    for key in ("nDCG@10", "MRR", "top1"):
        assert peak.metrics[key] == region.metrics[key]
    assert "passage_hit@1" in peak.metrics and "passage_hit@1" in region.metrics
    with pytest.raises(ValueError, match="at least one"):
        parse_methods("lmk:32", passage=" , ")
