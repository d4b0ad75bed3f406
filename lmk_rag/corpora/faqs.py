"""FAQ documents as question-style evaluation data: questions people wrote, answers as spans.

Each :class:`FaqSource` is one project's FAQ as Debian ships it. Its pages are parsed like the
documentation domains (:func:`~lmk_rag.corpora.domains.parse_html`): every heading (and, for FAQs
written as definition lists, every term) is taken out of the text; a heading that is a question
becomes a query, and its section (up to the next heading) is the answer span. Lines that repeat a
question elsewhere on the page (a list of questions at the top) are taken out too, so a question
can only be answered by its answer, never found by its own words.

Sources are assigned once to a split: **dev** (where the context builder's rule is chosen) and
**test** (reported once). All of Perl's and Python's documentation is reserved for an independent
evaluation and is never a source here.
"""

from __future__ import annotations

import bisect
import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError
from .domains import package_folder, parse_html
from .rst import Page, Section

FAQ_SPLITS = ("dev", "test")


@dataclass(frozen=True)
class FaqSource:
    """One project's FAQ: where its HTML pages live inside the Debian package."""

    name: str
    package: str
    folder: str
    split: str
    include: tuple[str, ...] = ("*.html",)
    terms_are_questions: bool = False  # questions written as <dt> terms (asciidoc's FAQs)

    def __post_init__(self) -> None:
        if self.split not in FAQ_SPLITS:
            raise InvalidInputError(f"split must be one of {FAQ_SPLITS}, got {self.split!r}")


# Chosen by source before any result was seen: dev from train-domain packages (whose FAQ pages
# were never trained on), test from the test domains' packages and the Debian FAQ.
FAQ_SOURCES: dict[str, FaqSource] = {
    s.name: s
    for s in (
        FaqSource("sqlalchemy", "python-sqlalchemy-doc", "usr/share/doc/python-sqlalchemy-doc/html/faq", "dev"),
        FaqSource("zsh", "zsh-doc", "usr/share/doc/zsh-common/html", "dev", include=("FAQ0*.html",)),
        FaqSource("fetchmail", "fetchmail", "usr/share/doc/fetchmail", "dev", include=("fetchmail-FAQ.html",)),
        FaqSource("r", "r-doc-html", "usr/share/R/doc/manual", "dev", include=("R-FAQ.html",)),
        FaqSource("debian", "debian-faq", "usr/share/doc/debian/FAQ", "test", include=("*.en.html",)),
        FaqSource("django", "python-django-doc", "usr/share/doc/python-django-doc/html/faq", "test"),
        FaqSource(
            "git", "git-doc", "usr/share/doc/git-doc", "test", include=("gitfaq.html",), terms_are_questions=True
        ),
    )
}

# "1.2: ", "G1. ", "(3) ", "Q: ", "5.1. " before a question.
_QUESTION_NUMBER = re.compile(r"^(?:Q:\s*|\(\d+\)\s*|[A-Z]?\d+(?:\.\d+)*[.:]?\s+)")
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class FaqQuestion:
    """A question of a FAQ page and its answer: ``page.text[start:end]``."""

    question: str
    start: int
    end: int


def faq_sources_of(spec: str) -> list[FaqSource]:
    """'dev', 'test' (every source of that split), or source names joined by commas."""
    if spec in FAQ_SPLITS:
        return [s for s in FAQ_SOURCES.values() if s.split == spec]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAQ_SOURCES]
    if unknown or not names:
        raise InvalidInputError(
            f"unknown FAQ source(s) {unknown or spec!r}; use one of {FAQ_SPLITS} or names from {sorted(FAQ_SOURCES)}"
        )
    return [FAQ_SOURCES[n] for n in names]


def faq_folder(source: FaqSource, root: str | Path | None = None) -> Path:
    """Where ``source``'s pages live under ``root`` (default: ``$LMK_DOCS_ROOT``), or an error that
    says how to extract its package."""
    return package_folder(f"the {source.name} FAQ", source.package, source.folder, root)


def question_text(title: str) -> str | None:
    """A heading as a query, its numbering taken off; None when it is not a question."""
    text = _QUESTION_NUMBER.sub("", title.strip()).strip()
    return text if text.endswith("?") and len(_WORDS.findall(text)) >= 3 else None


def read_faq(source: FaqSource, root: str | Path | None = None) -> list[tuple[Page, list[FaqQuestion]]]:
    """The source's pages (sorted by name, ``source/relative path``), each with its questions;
    pages without questions are kept (they are documents a search must rank below the answer's)."""
    folder = faq_folder(source, root)
    out = []
    for pattern in source.include:
        for path in sorted(folder.glob(pattern)):
            raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
            page = parse_html(
                f"{source.name}/{path.relative_to(folder).as_posix()}",
                raw.decode("utf-8", errors="replace"),
                faq=True,
                terms_are_headings=source.terms_are_questions,
            )
            if page.text.strip():
                out.append(_questions_of(page, source.terms_are_questions))
    return out


def _questions_of(page: Page, terms_are_questions: bool) -> tuple[Page, list[FaqQuestion]]:
    """The page without lines that repeat a question, and its questions with their answers."""
    asked: list[tuple[str, Section]] = []
    for section in page.sections[1:]:
        query = question_text(section.title)
        if query is None and terms_are_questions and section.level >= 6:
            query = _QUESTION_NUMBER.sub("", section.title.strip()).strip() or None
        if query is not None:
            asked.append((query, section))
    wanted = {_key(q) for q, _ in asked} | {_key(s.title) for _, s in asked}
    cuts = []
    for m in re.finditer(r"[^\n]*\n?", page.text):
        if m.group().strip() and _key(_QUESTION_NUMBER.sub("", m.group().strip())) in wanted:
            cuts.append((m.start(), m.end()))
    text, shift = _cut(page.text, cuts)
    questions = []
    for query, section in asked:
        start, end = shift(section.start), shift(section.end)
        body = text[start:end]
        if len(body.strip()) >= 40:  # an answer of a few words is a link elsewhere, not an answer
            lead = len(body) - len(body.lstrip())
            tail = len(body) - len(body.rstrip())
            questions.append(FaqQuestion(query, start + lead, end - tail))
    sections = tuple(Section(s.title, s.level, shift(s.start), shift(s.end)) for s in page.sections)
    return Page(page.name, text, sections), questions


def _key(line: str) -> str:
    return " ".join(_WORDS.findall(line.lower()))


def _cut(text: str, cuts: list[tuple[int, int]]) -> tuple[str, Callable[[int], int]]:
    """``text`` without the ``cuts`` ranges (sorted, disjoint), and the map of old offsets to new."""
    kept: list[str] = []
    starts: list[int] = []
    removed: list[int] = []
    pos = total = 0
    for a, b in cuts:
        kept.append(text[pos:a])
        total += b - a
        starts.append(a)
        removed.append(total)
        pos = b
    kept.append(text[pos:])

    def shift(offset: int) -> int:
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            return offset
        a = starts[i]
        before = removed[i - 1] if i > 0 else 0
        length = removed[i] - before
        return a - before if offset < a + length else offset - removed[i]

    return "".join(kept), shift
