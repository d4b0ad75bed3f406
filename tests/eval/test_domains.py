"""Out-of-domain protocol: HTML documentation pages -> sections tasks per domain, split by domain."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmk_rag.corpora.domains import DOMAINS, SPLITS, domains_of, parse_html, read_domain_pages
from lmk_rag.errors import InvalidInputError, PathNotFoundError
from lmk_rag.eval import beir_task
from lmk_rag.eval.domains import domain_tasks, export_beir

from ..cli_runner import run_cli

PAGE = """<html><head><title>t</title><script>var x = 1;</script></head><body>
<div class="navheader"><a href="prev.html">Prev</a> Chapter 3 <a href="next.html">Next</a></div>
<h1>3. Configuring the Widget Server<a class="headerlink" href="#c">¶</a></h1>
<p>The widget server reads   its settings
   at start-up.</p>
<h2 id="a">3.1. Choosing a listen address</h2>
<p>Give the address with <code>--listen</code>; the default is loopback.</p>
<p>Two paragraphs, one section.</p>
<h3>Binding to every interface on a host</h3>
<pre>
widget --listen 0.0.0.0
</pre>
<h2>How the cache expires entries</h2><p>Entries expire after ten minutes.</p>
<div class="navfooter">Next: Chapter 4</div>
</body></html>"""


def test_parse_html_removes_headings_and_chrome_and_maps_sections():
    page = parse_html("widget/config.html", PAGE)
    assert "Prev" not in page.text and "var x" not in page.text and "Next: Chapter 4" not in page.text
    assert page.text.startswith("Configuring the Widget Server\n")  # the title stays, numbering and ¶ go
    assert "Choosing a listen address" not in page.text and "expires entries" not in page.text
    titles = [(s.title, s.level) for s in page.sections]
    assert titles == [
        ("Configuring the Widget Server", 0),
        ("Choosing a listen address", 1),
        ("Binding to every interface on a host", 2),
        ("How the cache expires entries", 1),
    ]
    body = {s.title: page.text[s.start : s.end].strip() for s in page.sections}
    assert body["Choosing a listen address"] == (
        "Give the address with --listen; the default is loopback.\n\nTwo paragraphs, one section."
    )
    assert body["Binding to every interface on a host"] == "widget --listen 0.0.0.0"
    assert body["How the cache expires entries"] == "Entries expire after ten minutes."
    assert "reads its settings\nat start-up." in page.text  # layout whitespace collapsed


def test_domains_are_split_by_domain_and_hold_out_the_reserved_material():
    assert {d.split for d in DOMAINS.values()} == set(SPLITS)
    assert len(domains_of("test")) >= 3 and not set(domains_of("test")) & set(domains_of("dev"))
    assert all("perl" not in d.package for d in DOMAINS.values())
    assert [d.name for d in domains_of("git,django")] == ["git", "django"]
    with pytest.raises(InvalidInputError, match="unknown domain"):
        domains_of("perl")


@pytest.fixture()
def docs_root(tmp_path):
    """A fake `dpkg -x` of git-doc: three long pages, a FAQ page and release notes (excluded)."""
    folder = tmp_path / "git-doc" / "usr/share/doc/git-doc"
    (folder / "RelNotes").mkdir(parents=True)
    filler = " ".join(f"word{i}" for i in range(400))
    for n, topic in enumerate(("rebasing branches", "merging histories", "tagging releases")):
        sections = "".join(
            f"<h2>How to {verb} when {topic}</h2><p>{verb} {topic}: {filler}</p>"
            for verb in ("start", "continue", "abort")
        )
        (folder / f"page{n}.html").write_text(f"<h1>Guide to {topic}</h1><p>{filler}</p>{sections}")
    (folder / "gitfaq.html").write_text(
        f"<h1>Frequently asked questions</h1><h2>Why is git so fast</h2><p>{filler}</p>"
    )
    (folder / "RelNotes" / "2.0.html").write_text(f"<h1>Release notes</h1><h2>What changed in this one</h2>{filler}")
    return tmp_path


def test_domain_pages_skip_faq_and_excluded_pages(docs_root):
    pages = read_domain_pages(DOMAINS["git"], docs_root)
    assert [p.name for p in pages] == ["git/page0.html", "git/page1.html", "git/page2.html"]
    with pytest.raises(PathNotFoundError, match="apt-get download postgresql-doc-15"):
        read_domain_pages(DOMAINS["postgresql"], docs_root)


def test_domain_tasks_and_their_beir_export_round_trip(docs_root, tmp_path):
    count = lambda texts: np.array([len(t.split()) for t in texts])  # words stand for tokens here
    (task,) = domain_tasks([DOMAINS["git"]], count, root=docs_root, min_doc_tokens=100)
    assert task.name == "domain-git" and len(task.doc_ids) == 3 and len(task.query_ids) == 9
    qid = task.query_ids[0]
    doc, start, end = task.answers[qid]
    assert task.qrels[qid] == {doc: 1} and task.doc_texts[task.doc_ids.index(doc)][start:end].strip().startswith(
        "start"
    )
    folder = export_beir(task, tmp_path / "beir")
    again = beir_task(folder, split="test")
    assert again.doc_ids == task.doc_ids and again.query_texts == task.query_texts and again.qrels == task.qrels
    answers = [json.loads(line) for line in (folder / "answers.jsonl").read_text().splitlines()]
    assert answers[0] == {"query-id": qid, "corpus-id": doc, "start": start, "end": end}


@pytest.mark.slow
def test_cli_exports_and_evaluates_domains(docs_root, tmp_path, tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("LMK_DOCS_ROOT", str(docs_root))
    base = ["eval", "--model", str(tiny_bert_dir), "--device", "cpu", "--task", "domains:git", "--no-progress"]
    none = run_cli(*base, "--methods", "none", "--task", "domains:django")
    assert none.returncode == 2 and "apt-get download python-django-doc" in none.stderr  # one clear line
    out = run_cli(
        *base, "--methods", "lmk:16,bm25", "--export-beir", str(tmp_path / "beir"), "--out", str(tmp_path / "report")
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "beir" / "domain-git" / "corpus.jsonl").is_file()
    assert "## domain-git" in out.stdout and "| bm25 |" in out.stdout
