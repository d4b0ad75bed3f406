"""A minimal PDF writer for tests: pages of known text (Helvetica, one line per string), optional
page labels (roman front matter, then 1, 2, ...), optional Title; nothing but the standard library."""

from __future__ import annotations


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]], *, roman_front: int = 0, title: str = "") -> bytes:
    """A PDF whose page i shows the lines ``pages[i]``; the first ``roman_front`` pages are labelled
    i, ii, ... and the rest 1, 2, ... (as a book's front matter)."""
    objects: list[bytes] = []
    n = len(pages)
    font_id, pages_id = 3, 2
    page_ids = [4 + 2 * i for i in range(n)]
    labels = ""
    if roman_front:
        labels = f" /PageLabels << /Nums [0 << /S /r >> {roman_front} << /S /D >>] >>"
    objects.append(f"<< /Type /Catalog /Pages {pages_id} 0 R{labels} >>".encode())
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, lines in enumerate(pages):
        body = "BT /F1 11 Tf 14 TL 72 760 Td " + " ".join(f"({_escape(line)}) Tj T*" for line in lines) + " ET"
        stream = body.encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent {pages_id} 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {page_ids[i] + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    info_id = None
    if title:
        objects.append(f"<< /Title ({_escape(title)}) >>".encode("latin-1"))
        info_id = len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    info = f" /Info {info_id} 0 R" if info_id else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
