"""HTML -> the page's main text (trafilatura): navigation, headers, footers, sidebars and widgets
left out; what is kept rendered as plain text, blocks apart by a blank line (a paragraph boundary
for the context builder): headings and paragraphs on one line each, lists as ``- item`` lines,
tables as rows of ``cell | cell``, code as written; the title kept apart for metadata."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidInputError, MissingDependencyError
from .text import decode_text

if TYPE_CHECKING:
    import lxml.etree

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
    _wrap_loose_text(tree)
    # Headings as paragraphs: trafilatura drops headings it does not see followed by text of their
    # own (every question of the zsh FAQ, most of Django's and Debian's), and a question or section
    # title is what a query matches first. Each stays a line of its own.
    for heading in tree.xpath("//h1 | //h2 | //h3 | //h4 | //h5 | //h6"):
        heading.tag = "p"
    link_words = {w.lower() for a in tree.iter("a") for w in _WORDS.findall(a.text_content())}
    extracted = trafilatura.bare_extraction(
        tree, favor_recall=True, include_tables=True, include_formatting=True, with_metadata=False
    )
    body = extracted.body if isinstance(extracted, trafilatura.settings.Document) else None
    text = "\n\n".join(block for block in map(_block, body if body is not None else []) if block)
    words = {w.lower() for w in _WORDS.findall(text)}
    if not words or words <= link_words:
        raise InvalidInputError("no main text in the HTML page (only navigation, scripts or an empty body)")
    return HTMLText(text, title)


_BLOCKS = frozenset(
    {"p", "div", "pre", "table", "ul", "ol", "dl", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "section"}
    | {"article", "main", "header", "footer", "nav", "aside", "form", "hr", "figure", "details", "address"}
    | {"center", "fieldset"}
)
_CONTAINERS = ("body", "div", "section", "article", "main", "td", "th", "dd", "li", "blockquote", "center")


def _wrap_loose_text(tree: lxml.etree._Element) -> None:
    """Wrap text that lies loose between blocks (``<pre>...</pre> or equivalently <pre>``, older
    hand-written pages) in paragraphs: trafilatura reads blocks and drops such runs."""
    for container in list(tree.iter(*_CONTAINERS)):
        children = list(container)
        if not any(isinstance(c.tag, str) and c.tag in _BLOCKS for c in children):
            continue
        rebuilt: list[lxml.etree._Element] = []
        text = container.text
        inline: list[lxml.etree._Element] = []
        for child in children:
            if isinstance(child.tag, str) and child.tag not in _BLOCKS:
                inline.append(child)  # moves with its tail
                continue
            rebuilt += _run(text, inline)
            text, inline = child.tail, []
            child.tail = None
            rebuilt.append(child)
        rebuilt += _run(text, inline)
        container.text = None
        for child in list(container):
            container.remove(child)
        container.extend(rebuilt)


def _run(text: str | None, inline: list[lxml.etree._Element]) -> list[lxml.etree._Element]:
    """A run of loose text and inline elements: one paragraph when it holds text, else as it was."""
    import lxml.html

    if not (text and text.strip()) and not any(_has_text(e) for e in inline):
        return inline
    paragraph = lxml.html.Element("p")
    paragraph.text = text
    paragraph.extend(inline)
    return [paragraph]


def _has_text(element: lxml.etree._Element) -> bool:
    return bool("".join(element.itertext()).strip() or (element.tail or "").strip())


def _text(element: lxml.etree._Element, skip: tuple[str, ...] = ()) -> str:
    """The text of an extracted element: line breaks (``<lb/>``) as newlines, elements named in
    ``skip`` (a nested list) left out, their tails kept."""
    parts = [element.text or ""]
    for child in element:
        if child.tag == "lb":
            parts.append("\n")
        elif child.tag not in skip:
            parts.append(_text(child, skip))
        parts.append(child.tail or "")
    return "".join(parts)


def _flat(element: lxml.etree._Element, skip: tuple[str, ...] = ()) -> str:
    return " ".join(_text(element, skip).split())


def _list(element: lxml.etree._Element, depth: int = 0) -> list[str]:
    lines = []
    for item in element.findall("item"):
        own = _flat(item, skip=("list",))
        if own:
            lines.append(f"{'  ' * depth}- {own}")
        for nested in item.findall("list"):
            lines += _list(nested, depth + 1)
    return lines


def _block(element: lxml.etree._Element) -> str:
    """One block of the extracted tree as plain text: a paragraph or heading on one line, a list as
    ``- item`` lines (nested ones indented), a table as rows of ``cell | cell``, code as written."""
    if element.tag == "code":
        lines = _text(element).expandtabs(4).splitlines()
        return "\n".join(line.rstrip() for line in lines).strip("\n")
    if element.tag == "list":
        return "\n".join(_list(element))
    if element.tag == "table":
        rows = (" | ".join(_flat(cell) for cell in row.findall("cell")) for row in element.iter("row"))
        return "\n".join(row for row in rows if row.strip(" |"))
    return _flat(element)
