"""Sections tasks: reST pages parsed into plain text + sections, headings as queries, train/eval split."""

from __future__ import annotations

import numpy as np
import pytest

from lmk_rag.corpora.rst import parse_rst, query_sections, read_rst_pages
from lmk_rag.corpora.texts import split_of
from lmk_rag.eval.metrics import passage_hits
from lmk_rag.eval.sections import section_task, short_section_task
from lmk_rag.train.data import section_pairs

from ..cli_runner import run_cli

PAGE = """\
.. _tides-howto:

=============
Tides HOWTO
=============

.. index::
   single: tides
   pair: moon; sea

.. module:: tides

Tides are the rise and fall of the sea, see :func:`~tides.predict` and ``tide_table``.

How the Moon raises the sea
-------------------------------

The Moon's gravity pulls the ocean towards it on the near side. {body1}

Spring and neap tides explained
-----------------------------------

Spring tides come at new and full moon. {body2}

Small
^^^^^

Too short a heading to be a query. {body3}
"""


def words(n: int, word: str) -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def make_page(tag: str) -> str:
    return PAGE.format(body1=words(60, f"{tag}moon"), body2=words(60, f"{tag}spring"), body3=words(60, f"{tag}x"))


def count_words(texts: list[str]) -> np.ndarray:
    return np.array([len(t.split()) for t in texts])


def test_parse_rst_removes_headings_and_meta_and_records_sections():
    page = parse_rst("howto/tides", make_page("a"))
    assert page.text.startswith("Tides HOWTO\n")  # the page title stays
    for gone in ("-----", "How the Moon raises the sea", ".. index::", "single: tides", ".. module::", ".. _tides"):
        assert gone not in page.text
    assert "see tides.predict and tide_table." in page.text  # roles and literals as their text
    titles = [(s.title, s.level) for s in page.sections]
    assert titles == [
        ("Tides HOWTO", 0),
        ("How the Moon raises the sea", 1),
        ("Spring and neap tides explained", 1),
        ("Small", 2),
    ]
    moon, spring = page.sections[1], page.sections[2]
    assert page.text[moon.start : moon.end].strip().startswith("The Moon's gravity")
    assert "amoon59" in page.text[moon.start : moon.end] and "aspring0" not in page.text[moon.start : moon.end]
    assert moon.end == spring.start and page.sections[-1].end == len(page.text)


@pytest.fixture()
def docs_folder(tmp_path):
    root = tmp_path / "_sources"
    for i in range(12):
        (root / "library").mkdir(parents=True, exist_ok=True)
        (root / "library" / f"mod{i}.rst.txt").write_text(
            make_page(f"p{i}").replace("Moon raises", f"Moon {i} raises").replace("neap tides", f"neap {i} tides")
        )
    (root / "faq").mkdir()
    (root / "faq" / "general.rst.txt").write_text(make_page("faq"))
    (root / "reference").mkdir()
    (root / "reference" / "datamodel.rst").write_text(make_page("ref"))
    (root / "library" / "questions.rst.txt").write_text("Frequently Asked Questions\n" + "=" * 26 + "\n\nText.\n")
    return root


def test_pages_split_into_disjoint_halves_without_faq_or_reference(docs_folder):
    every = read_rst_pages(docs_folder)
    train, evaluation = read_rst_pages(docs_folder, split="train"), read_rst_pages(docs_folder, split="eval")
    assert sorted(p.name for p in every) == sorted(f"library/mod{i}" for i in range(12))
    assert {p.name for p in train} | {p.name for p in evaluation} == {p.name for p in every}
    assert not {p.name for p in train} & {p.name for p in evaluation}
    assert all(split_of(f"pydocs/{p.name}") == "eval" for p in evaluation) and train and evaluation
    with pytest.raises(ValueError, match="split"):
        read_rst_pages(docs_folder, split="test")
    with pytest.raises(ValueError, match="does not exist"):
        read_rst_pages(docs_folder / "missing")


def test_section_task_queries_are_headings_with_answer_spans(docs_folder):
    pages = read_rst_pages(docs_folder)
    task = section_task(pages, count_words, min_doc_tokens=100, max_doc_tokens=10_000, max_queries_per_doc=1, seed=3)
    assert len(task.doc_ids) == 12 and len(task.query_ids) == 12  # one query per page; "Small" never qualifies
    texts = dict(zip(task.doc_ids, task.doc_texts))
    for qid, query in zip(task.query_ids, task.query_texts):
        (doc,) = task.qrels[qid]
        did, start, end = task.answers[qid]
        assert did == doc and query not in texts[doc] and 0 < start < end <= len(texts[doc])
        assert task.query_meta[qid]["position"] in (0.0, 0.25, 0.5, 0.75, 1.0)  # quarters of the page
        assert task.query_meta[qid]["position"] == round(4 * start / len(texts[doc])) / 4
        assert task.query_meta[qid]["length"] == 128  # 203 words: the power of two below
    # a passage inside the answer section is a hit; one in another section is not
    q0 = 0
    did, start, end = task.answers[task.query_ids[q0]]
    d0 = task.doc_ids.index(did)
    scores = np.zeros((1, len(task.doc_ids)))
    scores[0, d0] = 1
    assert passage_hits(scores, task.query_ids[:1], task.doc_ids, task.answers, {(0, d0): (start + 5, start + 60)})
    miss = passage_hits(scores, task.query_ids[:1], task.doc_ids, task.answers, {(0, d0): (0, 20)})
    assert miss[task.query_ids[0]] == 0.0
    with pytest.raises(ValueError, match="no page has"):
        section_task(pages, count_words, min_doc_tokens=10_000, max_doc_tokens=20_000)


def test_short_section_task_and_training_pairs(docs_folder):
    pages = read_rst_pages(docs_folder)
    short = short_section_task(pages, count_words, min_tokens=20, max_tokens=256)
    assert len(short.doc_ids) == 24  # two query sections per page
    for qid, query in zip(short.query_ids, short.query_texts):
        (doc,) = short.qrels[qid]
        body = short.doc_texts[short.doc_ids.index(doc)]
        assert query not in body and len(body.split()) <= 256
    pairs = section_pairs(pages, seed=0, min_chars=300, max_chars=400)
    assert len(pairs) == len(query_sections(pages)) == 24
    for pair in pairs:
        key = "moon0" if "Moon" in pair.query else "spring0"
        assert key in pair.positive and pair.query not in pair.positive


@pytest.mark.slow
def test_cli_sections_task(tmp_path, tiny_bert_dir):
    docs_folder = tmp_path / "docs"
    docs_folder.mkdir()
    for i in range(8):  # plain words: sections of well under 256 tokens
        page = PAGE.format(body1="ocean " * 60, body2="moon " * 60, body3="x")
        (docs_folder / f"page{i}.rst").write_text(
            page.replace("Moon raises", f"Moon{i} raises").replace("neap", f"neap{i}")
        )
    out = tmp_path / "report"
    args = ["eval", "--device", "cpu", "--model", str(tiny_bert_dir), "--methods", "lmk:16,chunk:16,bm25"]
    proc = run_cli(
        *args, "--task", "sections-short", "--docs-folder", str(docs_folder), "--out", str(out), "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "docs-sections-short" in proc.stdout and "| bm25 |" in proc.stdout
    bad = run_cli(*args, "--task", "sections-short", "--docs-folder", str(tmp_path / "none"), "--out", str(out))
    assert bad.returncode == 2 and "does not exist" in bad.stderr
