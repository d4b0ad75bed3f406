"""Readers as a user meets them: every file in a folder accounted for (added, skipped, ignored or
failed, each with its reason), text of any encoding, gzip, HTML main text without navigation, PDF
pages cited by every hit and passage (core, LangChain, LlamaIndex, command line), globs, the demo
corpus that ships."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import os
from pathlib import Path

import pytest

from lmk_rag.index import QdrantIndex
from lmk_rag.ingest import decode_text, html_main_text, ingest, pdf_text, read_document
from lmk_rag.ingest.discovery import sample_folder
from lmk_rag.types import pages_of as make_hit_pages

from .cli_runner import run_cli
from .pdf_maker import make_pdf

# Four pages of known text, the first labelled "i" (front matter), the others 1..3.
PAGES = [
    ["Field notes on coastal birds", "A cover page with the title only."],
    ["Oystercatchers probe mud flats for cockles and mussels with long orange bills.",
     "They nest on shingle beaches above the spring tide line."],
    ["Gannets dive into the sea from thirty metres to catch mackerel and herring.",
     "Their colonies on sea stacks hold tens of thousands of pairs."],
    ["Puffins dig burrows in cliff-top turf and raise a single chick each summer.",
     "They carry up to twenty sand eels at once crosswise in their beaks."],
]  # fmt: skip


@pytest.fixture()
def birds_pdf(tmp_path: Path) -> Path:
    path = tmp_path / "pdf" / "birds.pdf"
    path.parent.mkdir()
    path.write_bytes(make_pdf(PAGES, roman_front=1, title="Coastal birds"))
    return path


def test_pdf_text_keeps_every_page_and_where_it_starts(birds_pdf):
    read = pdf_text(birds_pdf.read_bytes())
    assert read.pages.labels == ("i", "1", "2", "3") and read.title == "Coastal birds"
    for i, lines in enumerate(PAGES):
        start = read.pages.starts[i]
        end = read.pages.starts[i + 1] if i + 1 < len(PAGES) else len(read.text)
        assert read.text[start:end].strip() == "\n".join(lines)


def test_every_passage_names_the_page_it_lies_on(birds_pdf, encoder, tmp_path):
    index = QdrantIndex(tmp_path / "idx", encoder=encoder)
    try:
        summary = ingest(index, [birds_pdf.parent], show_progress=False)
        assert summary.added == 1 and not summary.failed
        doc = index.get([str(birds_pdf.resolve())])[0]
        assert doc.metadata["total_pages"] == 4 and doc.metadata["source"] == doc.id
        # Where each page starts, from the known text alone (pages joined by a blank line).
        starts = [sum(len("\n".join(lines)) + 2 for lines in PAGES[:i]) for i in range(len(PAGES))]
        assert doc.text == "\n\n".join("\n".join(lines) for lines in PAGES)

        def page_of(char: int) -> int:
            return max(i for i, s in enumerate(starts) if s <= char) + 1

        hit_for = index.search("sea birds", k=1)[0]
        assert hit_for.id == doc.id
        for a, b in hit_for.landmark_spans:  # every landmark's pages, as the reader mapped them
            expected = tuple(sorted({page_of(c) for c in range(a, max(b, a + 1))}))
            got = make_hit_pages(doc.metadata, (a, b))
            assert got == expected, (a, b, got, expected)
        for page, lines in enumerate(PAGES[1:], start=2):
            (hit,) = index.search(lines[0], k=1)
            assert page in hit.pages and hit.page_labels[hit.pages.index(page)] == str(page - 1)
            passages = index.context(lines[1], 48)
            assert passages and all(p.pages for p in passages)
            best = passages[0]
            assert page in best.pages and lines[1][:30] in best.text.replace("\n", " ")
    finally:
        index.close()


def test_frameworks_and_the_command_line_cite_pages(birds_pdf, encoder, tmp_path):
    from llama_index.retrievers.lmk.base import hit_to_node

    from langchain_lmk.documents import hit_to_passage

    uri = f"qdrant:{tmp_path / 'idx'}"
    assert run_cli("ingest", str(birds_pdf), "--index", uri, "--no-progress").returncode == 0
    shown = run_cli("search", "Gannets dive from thirty metres", "--index", uri, "-k", "1", "--neighbours", "0")
    # The landmark may straddle a page break: then both pages are named.
    assert any(f"{pages}\n" in shown.stdout for pages in ("  p. 2", "  pp. 1-2", "  pp. 2-3")), shown.stdout
    context = run_cli("search", "puffin burrows", "--index", uri, "--context", "64", "--json")
    first = json.loads(context.stdout)[0]
    assert first["page_labels"] and first["pages"][0] >= 2
    index = QdrantIndex(tmp_path / "idx", encoder=encoder)
    try:
        (hit,) = index.search("Gannets dive into the sea", k=1)
        # The async twins users chain (LangChain ainvoke, LlamaIndex aretrieve) carry the pages too.
        from llama_index.retrievers.lmk import LMKRetriever as LlamaIndexRetriever

        from langchain_lmk import LMKRetriever as LangChainRetriever

        docs = asyncio.run(LangChainRetriever(index=index, max_tokens=64).ainvoke("puffin burrows"))
        assert docs and all("page_label" in d.metadata and "page" in d.metadata for d in docs)
        nodes = asyncio.run(LlamaIndexRetriever(index, max_tokens=64).aretrieve("puffin burrows"))
        assert nodes and all("page_label" in n.node.metadata for n in nodes)
    finally:
        index.close()
    lc = hit_to_passage(hit)
    assert lc.metadata["page"] == hit.pages[0] - 1 and lc.metadata["page_label"] == hit.page_labels[0]
    node = hit_to_node(hit).node
    assert node.metadata["page_label"] == hit.page_labels[0]
    assert "page_map" in node.excluded_llm_metadata_keys  # the map stays out of the LLM's prompt


def test_html_main_text_leaves_navigation_and_widgets_out():
    page = html_main_text((sample_folder() / "bike_commuting.html").read_bytes())
    assert page.title == "Commuting by bicycle in winter | Cycle Guides"
    for boilerplate in ("Sign in", "Popular guides", "cookies", "Privacy", "analytics", "font-family"):
        assert boilerplate not in page.text, boilerplate
    lines = page.text.splitlines()
    assert "Lights" in lines and "Tyres and brakes" in lines  # headings on lines of their own
    assert "Below 0 °C | Lobster gloves, overshoes, a thin hat under the helmet" in lines  # cells apart
    assert all(line == line.strip() for line in lines)  # no indentation from the markup


def test_code_blocks_keep_their_indentation():
    markup = (
        "<html><body><main><h1>Loops</h1><p>A loop in Python reads like this, with its body indented:</p>"
        "<pre>for item in items:\n    total += item\n    print(total)</pre>"
        "<p>The body runs once per item of the list given to the loop.</p></main></body></html>"
    )
    assert "for item in items:\n    total += item" in html_main_text(markup).text


def test_encodings_are_detected_and_named():
    latin = decode_text("Crème brûlée, déjà vu: a café's naïve façade.".encode("latin-1"))
    assert latin.text == "Crème brûlée, déjà vu: a café's naïve façade." and latin.encoding == "cp1252"
    utf16 = decode_text("Grüße, 世界".encode("utf-16"))
    assert utf16.text == "Grüße, 世界" and utf16.encoding == "utf-16"
    assert decode_text(b"plain").encoding == "utf-8"


def _awkward_folder(root: Path) -> dict[str, str]:
    """Ten kinds of awkward file; returns name -> the fate expected ("added", "ignored", "failed")."""
    root.mkdir()
    (root / "README").write_text("A plain text file without a suffix, about tide pools and crabs.\n")
    (root / "NEWS.gz").write_bytes(gzip.compress(b"Version 2 adds support for rock pools and anemones.\n"))
    (root / "latin1.txt").write_bytes("Les crêpes bretonnes se mangent avec du cidre brut.".encode("latin-1"))
    (root / "utf16.txt").write_bytes("Sea glass is smoothed by years of waves and sand.".encode("utf-16"))
    (root / "blob").write_bytes(bytes(range(256)) * 8)  # binary, no suffix
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (root / "empty.txt").write_bytes(b"")
    (root / "one_line.txt").write_text("word " * 40_000)  # a 200 kB line
    (root / "outside").symlink_to("/etc/hostname")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a PDF body\n")
    (root / "scanned.pdf").write_bytes(make_pdf([[], []]))  # pages without a text layer
    (root / "corrupt.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (root / "nav_only.html").write_text(
        "<html><body><nav><a href='/'>Home</a> <a href='/x'>Next</a></nav></body></html>"
    )
    (root / ".hidden.md").write_text("hidden")
    os.mkfifo(root / "pipe")
    return {
        "README": "added",
        "NEWS.gz": "added",
        "latin1.txt": "added",
        "utf16.txt": "added",
        "one_line.txt": "added",
        "empty.txt": "added",
        "blob": "ignored",
        "logo.png": "ignored",
        "outside": "ignored",
        ".hidden.md": "ignored",
        "pipe": "ignored",
        "broken.pdf": "failed",
        "scanned.pdf": "failed",
        "corrupt.gz": "failed",
        "nav_only.html": "failed",
    }


def test_every_file_in_a_folder_is_accounted_for(tmp_path):
    expected = _awkward_folder(tmp_path / "awkward")
    out = run_cli(
        "ingest", str(tmp_path / "awkward"), "--index", f"qdrant:{tmp_path / 'idx'}", "--no-progress", "--json"
    )
    assert out.returncode == 1, out.stderr  # some files failed: listed; the others ingested
    summary = json.loads(out.stdout)
    fates = {Path(p).name: "failed" for p in summary["failed"]} | {Path(p).name: "ignored" for p in summary["ignored"]}
    added = {name for name, fate in expected.items() if fate == "added"}
    assert summary["added"] == len(added) and summary["documents"] == len(added)
    assert {n: f for n, f in fates.items()} == {n: f for n, f in expected.items() if f != "added"}
    reasons = {Path(p).name: r for p, r in {**summary["failed"], **summary["ignored"]}.items()}
    assert "binary content" in reasons["blob"] and ".png" in reasons["logo.png"]
    assert "OCR is not done" in reasons["scanned.pdf"] and "damaged PDF" in reasons["broken.pdf"]
    assert "corrupt gzip" in reasons["corrupt.gz"] and "no main text" in reasons["nav_only.html"]
    assert "hidden" in reasons[".hidden.md"] and "FIFO" in reasons["pipe"] and "outside" in reasons["outside"]
    index = QdrantIndex(tmp_path / "idx")
    try:
        docs = {Path(d.id).name: d for d in index.get(index.ids())}
    finally:
        index.close()
    assert docs["latin1.txt"].text.startswith("Les crêpes") and docs["latin1.txt"].metadata["encoding"] == "cp1252"
    assert docs["utf16.txt"].metadata["encoding"] == "utf-16" and docs["NEWS.gz"].metadata["compression"] == "gzip"
    assert "rock pools" in docs["NEWS.gz"].text and "tide pools" in docs["README"].text
    assert all(d.metadata["source"] == d.id for d in docs.values())  # the id a --filter on source finds


def test_include_and_exclude_globs(tmp_path, encoder):
    root = tmp_path / "docs"
    (root / "build").mkdir(parents=True)
    (root / "guide.md").write_text("How to plant garlic in autumn.")
    (root / "notes.txt").write_text("Garlic needs a cold spell to form cloves.")
    (root / "build" / "copy.md").write_text("A generated copy of the guide.")
    index = QdrantIndex(tmp_path / "idx", encoder=encoder)
    try:
        summary = ingest(index, [root], include=["*.md"], exclude=["build/**"], show_progress=False)
    finally:
        index.close()
    assert summary.added == 1
    assert any("--exclude" in reason for reason in summary.ignored.values())
    assert any(Path(p).name == "notes.txt" and "--include" in r for p, r in summary.ignored.items())


def test_the_demo_corpus_ships_and_reads_clean(tmp_path):
    uri = f"qdrant:{tmp_path / 'idx'}"
    out = run_cli("ingest", "--sample", "--index", uri, "--no-progress")
    assert out.returncode == 0 and "added 3" in out.stdout, out.stdout + out.stderr
    shown = run_cli("search", "when do spring tides come?", "--index", uri, "-k", "1")
    assert "tide_tables.pdf" in shown.stdout and "p. " in shown.stdout, shown.stdout
    assert run_cli("ingest", "--index", uri).returncode == 2  # nothing to ingest: said, exit 2


def test_read_document_reports_a_text_suffix_with_binary_content_as_failed(tmp_path):
    bad = tmp_path / "data.txt"
    bad.write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ValueError, match="binary file"):
        read_document(bad)


def test_real_pages_of_this_machine_including_an_xml_declaration_are_read():
    """Documentation as Debian installs it: a DocBook page that opens with an XML declaration (lxml
    refuses such text unless told its encoding) and a multi-page HTML spec."""
    pages = [Path("/usr/share/doc/xtrans-dev/xtrans.html"), Path("/usr/share/doc/libexpat1-dev/expat.html/index.html")]
    pages += sorted(Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.html").glob("*.html"))
    present = [p for p in pages if p.exists()]
    if not present:
        pytest.skip("no Debian HTML documentation installed here")
    for path in present:
        read = read_document(path)
        assert len(read.text.split()) > 20 and read.metadata["encoding"], path
        assert "<" not in read.text[:200] or "</" not in read.text[:200], path  # text, not markup


def test_a_pdf_that_needs_a_password_is_one_line_and_one_with_an_owner_password_only_is_read(tmp_path, encoder):
    import pypdf

    folder = tmp_path / "pdfs"
    folder.mkdir()
    for name, user_password in (("locked.pdf", "s3cret"), ("open.pdf", "")):
        writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf([[f"The {name} page on payroll."]]))))
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
        with open(folder / name, "wb") as handle:
            writer.write(handle)
    index = QdrantIndex(tmp_path / "idx", encoder=encoder)
    try:
        summary = ingest(index, [folder], show_progress=False)
    finally:
        index.close()
    assert summary.added == 1 and [Path(p).name for p in summary.failed] == ["locked.pdf"]
    assert "needs a password" in next(iter(summary.failed.values()))


def test_headings_and_text_between_blocks_are_kept():
    """What trafilatura alone dropped on Debian's FAQs: question headings (zsh, Django, Debian) and
    text lying loose between <pre> blocks (zsh's FAQ: "... or equivalently <pre>...</pre>")."""
    markup = (
        "<html><body><h2>3.13: How does base arithmetic work?</h2>"
        "The ksh syntax is now understood, i.e.<pre>let 'foo = 16#ff'</pre>"
        "or equivalently<pre>(( foo = 16#ff ))</pre>"
        "or even the original syntax, which was based on a misunderstanding of the ksh manual page."
        "<h2>3.14: How do I get a newline in my prompt?</h2><p>Place a literal newline in quotes.</p></body></html>"
    )
    blocks = html_main_text(markup).text.split("\n\n")
    assert "3.13: How does base arithmetic work?" in blocks and "3.14: How do I get a newline in my prompt?" in blocks
    assert "or equivalently" in blocks and "(( foo = 16#ff ))" in blocks
    assert any(b.startswith("or even the original syntax") for b in blocks)


def test_bad_globs_are_one_line_before_the_index_is_made(tmp_path, encoder):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("Garlic needs a cold spell.")
    out = run_cli("ingest", str(folder), "--index", f"qdrant:{tmp_path / 'idx'}", "--include", " ")
    assert out.returncode == 2 and "include[0] must be a non-empty glob" in out.stderr, out.stderr
    assert not (tmp_path / "idx").exists()  # said before anything was created
    index = QdrantIndex(tmp_path / "idx2", encoder=encoder)
    try:
        with pytest.raises(ValueError, match="exclude\\[0\\]"):
            ingest(index, [folder], exclude=[""], show_progress=False)
    finally:
        index.close()
