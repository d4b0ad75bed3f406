"""Where the peak RSS of ingesting one huge document comes from (issue #49 item 4).

Makes a text file of N MB from the sample corpus (as ``benchmarks/bench_huge_files.py``), encodes it,
then writes it into an embedded index one phase at a time, with a thread sampling the process's
resident memory (``VmRSS``) every 20 ms. Printed per phase: the highest RSS seen and its growth over
the RSS before the phase, next to the size of the landmark vectors (float32).

    python research/scripts/huge_write_phases.py 5      # a 5 MB file
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_huge_files import make_file
from bench_million import memory_mib


def rss_mib() -> tuple[float, float, float]:
    """Resident memory in MiB: all of it, anonymous (heap), file-backed (mapped pages)."""
    now = memory_mib()
    return now["VmRSS"], now["RssAnon"], now["RssFile"]


class Sampler:
    """The highest RSS seen while a phase runs."""

    def __init__(self) -> None:
        self.peak = (0.0, 0.0, 0.0)
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop:
            now = rss_mib()
            if now[0] > self.peak[0]:
                self.peak = now
            time.sleep(0.02)

    @contextmanager
    def phase(self, name: str, vectors_mib: float):
        before = rss_mib()
        self.peak = before
        t0 = time.perf_counter()
        yield
        time.sleep(0.05)
        after = rss_mib()
        grown = self.peak[0] - before[0]
        print(
            f"{name:26s} before {before[0]:6.0f}  peak {self.peak[0]:6.0f} "
            f"(+{grown:5.0f}, x{grown / vectors_mib:4.1f}; "
            f"anon +{self.peak[1] - before[1]:5.0f}, mapped +{self.peak[2] - before[2]:5.0f})  "
            f"after {after[0]:6.0f} (anon {after[1]:5.0f}) MiB  {time.perf_counter() - t0:5.1f} s",
            flush=True,
        )


def files_mib(folder: Path) -> dict[str, float]:
    """Bytes on disk under ``folder`` by kind of file: the write-ahead log or the rest (segments)."""
    sizes: dict[str, float] = {"wal": 0.0, "segments": 0.0}
    for path in folder.rglob("*"):
        if path.is_file():
            kind = "wal" if "wal" in path.parts else "segments"
            sizes[kind] += path.stat().st_blocks * 512 / 2**20
    return {k: round(v) for k, v in sizes.items()}


def main() -> None:
    megabytes = float(sys.argv[1])
    from lmk_rag import LMKEncoder
    from lmk_rag.index import QdrantIndex
    from lmk_rag.index.qdrant.layout import to_point

    sampler = Sampler()
    with tempfile.TemporaryDirectory() as tmp:
        doc = Path(tmp) / "huge.txt"
        make_file(doc, megabytes)
        text = doc.read_text(encoding="utf-8")
        encoder = LMKEncoder(device="cpu")
        encoder.encode_multi(["warm-up"])
        vectors_mib = megabytes * 9.9  # about what the sample's text takes (0.216M tokens/MB, k=32, 384 floats)
        with sampler.phase("encode", vectors_mib):
            mv = encoder.encode_multi([text])[0]
        vectors_mib = mv.vectors.nbytes / 2**20
        print(f"{megabytes} MB: {mv.n_tokens} tokens, {len(mv)} landmarks, vectors {vectors_mib:.0f} MiB", flush=True)
        index = QdrantIndex(Path(tmp) / "index", encoder=encoder)
        store = index.store
        with sampler.phase("to_point (payload, BM25)", vectors_mib):
            point = to_point("huge", text, {}, mv)
        import qdrant_edge as e

        from lmk_rag.index.qdrant.layout import BM25, LANDMARKS, POOLED

        with sampler.phase("collection point built", vectors_mib):
            assert point.sparse is not None  # a text always has its BM25 vector
            vector: dict[str, Any] = {
                POOLED: point.pooled,
                LANDMARKS: point.landmarks,
                BM25: e.SparseVector(*point.sparse),
            }
            built = e.Point(point.id, vector, point.payload)
        with sampler.phase("collection update", vectors_mib):
            store.shard.update(e.UpdateOperation.upsert_points([built]))
        del built
        print("  files after the collection update (MiB):", files_mib(Path(tmp) / "index"), flush=True)
        with sampler.phase("landmark points written", vectors_mib):
            store.write_landmarks([(point.id, point.landmarks)])
        with sampler.phase("close (flush, merge)", vectors_mib):
            index.close()
    sampler.stop = True


if __name__ == "__main__":
    main()
