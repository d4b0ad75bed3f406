"""reStructuredText documentation pages as plain text without headings, and their sections.

Pages come from reStructuredText sources (a CPython ``Doc/`` tree, or the ``_sources`` folder of
built Sphinx HTML such as Debian's ``python3.11-doc``). FAQ pages are dropped, and pages split
into disjoint train/eval halves by :func:`~lmk_rag.corpora.texts.split_of` of their name, so
training (``lmk_rag.train``) and evaluation (``lmk_rag.eval``) read disjoint pages.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError
from .texts import SourceText, is_faq, split_of

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
    """Pages as plain training texts named ``pydocs/NAME``."""
    return [SourceText(f"pydocs/{p.name}", p.text) for p in pages]


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
