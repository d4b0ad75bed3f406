"""Real questions over long documents: documentation pages and the headings of their sections.

A section heading is a short statement of an information need written by the documentation's
authors ("Using logging in multiple modules", "How to adapt custom Python types to SQLite
values"). Removing every heading from a page leaves a long plain document; each heading then
becomes a query whose relevant document is its page and whose answer span is its section's
body, so both document retrieval and passage hit@1 are measured on real text.

Pages come from reStructuredText sources (a CPython ``Doc/`` tree, or the ``_sources`` folder of
built Sphinx HTML such as Debian's ``python3.11-doc``). FAQ pages are dropped, and pages split
into disjoint train/eval halves by :func:`~lmk_rag.eval.corpora.split_of` of their name.
"""

from __future__ import annotations

import glob
import os
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from .corpora import SourceText, is_faq, split_of
from .tasks import RetrievalTask, TokenCounter

# Sections of the CPython docs left out of every split: the language reference overlaps the
# pydoc topics used for training, FAQ pages are held out, changelogs are not prose about a page.
EXCLUDED_DIRS = ("faq", "reference", "whatsnew", "includes")
_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:+.-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]+)``")
_META_DIRECTIVE = re.compile(
    r"^\.\. (index|module|currentmodule|sectionauthor|moduleauthor|highlight|testsetup|testcleanup|"
    r"toctree|only|include|literalinclude|raw|_[^:]+):"
)


@dataclass(frozen=True)
class Section:
    """One section of a page: its heading, nesting level (0 = page title) and body span."""

    title: str
    level: int
    start: int  # body start in the page's plain text
    end: int  # body end (the next heading, of any level)


@dataclass(frozen=True)
class Page:
    """A documentation page as plain text without headings, and its sections."""

    name: str
    text: str
    sections: tuple[Section, ...]


def _inline(line: str) -> str:
    """Roles and literals as their text: ``:func:`~os.path.join``` -> ``os.path.join``."""
    line = _ROLE.sub(lambda m: m.group(1).lstrip("~!"), line)
    return _LITERAL.sub(r"\1", line)


def parse_rst(name: str, source: str) -> Page:
    """Headings out, sections recorded; meta directives (index, module, labels...) dropped."""
    lines = source.splitlines()
    styles: dict[tuple[str, bool], int] = {}
    out: list[str] = []
    size = 0
    headings: list[tuple[str, int, int]] = []  # (title, level, body start)
    i, skip_indented = 0, False
    while i < len(lines):
        line = lines[i]
        if skip_indented:
            if not line.strip() or line[:1].isspace():
                i += 1
                continue
            skip_indented = False
        overline = bool(_ADORNMENT.match(line)) and i + 2 < len(lines) and lines[i + 2].strip() == line.strip()
        t = i + 1 if overline else i
        title = lines[t].strip() if t < len(lines) else ""
        under = lines[t + 1] if t + 1 < len(lines) else ""
        if (
            title
            and not _ADORNMENT.match(lines[t])
            and _ADORNMENT.match(under)
            and len(under.strip()) >= len(title) - 1
        ):
            key = (under.strip()[0], overline)
            level = styles.setdefault(key, len(styles))
            clean = " ".join(_inline(title).split())
            if level == 0 and not headings:  # the page title stays in the text
                out.append(clean)
                size += len(clean) + 1
            headings.append((clean, level, size))
            i = t + 2
            continue
        if _META_DIRECTIVE.match(line):
            skip_indented = True
            i += 1
            continue
        text = _inline(line)
        out.append(text)
        size += len(text) + 1
        i += 1
    text = "\n".join(out)
    sections = tuple(
        Section(title, level, start, headings[j + 1][2] if j + 1 < len(headings) else len(text))
        for j, (title, level, start) in enumerate(headings)
    )
    return Page(name, text, sections)


def python_docs_folder() -> Path:
    """The reST sources of the Python documentation on this machine (``LMK_PYTHON_DOCS`` first)."""
    env = os.environ.get("LMK_PYTHON_DOCS")
    candidates = [env] if env else sorted(glob.glob("/usr/share/doc/python3*/html/_sources"), reverse=True)
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    raise InvalidInputError(
        "no Python documentation sources found: set LMK_PYTHON_DOCS to a CPython Doc/ folder or a Sphinx "
        "_sources folder (Debian/Ubuntu: apt-get install python3.11-doc, or apt-get download python3.11-doc "
        "&& dpkg -x python3.11-doc_*.deb DIR, then DIR/usr/share/doc/python3.11/html/_sources)"
    )


