"""Documentation trees of many projects, split by domain, not by page.

Each :class:`Domain` is one project's documentation as Debian ships it (``apt-get download
PACKAGE && dpkg -x PACKAGE_*.deb ROOT``). Its HTML pages become :class:`~.sections.Page` s with
every heading removed; each section heading is a query whose relevant document is its page and
whose answer span is its section (the sections task, built from another family of documents).

Domains are assigned once to a split: **train** (training data may come from them), **dev**
(model selection) and **test** (reported once per candidate, never tuned on). FAQ pages are left
out (questions are the question-style task's, :mod:`lmk_rag.corpora.faqs`, and never trained on);
all of Perl's and Python's documentation is reserved for an independent evaluation.
"""

from __future__ import annotations

import bisect
import fnmatch
import gzip
import html.parser
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError, PathNotFoundError
from .rst import Page, Section
from .texts import is_faq

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Domain:
    """One project's documentation: where its HTML lives inside the Debian package, which pages."""

    name: str
    package: str
    folder: str  # inside the extracted package
    split: str
    include: tuple[str, ...] = ("*.html",)
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise InvalidInputError(f"split must be one of {SPLITS}, got {self.split!r}")


_SPHINX_CHROME = ("_sources/*", "_modules/*", "genindex*.html", "search.html", "py-modindex.html", "changes.html")

# Chosen by domain before any result was seen; the test domains are reported, never tuned on.
DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        Domain(
            "linux",
            "linux-doc-6.1",
            "usr/share/doc/linux-doc-6.1/html",
            "train",
            exclude=("_sources/*", "translations/*", "genindex.html", "search.html"),
        ),
        Domain(
            "rust",
            "rust-doc",
            "usr/share/doc/rust-doc/html",
            "train",
            include=(
                "book/*.html",
                "reference/*.html",
                "cargo/*.html",
                "rustc/*.html",
                "edition-guide/*.html",
                "embedded-book/*.html",
                "nomicon/*.html",
                "rustdoc/*.html",
            ),
            exclude=("*/print.html", "*/404.html", "*/toc.html"),
        ),
        Domain("r", "r-doc-html", "usr/share/R/doc/manual", "train"),
        Domain("bash", "bash-doc", "usr/share/doc/bash", "train"),
        # More train domains (train split only, so the dev and test domains stay unseen).
        Domain("cmake", "cmake-doc", "usr/share/doc/cmake-data/html", "train", exclude=_SPHINX_CHROME),
        Domain(
            "apache",
            "apache2-doc",
            "usr/share/doc/apache2-doc/manual/en",
            "train",
            exclude=("index.html", "sitemap.html", "glossary.html", "mod/quickreference.html", "mod/directives.html"),
        ),
        Domain("sphinx", "sphinx-doc", "usr/share/doc/sphinx-doc/html", "train", exclude=_SPHINX_CHROME),
        Domain(
            "sqlalchemy",
            "python-sqlalchemy-doc",
            "usr/share/doc/python-sqlalchemy-doc/html",
            "train",
            exclude=(*_SPHINX_CHROME, "changelog/*"),
        ),
        Domain("flask", "python-flask-doc", "usr/share/doc/python-flask-doc/html", "train", exclude=_SPHINX_CHROME),
        Domain(
            "werkzeug", "python-werkzeug-doc", "usr/share/doc/python-werkzeug-doc/html", "train", exclude=_SPHINX_CHROME
        ),
        Domain(
            "pandas",
            "python-pandas-doc",
            "usr/share/doc/python-pandas-doc/html",
            "train",
            exclude=(*_SPHINX_CHROME, "reference/api/*", "generated/*", "whatsnew/*"),
        ),
        Domain(
            "scipy",
            "python-scipy-doc",
            "usr/share/doc/python-scipy-doc/html",
            "train",
            exclude=(*_SPHINX_CHROME, "reference/generated/*", "release/*"),
        ),
        Domain("zsh", "zsh-doc", "usr/share/doc/zsh-common/html", "train"),
        Domain("octave", "octave-doc", "usr/share/doc/octave", "train"),
        Domain(
            "erlang",
            "erlang-doc",
            "usr/share/doc/erlang-doc/lib",
            "train",
            include=("*/doc/html/*.html",),
            exclude=("*/java/*", "*/index.html"),
        ),
        Domain("nodejs", "nodejs-doc", "usr/share/doc/nodejs/api", "dev", exclude=("all.html", "index.html")),
        Domain("sqlite", "sqlite3-doc", "usr/share/doc/sqlite3", "dev", exclude=("releaselog/*", "changes.html")),
        # Dev domains far from every train domain (a Haskell compiler, a mail server, personal
        # accounting), so a dev difference has room to exceed its noise.
        Domain("ghc", "ghc-doc", "usr/share/doc/ghc-doc/html/users_guide", "dev", exclude=_SPHINX_CHROME),
        Domain("postfix", "postfix-doc", "usr/share/doc/postfix/html", "dev"),
        Domain("gnucash", "gnucash-docs", "usr/share/doc/gnucash-docs/gnucash-guide-en", "dev"),
        # End-user prose (a manual), the kind of text the other dev domains lack.
        Domain("gimp", "gimp-help-en", "usr/share/gimp/2.0/help/en", "dev"),
        Domain("git", "git-doc", "usr/share/doc/git-doc", "test", exclude=("RelNotes/*",)),
        Domain(
            "postgresql",
            "postgresql-doc-15",
            "usr/share/doc/postgresql-doc-15/html",
            "test",
            exclude=("release-*.html", "bookindex.html"),
        ),
        Domain(
            "django",
            "python-django-doc",
            "usr/share/doc/python-django-doc/html",
            "test",
            exclude=("releases/*", "_modules/*", "genindex.html", "py-modindex.html", "search.html"),
        ),
        Domain("debian-reference", "debian-reference-en", "usr/share/debian-reference", "test", include=("*.en.html",)),
    )
}

