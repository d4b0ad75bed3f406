"""Huge single files: peak memory and speed of `lmk-rag ingest` as the file grows.

Each size runs in a fresh process (peak RSS is per process): a text file of that many MB is made
from the sample corpus (real sentences, shuffled), then ingested into an embedded index, or only
encoded with ``--backend none``. Printed per size: tokens, landmarks, seconds, tokens/s, peak RSS,
and the growth of peak RSS over the smallest size next to the size of the vectors themselves
(memory should grow by the vectors, not by the document).

    python benchmarks/bench_huge_files.py [--sizes 1 5 20] [--backend chroma|qdrant|none] [--model M]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CORPUS = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"


def make_file(path: Path, megabytes: float, seed: int = 0) -> None:
    sentences = [s.strip() + "." for p in sorted(CORPUS.glob("*.md")) for s in p.read_text().split(".") if s.strip()]
    rng = random.Random(seed)
    target, written = int(megabytes * 1e6), 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            paragraph = " ".join(rng.choice(sentences) for _ in range(8)) + "\n\n"
            out.write(paragraph)
            written += len(paragraph.encode("utf-8"))


def one_size(megabytes: float, backend: str, model: str | None) -> dict:
    """Runs in the child process: make the file, ingest (or encode) it, report."""
    from lmk_rag import LMKEncoder
    from lmk_rag.ingest import ingest

    with tempfile.TemporaryDirectory() as tmp:
        doc = Path(tmp) / "docs" / "huge.txt"
        doc.parent.mkdir()
        make_file(doc, megabytes)
        encoder = LMKEncoder(model, device="cpu")
        rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        if backend == "none":
            mv = encoder.encode_multi([doc.read_text(encoding="utf-8")])[0]
            tokens, landmarks = mv.n_tokens, len(mv)
        else:
            from lmk_rag.index import ChromaIndex, QdrantIndex

            cls = ChromaIndex if backend == "chroma" else QdrantIndex
            index = cls(Path(tmp) / "index", encoder=encoder)
            # No size limit: the default (10 MB) passes over bigger files, which this measures.
            summary = ingest(index, [doc.parent], show_progress=False, max_file_mb=None)
            index.close()
            tokens, landmarks = summary.tokens, summary.landmarks
        if not landmarks:
            raise SystemExit(f"the {megabytes} MB file was not encoded")
        seconds = time.perf_counter() - t0
    return {
        "mb": megabytes,
        "tokens": tokens,
        "landmarks": landmarks,
        "seconds": seconds,
        "dimension": encoder.dimension,
        "rss_loaded_mb": rss_loaded,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1, 5, 20], help="file sizes in MB")
    ap.add_argument("--backend", default="chroma", choices=["chroma", "qdrant", "none"])
    ap.add_argument("--model", default=None, help="encoder (default: the packaged model)")
    ap.add_argument("--child", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(one_size(args.child, args.backend, args.model)))
        return
    rows = []
    for mb in args.sizes:
        cmd = [sys.executable, __file__, "--child", str(mb), "--backend", args.backend]
        if args.model:
            cmd += ["--model", args.model]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        vectors_mb = row["landmarks"] * row["dimension"] * 4 / 1e6
        print(
            f"{mb:6.1f} MB  {row['tokens']:9d} tokens  {row['landmarks']:7d} landmarks  {row['seconds']:7.1f} s  "
            f"{row['tokens'] / row['seconds']:6.0f} tok/s  peak RSS {row['peak_rss_mb']:6.0f} MB "
            f"(model loaded: {row['rss_loaded_mb']:.0f} MB; landmark vectors {vectors_mb:.0f} MB)",
            flush=True,
        )
    first = rows[0]
    for row in rows[1:]:
        growth = row["peak_rss_mb"] - first["peak_rss_mb"]
        vectors = (row["landmarks"] - first["landmarks"]) * row["dimension"] * 4 / 1e6
        speed = (row["tokens"] / row["seconds"]) / (first["tokens"] / first["seconds"])
        print(
            f"{first['mb']:.0f} -> {row['mb']:.0f} MB: peak RSS +{growth:.0f} MB for +{vectors:.0f} MB of vectors "
            f"(x{growth / max(vectors, 1e-9):.1f}); tokens/s x{speed:.2f}"
        )


if __name__ == "__main__":
    main()
