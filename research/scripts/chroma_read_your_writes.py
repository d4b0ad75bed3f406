"""Does a Chroma server answer right just after a Ray ingest? (issue #51 item 9)

Each round: a fresh `chroma run`, a Ray ingest (2 actors, small batches) of real text files, then at
once every document's first lines as a query (maxsim, k=5) against the exact MaxSim ranking computed
here from the same server's stored landmark vectors. Prints per round how many queries differ in
their top-5 documents and how many miss their own document; a read-your-writes failure shows as
a difference that disappears on the rerun of the same queries.

    python research/scripts/chroma_read_your_writes.py --rounds 3 --docs 120
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lmk_rag import LMKEncoder
from lmk_rag.index import ChromaIndex
from lmk_rag.ingest import ingest
from lmk_rag.ingest.ray import RayExecutor
from tests.chroma_server import start_chroma_server, stop


def corpus(root: Path, n: int, into: Path) -> list[str]:
    files = sorted(p for p in root.rglob("*.txt") if p.stat().st_size > 2000)[:n]
    into.mkdir(parents=True)
    queries = []
    for i, p in enumerate(files):
        text = p.read_text(errors="replace")
        (into / f"{i:04d}.txt").write_text(text)
        queries.append(" ".join(text.split()[:12]))
    return queries


def exact_scores(index: ChromaIndex, queries: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Every document's exact MaxSim for each query (queries x documents), and the documents' ids."""
    stored = [(d.id, mv.vectors) for batch in index.scan() for d, mv in batch]
    return [i for i, _ in stored], np.stack([(vectors @ queries.T).max(axis=0) for _, vectors in stored], axis=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--docs", type=int, default=120)
    ap.add_argument("--root", default="/work/docs-root")
    args = ap.parse_args()
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    encoder = LMKEncoder()
    for r in range(args.rounds):
        tmp = Path(tempfile.mkdtemp())
        try:
            queries = corpus(Path(args.root), args.docs, tmp / "docs")
            proc, port = start_chroma_server(tmp / "server")
            try:
                index = ChromaIndex(host="127.0.0.1", port=port, encoder=encoder)
                summary = ingest(
                    index, [tmp / "docs"], executor=RayExecutor(actors=2), batch_docs=2, show_progress=False
                )
                qv = encoder.encode_query(queries)
                first = [[h.id for h in index.search(q, k=5, mode="maxsim")] for q in queries]
                again = [[h.id for h in index.search(q, k=5, mode="maxsim")] for q in queries]
                ids, scores = exact_scores(index, np.asarray(qv, dtype=np.float32))
                exact = [[ids[j] for j in np.argsort(-row, kind="stable")[:5]] for row in scores]
                differ = sum(set(a) != set(b) for a, b in zip(first, exact))
                for q, (got, want) in enumerate(zip(first, exact)):
                    if set(got) != set(want):  # how far the document searched out is from the one it displaced
                        by_id = dict(zip(ids, scores[q]))
                        print(
                            f"  query {q}: rank-5 exact {by_id[want[-1]]:.6f}, "
                            f"searched {min(by_id[g] for g in got):.6f}"
                        )
                unstable = sum(a != b for a, b in zip(first, again))
                own = sum(not any(h.endswith(f"{i:04d}.txt") for h in hits) for i, hits in enumerate(first))
                print(
                    f"round {r}: {len(index)} docs ({summary.added} added), {len(queries)} queries: "
                    f"top-5 set differs from exact {differ}, first vs rerun differ {unstable}, own doc missing {own}",
                    flush=True,
                )
            finally:
                stop(proc)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