_SKIP_TAGS = {"script", "style", "nav", "header", "footer", "head", "noscript", "svg"}
# Navigation and chrome of the generators Debian's docs use (Sphinx, DocBook, asciidoc, mdBook, ...).
_SKIP_CLASSES = {
    "navheader",
    "navfooter",
    "sphinxsidebar",
    "related",
    "footer",
    "breadcrumbs",
    "toc",
    "toctree-wrapper",
    "headerlink",
    "sidebar",
    "menu",
    "nav-chapters",
    "mobile-nav-chapters",
    "searchbar",
    "navigation",
    "rst-versions",
    "wy-nav-side",
    "theme-popup",
    "skip-link",
    "copyright",
}
_VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "area", "base", "col", "source"}
_BLOCK = {"p", "div", "li", "tr", "pre", "dt", "dd", "table", "section", "blockquote", "ul", "ol", "br"}
_HEADING = re.compile(r"h([1-6])")
_NUMBERING = re.compile(r"^(?:(?:[A-Z]|\d+)\.)+(?:\d+\.?)?\s+|^(?:Chapter|Appendix|Part)\s+[\dA-Z]+\.?\s+")


class _SectionParser(html.parser.HTMLParser):
    """Plain text of a page with headings taken out and recorded at their text offsets."""

    skip_classes: frozenset[str] = frozenset(_SKIP_CLASSES)

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.size = 0
        self.headings: list[tuple[str, int, int]] = []  # (title, level, body start)
        self._stack: list[tuple[str, bool]] = []  # (tag, skipping)
        self._heading: tuple[int, list[str]] | None = None

    @property
    def _skipping(self) -> bool:
        return bool(self._stack) and self._stack[-1][1]

    def _emit(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def heading_level(self, tag: str) -> int | None:
        """The heading depth a tag opens (h1-h6), None for other tags."""
        match = _HEADING.fullmatch(tag)
        return int(match.group(1)) if match else None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        skipping = self._skipping or tag in _SKIP_TAGS or bool(classes & self.skip_classes)
        if tag not in _VOID:
            self._stack.append((tag, skipping))
        if skipping:
            return
        level = self.heading_level(tag)
        if level is not None:
            self._heading = (level, [])
        elif tag in _BLOCK and self.parts and not self.parts[-1].endswith("\n"):
            self._emit("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        while self._stack:  # close up to the matching tag (HTML in the wild leaves some open)
            open_tag, _ = self._stack.pop()
            if open_tag == tag:
                break
        if self._heading is not None and self.heading_level(tag) is not None:
            level, words = self._heading
            self._heading = None
            title = _NUMBERING.sub("", " ".join("".join(words).replace("¶", " ").replace("#", " ").split()))
            if title:
                if not self.headings:  # the page title stays in the text, as in the reST pages
                    self._emit(title + "\n")
                self.headings.append((title, level, self.size))
        elif tag in _BLOCK and self.parts and not self.parts[-1].endswith("\n"):
            self._emit("\n")

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._heading is not None:
            self._heading[1].append(data)
        else:
            self._emit(data)


class _FaqParser(_SectionParser):
    """A :class:`_SectionParser` for FAQ pages: texinfo's per-section navigation lines ("Next: ...,
    Previous: ..., Up: ...") are chrome, and with ``terms_are_headings`` definition-list terms
    (``<dt>``) are headings one level below h6 (FAQs written as a list of questions)."""

    skip_classes = frozenset({*_SKIP_CLASSES, "header"})

    def __init__(self, terms_are_headings: bool) -> None:
        super().__init__()
        self.terms_are_headings = terms_are_headings

    def heading_level(self, tag: str) -> int | None:
        return 7 if self.terms_are_headings and tag == "dt" else super().heading_level(tag)


def parse_html(name: str, markup: str, *, faq: bool = False, terms_are_headings: bool = False) -> Page:
    """A documentation page: plain text without headings, and one :class:`Section` per heading
    (level 0 for the first, the page title; the others by their h1-h6 depth). ``faq`` and
    ``terms_are_headings``: see :class:`_FaqParser`."""
    parser = _FaqParser(terms_are_headings) if faq or terms_are_headings else _SectionParser()
    parser.feed(markup)
    parser.close()
    text, squeeze = _normalise("".join(parser.parts))
    lead = len(text) - len(text.lstrip())
    text = text[lead:]

    def shift(offset: int) -> int:
        return max(0, squeeze(offset) - lead)

    heads = parser.headings
    top = min((lvl for _, lvl, _ in heads), default=1)
    sections = tuple(
        Section(
            title,
            0 if j == 0 else max(1, level - top + (1 if level == top else 0)),
            shift(start),
            shift(heads[j + 1][2]) if j + 1 < len(heads) else len(text),
        )
        for j, (title, level, start) in enumerate(heads)
    )
    return Page(name, text, sections)


# Carriage returns, indentation, trailing blanks and runs of blank lines (HTML source layout).
_LAYOUT = re.compile(r"\r|[ \t]*\n(?:[ \t]*\n)+[ \t]*|[ \t]*\n[ \t]*|[ \t]{2,}")


def _normalise(raw: str) -> tuple[str, Callable[[int], int]]:
    """``raw`` with layout whitespace collapsed, and the map of offsets from ``raw`` into it."""
    out: list[str] = []
    starts: list[int] = []  # raw offset where each collapsed run starts
    runs: list[tuple[int, int, int]] = []  # (raw end, output start, replacement length)
    pos = written = 0
    for m in _LAYOUT.finditer(raw):
        run = m.group()
        replacement = "\n\n" if run.count("\n") >= 2 else "\n" if "\n" in run else "" if run == "\r" else " "
        out.append(raw[pos : m.start()])
        written += m.start() - pos
        starts.append(m.start())
        runs.append((m.end(), written, len(replacement)))
        out.append(replacement)
        written += len(replacement)
        pos = m.end()
    out.append(raw[pos:])

    def shift(offset: int) -> int:
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            return offset
        end, out_start, length = runs[i]
        if offset < end:  # inside a collapsed run: at most its replacement's end
            return out_start + min(offset - starts[i], length)
        return out_start + length + (offset - end)

    return "".join(out), shift


def docs_root() -> Path:
    """Where the packages are extracted: ``$LMK_DOCS_ROOT`` (one folder per package, each the
    output of ``dpkg -x``), else ``/`` (the packages installed)."""
    return Path(os.environ.get("LMK_DOCS_ROOT", "/"))


def domain_folder(domain: Domain, root: str | Path | None = None) -> Path:
    """Where ``domain``'s HTML lives under ``root`` (default :func:`docs_root`), or an error that
    says how to extract the package."""
    return package_folder(f"the {domain.name} documentation", domain.package, domain.folder, root)


def package_folder(what: str, package: str, folder: str, root: str | Path | None = None) -> Path:
    """``folder`` of Debian ``package`` under ``root`` (a ``dpkg -x`` per package, or the installed
    tree), or an error naming ``what`` and saying how to extract the package."""
    base = Path(root) if root is not None else docs_root()
    for candidate in (base / package / folder, base / folder):
        if candidate.is_dir():
            return candidate
    raise PathNotFoundError(
        f"{what} is not at {base / package / folder}: run "
        f"`apt-get download {package} && dpkg -x {package}_*.deb {base / package}` "
        "(and set LMK_DOCS_ROOT to that folder's parent), or apt-get install it"
    )


def _wanted(rel: str, domain: Domain) -> bool:
    if not any(fnmatch.fnmatch(rel, pattern) for pattern in domain.include):
        return False
    return not any(fnmatch.fnmatch(rel, pattern) for pattern in domain.exclude)


def read_domain_pages(domain: Domain, root: str | Path | None = None) -> list[Page]:
    """The domain's pages (sorted by name), FAQ pages left out; ``name`` is ``domain/relative path``."""
    folder = domain_folder(domain, root)
    pages = []
    for path in sorted(folder.rglob("*.html*")):
        rel = path.relative_to(folder).as_posix().removesuffix(".gz")
        if not path.is_file() or not _wanted(rel, domain):
            continue
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        markup = raw.decode("utf-8", errors="replace")
        page = parse_html(f"{domain.name}/{rel}", markup)
        faq_folder = any("faq" in part.lower() for part in Path(rel).parts[:-1])
        if page.text.strip() and not faq_folder and not is_faq(rel, page.text[:4000]):
            pages.append(page)
    return pages


def domains_of(spec: str) -> list[Domain]:
    """'test', 'dev', 'train' (every domain of that split), or domain names joined by commas."""
    if spec in SPLITS:
        return [d for d in DOMAINS.values() if d.split == spec]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in DOMAINS]
    if unknown or not names:
        raise InvalidInputError(
            f"unknown domain(s) {unknown or spec!r}; use one of {SPLITS} or names from {sorted(DOMAINS)}"
        )
    return [DOMAINS[n] for n in names]
