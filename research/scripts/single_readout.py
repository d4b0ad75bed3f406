"""Single-vector nDCG@10 of readouts over the same landmark states, from one encoding per task.

The single vector of ``pooling="lmk"`` is the plain mean of a text's landmark states. On short
texts every landmark weighs the same whatever its chunk holds: a 40-token section at k=32 is read
as one landmark for 32 tokens and one for 8, each half the vector, where mean pooling gives each
token the same weight. This benchmark compares, on the dev domains and the in-domain sections only
(the test domains are reported once, through ``lmk-rag eval``, never tuned on):

- ``mean``: the plain mean (today's readout; checked against the encoder's own pooled vector);
- ``token-weighted``: each landmark state weighted by the content tokens of its chunk;
- ``unit mean``: the mean of unit-length landmark states (each landmark the same say in direction).

Queries are read out the same way as documents. Multi-vector scores do not change.

    LMK_DOCS_ROOT=... python research/scripts/single_readout.py --task short       # dev sections of 32..256 tokens
    LMK_DOCS_ROOT=... python research/scripts/single_readout.py --task sections    # dev pages, headings as queries
    LMK_PYTHON_DOCS=... python research/scripts/single_readout.py --task in-domain  # the Python docs' sections task
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the table printer
from _tables import print_task_table

from lmk_rag import LMKEncoder
from lmk_rag.corpora.domains import domains_of
from lmk_rag.corpora.rst import read_rst_pages
from lmk_rag.encoding.pooling import landmark_weights_of
from lmk_rag.eval.domains import domain_tasks
from lmk_rag.eval.metrics import retrieval_metrics, score_run
from lmk_rag.eval.sections import section_task
from lmk_rag.eval.tasks import RetrievalTask

Readout = Callable[[np.ndarray, np.ndarray], np.ndarray]


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


#: name -> f(landmark states (m, d), content tokens per chunk (m,)) -> one vector (d,)
READOUTS: dict[str, Readout] = {
    "mean": lambda states, sizes: states.mean(axis=0),
    "token-weighted": lambda states, sizes: np.average(states, axis=0, weights=landmark_weights_of(sizes, "tokens")),
    "unit mean": lambda states, sizes: unit(states).mean(axis=0),
}


def states_and_sizes(encoder: LMKEncoder, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per text: its raw landmark states and the content tokens of each chunk."""
    multi = encoder.encode_multi(texts, normalize=False)
    _, layout, _ = encoder.lay_out(texts, encoder.document_prefix)
    out = []
    for i, m in enumerate(multi):
        sizes = layout.chunk_sizes[layout.chunk_offsets[i] : layout.chunk_offsets[i + 1]]
        if len(sizes) != len(m.vectors):
            raise RuntimeError(f"text {i}: {len(sizes)} chunk sizes for {len(m.vectors)} landmarks")
        out.append((m.vectors, sizes))
    return out


def ndcg(task: RetrievalTask, scores: np.ndarray) -> float:
    aggregate, _ = retrieval_metrics(task.qrels, score_run(scores, task.query_ids, task.doc_ids))
    return float(aggregate["nDCG@10"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=("short", "sections", "in-domain"), default="short")
    ap.add_argument("--model", default=None, help="model folder or name (default: the packaged one)")
    ap.add_argument("--k", type=int, default=32)
    args = ap.parse_args()
    encoder = LMKEncoder(model=args.model, granularity=args.k, device="cpu")
    if encoder.query_prefix != encoder.document_prefix:
        raise SystemExit("this benchmark reads queries through the document path; the model's prefixes differ")
    count = lambda texts: encoder.tokenize(texts).n_tokens
    if args.task == "in-domain":
        tasks = [section_task(read_rst_pages(None, split="eval"), count, seed=0)]
    else:
        tasks = domain_tasks(domains_of("dev"), count, short=args.task == "short")
    results: dict[str, list[float]] = {name: [] for name in READOUTS}
    for task in tasks:
        docs = states_and_sizes(encoder, task.doc_texts)
        queries = states_and_sizes(encoder, task.query_texts)
        # The readout the encoder itself uses must reproduce its pooled vectors (multi-chunk documents).
        own = "token-weighted" if encoder.landmark_weights == "tokens" else "mean"
        reference = unit(np.stack([m.pooled for m in encoder.encode_multi(task.doc_texts[:50])]))
        mine = unit(np.stack([READOUTS[own](s, n) for s, n in docs[:50]]))
        if not np.allclose(reference, mine, atol=1e-5):
            raise RuntimeError(f"the {own!r} readout does not reproduce the encoder's pooled vectors")
        print(f"{task.name}: {len(task.doc_texts)} documents, {len(task.query_texts)} queries", flush=True)
        for name, readout in READOUTS.items():
            d = unit(np.stack([readout(s, n) for s, n in docs]))
            q = unit(np.stack([readout(s, n) for s, n in queries]))
            results[name].append(ndcg(task, q @ d.T))
    print_task_table("single-vector readout", [t.name for t in tasks], results, digits=4)


if __name__ == "__main__":
    main()
