"""The question-style task (issue #45): FAQ questions as queries, their answers as spans, the
questions' own words taken out of the pages, split by source."""

from __future__ import annotations

import pytest

from lmk_rag.corpora.faqs import FAQ_SOURCES, faq_sources_of, question_text, read_faq
from lmk_rag.errors import InvalidInputError, PathNotFoundError
from lmk_rag.eval.faqs import faq_task
from tests.cli_runner import run_cli

FILLER = " ".join(f"word{i}" for i in range(60))


@pytest.fixture()
def faq_root(tmp_path):
    """Fake `dpkg -x` of three FAQ packages in their three layouts: headings (with a list of the
    questions at the top), texinfo (navigation lines), and asciidoc definition lists."""
    django = tmp_path / "python-django-doc" / "usr/share/doc/python-django-doc/html/faq"
    django.mkdir(parents=True)
    (django / "general.html").write_text(
        "<h1>FAQ: General</h1><ul><li>Why does this project exist?</li><li>Does it scale well?</li></ul>"
        f"<h2>Why does this project exist?</h2><p>It grew out of a newsroom. {FILLER}</p>"
        f"<h2>Does it scale well?</h2><p>Yes, it scales to many servers. {FILLER}</p>"
        "<h2>Other questions</h2><p>See the mailing list.</p>"
    )
    (django / "index.html").write_text(f"<h1>FAQ</h1><p>Pages of questions. {FILLER}</p>")
    r = tmp_path / "r-doc-html" / "usr/share/R/doc/manual"
    r.mkdir(parents=True)
    (r / "R-FAQ.html").write_text(
        '<h1>R FAQ</h1><div class="header"><p>Next: What is R?, Up: R FAQ</p></div>'
        f"<h3>2.1 What is R?</h3><p>R is a system for statistical computation. {FILLER}</p>"
        '<div class="header"><p>Next: Citing, Previous: What is R?</p></div>'
        "<h3>2.2 Why?</h3><p>Too short a question to ask.</p>"
    )
    git = tmp_path / "git-doc" / "usr/share/doc/git-doc"
    git.mkdir(parents=True)
    (git / "gitfaq.html").write_text(
        "<h1>gitfaq</h1><h2>Configuration</h2><dl>"
        f"<dt>What should I put in user.name?</dt><dd><p>Your personal name. {FILLER}</p></dd>"
        "<dt>I asked Git to ignore various files, yet they are still tracked</dt>"
        f"<dd><p>Untrack them. {FILLER}</p></dd>"
        "</dl>"
    )
    return tmp_path


def test_questions_become_queries_and_their_answers_spans(faq_root):
    (general, index) = read_faq(FAQ_SOURCES["django"], faq_root)
    page, questions = general
    assert page.name == "django/general.html" and index[1] == []
    assert [q.question for q in questions] == ["Why does this project exist?", "Does it scale well?"]
    first = page.text[questions[0].start : questions[0].end]
    assert first.startswith("It grew out of a newsroom.") and "scales" not in first
    for q in questions:  # neither the headings nor the list of questions at the top stay in the text
        assert q.question.lower().rstrip("?") not in page.text.lower()


def test_texinfo_navigation_and_numbering_are_not_text_and_dt_terms_are_questions(faq_root):
    ((page, questions),) = read_faq(FAQ_SOURCES["r"], faq_root)
    assert [q.question for q in questions] == ["What is R?"]  # "Why?" is too short to be a question
    assert "Next:" not in page.text and "Previous:" not in page.text
    ((page, questions),) = read_faq(FAQ_SOURCES["git"], faq_root)
    assert [q.question for q in questions] == [
        "What should I put in user.name?",
        "I asked Git to ignore various files, yet they are still tracked",
    ]
    assert page.text[questions[1].start : questions[1].end].startswith("Untrack them.")


def test_question_text_takes_off_numbering():
    assert (
        question_text("G1. What is fetchmail and why should I bother?") == "What is fetchmail and why should I bother?"
    )
    assert question_text("1.2: What is it good at?") == "What is it good at?"
    assert question_text("(3) How do I create an AUTOINCREMENT field?") == "How do I create an AUTOINCREMENT field?"
    assert question_text("Installation") is None


def test_the_task_pools_its_sources_and_the_splits_never_share_one(faq_root):
    task = faq_task(faq_sources_of("django,r"), root=faq_root, name="faq-mini")
    assert len(task.query_ids) == 3 and len(task.doc_ids) == 3
    for qid in task.query_ids:
        doc, start, end = task.answers[qid]
        assert task.qrels[qid] == {doc: 1} and end - start >= 40
    dev, test = ({s.name for s in faq_sources_of(split)} for split in ("dev", "test"))
    assert dev and test and not dev & test
    assert not {s.package for s in FAQ_SOURCES.values()} & {"perl-doc", "python3-doc", "python3.11-doc"}
    with pytest.raises(InvalidInputError, match="unknown FAQ source"):
        faq_sources_of("perl")
    with pytest.raises(PathNotFoundError, match="apt-get download debian-faq"):
        read_faq(FAQ_SOURCES["debian"], faq_root)


@pytest.mark.slow
def test_cli_evaluates_the_faq_task_with_context_metrics(faq_root, tmp_path, tiny_bert_dir):
    out = tmp_path / "report"
    args = ["eval", "--model", str(tiny_bert_dir), "--device", "cpu", "--task", "faq:django,git", "--no-progress"]
    proc = run_cli(*args, "--methods", "lmk:16,bm25", "--docs-root", str(faq_root), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "## faq-django,git" in proc.stdout and "| bm25 |" in proc.stdout and "passage_hit@1" in proc.stdout
