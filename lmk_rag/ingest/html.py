"""HTML -> the page's main text (trafilatura): navigation, headers, footers, sidebars and widgets
left out; headings, list items, code lines (indented as written) and table rows (cells separated by ``|``) each on lines
of their own; the title kept apart for metadata."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InvalidInputError, MissingDependencyError
from .text import decode_text

# Permalink anchors that documentation generators put after each heading ("Install¶", "Install#").
_PERMALINK_XPATH = (
    "//a[starts-with(@href, '#') and (normalize-space(.)='¶' or normalize-space(.)='#' or normalize-space(.)='§'"
    " or @class='headerlink')]"
)
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class HTMLText:
    """A page's main text and its title ("" when it has none)."""

    text: str
    title: str


def html_main_text(markup: str | bytes) -> HTMLText:
    """The main text of an HTML page (see the module docstring); InvalidInputError when the page
    has none: nothing but navigation links, scripts or an empty body."""
    try:
        import lxml.html
        import trafilatura
    except ImportError as exc:  # a broken install: say what to reinstall, not a traceback per page
        raise MissingDependencyError(
            f"reading HTML needs trafilatura and lxml_html_clean ({exc}): pip install trafilatura lxml_html_clean"
        ) from exc

    if isinstance(markup, bytes):  # decoded as ingest does: BOM, UTF-8, the declared charset, detection
        markup = decode_text(markup, html=True).text
    try:
        # As UTF-8 bytes with the parser told so: lxml refuses text that declares an encoding
        # (<?xml version="1.0" encoding="UTF-8"?>, as DocBook pages begin).
        parser = lxml.html.HTMLParser(encoding="utf-8")
        tree = lxml.html.document_fromstring(markup.encode("utf-8", "surrogatepass"), parser=parser)
    except (ValueError, lxml.etree.ParserError) as exc:
        raise InvalidInputError("no HTML content (an empty or unparsable page)") from exc
    title = " ".join((tree.findtext(".//title") or "").split())
    for anchor in tree.xpath(_PERMALINK_XPATH):
        anchor.drop_tree()
    link_words = {w.lower() for a in tree.iter("a") for w in _WORDS.findall(a.text_content())}
    extracted = trafilatura.bare_extraction(
        tree, favor_recall=True, include_tables=True, include_comments=False, with_metadata=False
    )
    text = (extracted.text if isinstance(extracted, trafilatura.settings.Document) else "") or ""
    words = {w.lower() for w in _WORDS.findall(text)}
    if not words or words <= link_words:
        raise InvalidInputError("no main text in the HTML page (only navigation, scripts or an empty body)")
    return HTMLText("\n".join(line for line in map(_tidy, text.splitlines()) if line), title)


def _tidy(line: str) -> str:
    """A line with runs of spaces inside it collapsed and its indentation (code) kept, tabs as 4 spaces."""
    body = " ".join(line.split()).removesuffix(" |")
    if not body:
        return ""
    indent = line[: len(line) - len(line.lstrip())].expandtabs(4)
    return indent + body
