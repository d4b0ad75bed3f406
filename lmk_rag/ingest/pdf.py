"""PDF -> one document and its page map (pypdfium2): every page's text in reading order, pages
joined by a blank line, ligatures and soft hyphens resolved, dot leaders shortened; where each
page begins is kept (:class:`~lmk_rag.types.PageMap`) so hits and passages can cite pages."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from ..errors import InvalidInputError
from ..types import PageMap

_LIGATURES = re.compile("[\ufb00-\ufb06]")
# A soft hyphen pdfium reports at a line break ("infor\x02\r\nmation"): the word is joined.
_SOFT_HYPHEN_BREAK = re.compile("[\x02\ufffe\u00ad]\r?\n")
_LEADER = re.compile(r"(?: ?\.){4,}")  # ". . . . . 144" in tables of contents
_PAGE_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class PDFText:
    """A PDF's text, where each page starts in it, and its title ("" when it records none)."""

    text: str
    pages: PageMap
    title: str


def _clean(page: str) -> str:
    page = _SOFT_HYPHEN_BREAK.sub("", page).replace("\r\n", "\n").replace("\r", "\n")
    page = _LIGATURES.sub(lambda m: unicodedata.normalize("NFKC", m.group()), page)
    page = page.replace("\x02", "").replace("\ufffe", "")
    return "\n".join(_LEADER.sub(" …", line).rstrip() for line in page.split("\n")).strip()


def pdf_text(raw: bytes) -> PDFText:
    """The text and page map of the PDF ``raw``; InvalidInputError for a damaged PDF, one that
    needs a password, or one with no text layer (scanned pages: OCR is not done)."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise InvalidInputError("the PDF needs a password (encrypted PDFs are not read)") from exc
        raise InvalidInputError(f"damaged PDF ({exc})") from exc
    try:
        texts, starts, labels, at = [], [], [], 0
        for i in range(len(pdf)):
            page = pdf[i]
            try:
                textpage = page.get_textpage()
                text = _clean(textpage.get_text_bounded())
                textpage.close()
            finally:
                page.close()
            starts.append(at)
            labels.append(pdf.get_page_label(i) or str(i + 1))
            texts.append(text)
            at += len(text) + len(_PAGE_SEPARATOR)
        title = " ".join(str(pdf.get_metadata_dict().get("Title", "")).split())
    except pdfium.PdfiumError as exc:
        raise InvalidInputError(f"damaged PDF ({exc})") from exc
    finally:
        pdf.close()
    if not any(t.strip() for t in texts):
        what = f"its {len(texts)} page{'s' if len(texts) != 1 else ''} have" if texts else "it has no pages and"
        raise InvalidInputError(f"no text layer in the PDF ({what} no text: scanned pages? OCR is not done)")
    return PDFText(_PAGE_SEPARATOR.join(texts), PageMap(tuple(starts), tuple(labels)), title)
