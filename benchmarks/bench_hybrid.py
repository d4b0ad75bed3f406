"""Hybrid search (BM25 + MaxSim) against MaxSim alone, through a real embedded Qdrant index, on the
out-of-domain documentation tasks of ``lmk-rag eval --tasks domains:...`` (whole pages with every
heading removed; each section heading is a query, its page the relevant document, its section
the answer span). nDCG@10 and passage hit@1 per domain and the mean.

Choose fusion settings on the dev domains; report the test domains once:

    LMK_DOCS_ROOT=... python benchmarks/bench_hybrid.py --domains dev --weights 0.1 0.2 0.3 0.5 0.6 0.7 0.8
    LMK_DOCS_ROOT=... python benchmarks/bench_hybrid.py --domains test --weights 0.5   # the weight dev chose
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np

from lmk_rag import LMKEncoder
from lmk_rag.corpora.domains import domains_of
from lmk_rag.eval.domains import domain_tasks
from lmk_rag.eval.metrics import retrieval_metrics
from lmk_rag.index import QdrantIndex
from lmk_rag.index.hits import PassageRequest
from lmk_rag.passages import span_covers


def encoded(task, enc: LMKEncoder, cache: Path | None):
    """The task's documents and queries through ``enc``, cached per task name (encoding is the cost)."""
    path = cache / f"{task.name}.{enc.fingerprint.model.replace('/', '_')}.pkl" if cache else None
    if path is not None and path.is_file():
        return pickle.loads(path.read_bytes())
    data = (enc.encode_multi(task.doc_texts, show_progress=True), enc.encode_query(task.query_texts))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(data))
    return data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--domains", default="dev", help="dev, test, or comma-separated domain names")
    ap.add_argument("--weights", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8])
    ap.add_argument("--cache", default=None, help="folder to keep encoded tasks in")
    args = ap.parse_args()

    enc = LMKEncoder(device="cpu")
    tasks = domain_tasks(domains_of(args.domains), lambda xs: enc.tokenize(xs).n_tokens)
    methods = ["maxsim", "prefetch", "hybrid rrf"] + [f"hybrid w={w}" for w in args.weights]
    table: dict[str, dict[str, tuple[float, float]]] = {m: {} for m in methods}
    for task in tasks:
        multis, queries = encoded(task, enc, Path(args.cache) if args.cache else None)
        with tempfile.TemporaryDirectory() as folder:
            idx = QdrantIndex(Path(folder) / "idx", encoder=enc)
            idx.add_encoded(multis, task.doc_texts, ids=task.doc_ids)
            for method in methods:
                mode = method.split()[0]
                if method == "hybrid rrf":
                    idx.hybrid_fusion = "rrf"
                elif method.startswith("hybrid w="):
                    idx.hybrid_fusion, idx.hybrid_weight = "weighted", float(method.split("=")[1])
                run, hits1 = {}, []
                for qid, text, q in zip(task.query_ids, task.query_texts, queries):
                    hits = idx._search(q, 10, {}, mode, PassageRequest(), text=text)
                    run[qid] = {h.id: float(10 - r) for r, h in enumerate(hits)}  # rank order, ties impossible
                    if qid in task.answers:
                        doc, start, end = task.answers[qid]
                        found = bool(hits) and hits[0].id == doc and span_covers(hits[0].span, (start, end))
                        hits1.append(float(found))
                aggregate, _ = retrieval_metrics(task.qrels, run)
                table[method][task.name] = (aggregate["nDCG@10"], float(np.mean(hits1)) if hits1 else float("nan"))
            idx.close()
        print(f"{task.name}: {len(task.doc_ids)} documents, {len(task.query_ids)} queries", flush=True)
    names = [t.name for t in tasks]
    print("\nnDCG@10 / passage hit@1 (embedded Qdrant Edge, packaged model, k=32)\n")
    print("| method | " + " | ".join(n.replace("domain-", "") for n in names) + " | mean |")
    print("|---|" + "---:|" * (len(names) + 1))
    for method in methods:
        cells = [f"{table[method][n][0]:.3f} / {table[method][n][1]:.3f}" for n in names]
        mean_ndcg = np.mean([table[method][n][0] for n in names])
        mean_hit = np.mean([table[method][n][1] for n in names])
        print(f"| {method} | " + " | ".join(cells) + f" | **{mean_ndcg:.3f}** / {mean_hit:.3f} |")


if __name__ == "__main__":
    main()
