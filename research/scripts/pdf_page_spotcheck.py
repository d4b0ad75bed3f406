"""Spot check of the pages cited for real PDFs (issue #47): every landmark of each PDF, its text
looked up in the pages the page map names for it, each page's text extracted on its own.

    python research/scripts/pdf_page_spotcheck.py /usr/share/doc/libtasn1-doc/libtasn1.pdf ...
"""

from __future__ import annotations

import sys
from pathlib import Path

import pypdfium2 as pdfium

from lmk_rag import LMKEncoder
from lmk_rag.ingest import read_document
from lmk_rag.ingest.pdf import _clean


def main() -> None:
    encoder = LMKEncoder()
    for name in sys.argv[1:]:
        read = read_document(Path(name))
        from lmk_rag.types import PageMap

        pages = PageMap.from_metadata(dict(read.metadata))
        assert pages is not None
        pdf = pdfium.PdfDocument(name)
        own = [" ".join(_clean(pdf[i].get_textpage().get_text_bounded()).split()) for i in range(len(pdf))]
        (mv,) = encoder.encode_multi([read.text])
        right = checked = 0
        for a, b in mv.spans:
            words = read.text[a:b].split()
            if len(words) < 4:
                continue
            checked += 1
            probe = " ".join(words[:4])  # the landmark's first words, on a page the map names
            cited = pages.pages((a, b))
            right += probe in " ".join(own[p - 1] for p in cited)  # pages in a row: words across a break
        print(f"{Path(name).name}: {len(own)} pages, {checked} landmarks checked, {right} found on a cited page")


if __name__ == "__main__":
    main()
