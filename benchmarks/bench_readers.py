"""The readers' share of ingest time, for a folder of HTML pages and a folder of PDFs, in one run.

For each folder: the time to read every file as `lmk-rag ingest` does (`read_document`: HTML main
text, PDF text and page map), the time to encode the texts read (`encode_multi`, the packaged
model), and the reader's share of the two. The encoder should dominate. Run it on an idle machine:

    LMK_DOCS_ROOT=... python benchmarks/bench_readers.py   # sqlite3-doc's pages, libtasn1-doc's PDF
    python benchmarks/bench_readers.py --html my_site/ --pdf my_pdfs/
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lmk_rag import LMKEncoder
from lmk_rag.ingest import NotText, discover, read_document


def measure(encoder: LMKEncoder, folder: Path, suffix: str, limit: int) -> None:
    files = [p for _, p in discover([folder]).files if p.suffix.lower() == suffix][:limit]
    start = time.perf_counter()
    texts = []
    for path in files:
        try:
            texts.append(read_document(path).text)
        except (NotText, ValueError):
            continue
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    multis = encoder.encode_multi(texts, show_progress=False)
    encode_s = time.perf_counter() - start
    tokens = sum(m.n_tokens for m in multis)
    share = read_s / (read_s + encode_s)
    print(
        f"{folder} ({suffix}): {len(texts)} files, {sum(map(len, texts)) / 1e3:.0f}k chars, "
        f"{tokens / 1e3:.0f}k tokens; reading {read_s:.1f} s, encoding {encode_s:.1f} s: the reader's share {share:.1%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    docs_root = Path(os.environ.get("LMK_DOCS_ROOT", "/work/docs-root"))
    html = docs_root / "sqlite3-doc/usr/share/doc/sqlite3"
    ap.add_argument("--html", type=Path, default=html, help="a folder of HTML pages (default: sqlite3-doc's)")
    ap.add_argument("--pdf", type=Path, default=Path("/usr/share/doc/libtasn1-doc"), help="a folder of PDFs")
    ap.add_argument("--max-files", type=int, default=60)
    args = ap.parse_args()
    encoder = LMKEncoder()
    encoder.encode_multi(["warm-up"], show_progress=False)
    measure(encoder, args.html, ".html", args.max_files)
    measure(encoder, args.pdf, ".pdf", args.max_files)


if __name__ == "__main__":
    main()
