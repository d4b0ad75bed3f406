"""Ingest a folder of text into an embedded Qdrant LMK index, then query it.

Each file becomes one Qdrant point: a pooled LMK vector and a MAX_SIM multivector of its
landmarks, with text, metadata and landmark spans in the payload. Re-running replaces
documents by id (the file's relative path), so nothing is duplicated.

    python examples/ingest_qdrant.py [FOLDER] [--index ./lmk_index] [--url http://host:6333]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", nargs="?", default=str(HERE / "sample_corpus"))
    parser.add_argument("--index", default="./lmk_index", help="embedded index folder")
    parser.add_argument("--url", default=None, help="a Qdrant server instead, e.g. http://localhost:6333")
    parser.add_argument("--query", default="How long do solar inverters last?")
    args = parser.parse_args()

    root = Path(args.folder)
    paths = sorted(p for p in root.rglob("*") if p.suffix in {".md", ".txt", ".rst"})
    ids = [str(p.relative_to(root)) for p in paths]
    texts = [p.read_text(encoding="utf-8") for p in paths]
    metadatas = [{"source": i, "suffix": p.suffix} for i, p in zip(ids, paths)]

    encoder = LMKEncoder()
    where = {"url": args.url} if args.url else {"path": args.index}
    with QdrantIndex(**where, encoder=encoder) as index:
        index.add(texts, ids=ids, metadatas=metadatas)
        print(f"{len(index)} documents in {args.url or args.index}")
        for hit in index.search(args.query, k=3):
            print(f"{hit.score:.3f}  {hit.id}  landmark {hit.landmark} {hit.span}: {hit.passage.strip()[:90]!r}")


if __name__ == "__main__":
    main()