def read_rst_pages(folder: str | Path | None = None, split: str | None = None) -> list[Page]:
    """Every ``.rst`` / ``.rst.txt`` page under ``folder`` (sorted), FAQ and excluded dirs dropped.

    ``split`` ('train' or 'eval') keeps one half of the pages, by a stable hash of the name.
    """
    if split not in (None, "train", "eval"):
        raise InvalidInputError(f"split must be 'train', 'eval' or None, got {split!r}")
    root = Path(folder) if folder is not None else python_docs_folder()
    if not root.is_dir():
        raise InvalidInputError(f"docs folder {str(root)!r} does not exist or is not a folder")
    pages = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or not (path.name.endswith(".rst") or path.name.endswith(".rst.txt")):
            continue
        name = str(path.relative_to(root)).removesuffix(".txt").removesuffix(".rst")
        if name.split("/")[0] in EXCLUDED_DIRS or (split and split_of(f"pydocs/{name}") != split):
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if is_faq(name, source):
            continue
        page = parse_rst(name, source)
        if page.text.strip():
            pages.append(page)
    return pages


def pages_as_texts(pages: Sequence[Page]) -> list[SourceText]:
    return [SourceText(f"pydocs/{p.name}", p.text) for p in pages]


def _length_bucket(tokens: int) -> float:
    """The power of two at or below ``tokens``, so reports group documents by length band."""
    return float(2 ** int(np.log2(max(int(tokens), 1))))


def _good_query(title: str) -> bool:
    words = re.findall(r"[A-Za-z]{2,}", title)
    return len(words) >= 3 or (title.endswith("?") and len(words) >= 2)


def query_sections(pages: Sequence[Page], min_body_chars: int = 300) -> list[tuple[Page, Section]]:
    """Sections whose heading reads as a query: >= 3 words, a real body, unique across pages."""
    candidates = [
        (page, s)
        for page in pages
        for s in page.sections
        if s.level > 0 and _good_query(s.title) and len(page.text[s.start : s.end].strip()) >= min_body_chars
    ]
    counts = Counter(s.title.lower() for _, s in candidates)
    return [(p, s) for p, s in candidates if counts[s.title.lower()] == 1]


def section_task(
    pages: Sequence[Page],
    count_tokens: TokenCounter,
    *,
    min_doc_tokens: int = 2048,
    max_doc_tokens: int = 8192,
    max_queries_per_doc: int = 8,
    seed: int = 0,
    name: str = "docs-sections",
) -> RetrievalTask:
    """Long pages (``min_doc_tokens``..``max_doc_tokens``) as documents, section headings as queries."""
    tokens = count_tokens([p.text for p in pages])
    long_pages = [p for p, n in zip(pages, tokens) if min_doc_tokens <= n <= max_doc_tokens]
    if not long_pages:
        raise InvalidInputError(f"no page has {min_doc_tokens}..{max_doc_tokens} tokens; give a larger docs folder")
    page_tokens = dict(zip([p.name for p in pages], tokens.tolist()))
    rng = random.Random(seed)
    by_page: dict[str, list[Section]] = {}
    for page, section in query_sections(long_pages):
        by_page.setdefault(page.name, []).append(section)
    qids: list[str] = []
    queries: list[str] = []
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    for page in long_pages:
        picked = by_page.get(page.name, [])
        if len(picked) > max_queries_per_doc:
            picked = sorted(rng.sample(picked, max_queries_per_doc), key=lambda s: s.start)
        for section in picked:
            qid = f"q{len(qids)}"
            qids.append(qid)
            queries.append(section.title)
            qrels[qid] = {page.name: 1}
            answers[qid] = (page.name, section.start, section.end)
            meta[qid] = {
                "position": round(4 * section.start / max(len(page.text), 1)) / 4,
                "length": _length_bucket(page_tokens[page.name]),
            }
    if not qids:
        raise InvalidInputError("no section heading qualifies as a query; give a larger docs folder")
    return RetrievalTask(
        name, [p.name for p in long_pages], [p.text for p in long_pages], qids, queries, qrels, answers, meta
    )


def short_section_task(
    pages: Sequence[Page],
    count_tokens: TokenCounter,
    *,
    min_tokens: int = 32,
    max_tokens: int = 256,
    name: str = "docs-sections-short",
) -> RetrievalTask:
    """Short-text retrieval: each section body of 32..256 tokens is a document, its heading the query."""
    sections = query_sections(pages)
    bodies = [page.text[s.start : s.end].strip() for page, s in sections]
    tokens = count_tokens(bodies) if bodies else np.zeros(0, dtype=int)
    keep = [i for i, n in enumerate(tokens) if min_tokens <= n <= max_tokens]
    if not keep:
        raise InvalidInputError(f"no section body has {min_tokens}..{max_tokens} tokens; give a larger docs folder")
    doc_ids = [f"{sections[i][0].name}#{j}" for j, i in enumerate(keep)]
    qids = [f"q{j}" for j in range(len(keep))]
    return RetrievalTask(
        name,
        doc_ids,
        [bodies[i] for i in keep],
        qids,
        [sections[i][1].title for i in keep],
        {q: {d: 1} for q, d in zip(qids, doc_ids)},
        query_meta={q: {"length": _length_bucket(tokens[i])} for q, i in zip(qids, keep)},
    )
