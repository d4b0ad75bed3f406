"""Ingest a folder of text into an embedded Chroma LMK index, then query it.

Chroma has no multivector type, so each landmark is a row (document id, landmark index and
span in its metadata) and the document text is stored once; queries group landmark rows back
per document. Re-running replaces documents by id.

    python examples/ingest_chroma.py [FOLDER] [--index ./lmk_chroma] [--host localhost --port 8000]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmk_rag import LMKEncoder
from lmk_rag.index import ChromaIndex

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", nargs="?", default=str(HERE / "sample_corpus"))
    parser.add_argument("--index", default="./lmk_chroma", help="embedded index folder")
    parser.add_argument("--host", default=None, help="a Chroma server instead (`chroma run`)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--query", default="Why are there two high tides a day?")
    args = parser.parse_args()

    root = Path(args.folder)
    paths = sorted(p for p in root.rglob("*") if p.suffix in {".md", ".txt", ".rst"})
    ids = [str(p.relative_to(root)) for p in paths]
    texts = [p.read_text(encoding="utf-8") for p in paths]

    where = {"host": args.host, "port": args.port} if args.host else {"path": args.index}
    index = ChromaIndex(**where, encoder=LMKEncoder())
    index.add(texts, ids=ids, metadatas=[{"source": i} for i in ids])
    print(f"{len(index)} documents in {args.host or args.index}")
    for hit in index.search(args.query, k=3):
        print(f"{hit.score:.3f}  {hit.id}  landmark {hit.landmark} {hit.span}: {hit.passage.strip()[:90]!r}")


if __name__ == "__main__":
    main()
