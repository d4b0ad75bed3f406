"""PDF text libraries compared (issue #47): speed, ligatures left in the text, and reading order
measured as word-bigram recall against the same document's HTML edition.

    python research/scripts/pdf_text.py
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import trafilatura

PAIRS = {  # a PDF and the HTML page(s) of the same document
    "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf": [
        str(p) for p in sorted(Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.html").glob("*.html"))
    ],
    "/work/docs-root/debian-reference-en/usr/share/debian-reference/debian-reference.en.pdf": sorted(
        str(p) for p in Path("/work/docs-root/debian-reference-en/usr/share/debian-reference").glob("ch*.en.html")
    ),
    "/usr/share/doc/libtasn1-doc/libtasn1.pdf": [],
    "/work/docs-root/zsh-doc/usr/share/doc/zsh-common/zsh.pdf": [],
}
LIGATURES = re.compile("[\ufb00-\ufb06]")


def pypdf_pages(path: str) -> list[str]:
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(path).pages]


def pdfium_pages(path: str) -> list[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        return [pdf[i].get_textpage().get_text_bounded() for i in range(len(pdf))]
    finally:
        pdf.close()


def bigrams(text: str) -> Counter[tuple[str, str]]:
    words = re.findall(r"\w+", text.lower())
    return Counter(zip(words, words[1:]))


def main() -> None:
    for pdf, htmls in PAIRS.items():
        ref = "\n".join(
            trafilatura.extract(Path(h).read_bytes(), favor_recall=True, include_tables=True) or "" for h in htmls
        )
        print(f"{Path(pdf).name}")
        for name, fn in (("pypdf", pypdf_pages), ("pypdfium2", pdfium_pages)):
            start = time.perf_counter()
            pages = fn(pdf)
            seconds = time.perf_counter() - start
            text = "\n".join(pages)
            recall = ""
            if ref:
                b, r = bigrams(text), bigrams(ref)
                recall = f"bigram recall vs HTML {sum((b & r).values()) / sum(r.values()):.3f}"
            print(
                f"  {name:10s} {len(pages)} pages, {seconds / len(pages) * 1000:.1f} ms/page, "
                f"{len(LIGATURES.findall(text))} ligature chars, {len(text)} chars; {recall}"
            )


if __name__ == "__main__":
    main()
