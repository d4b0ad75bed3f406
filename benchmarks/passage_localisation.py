"""Passage hit@1 of passage rules from one encoding, on the dev domains (how the ``region`` rule
of :mod:`lmk_rag.passages` was chosen). Documents are ranked by MaxSim either way; only the
landmark that names the passage changes. The test domains are refused: they are reported once,
through ``lmk-rag eval``, never tuned on.

    LMK_DOCS_ROOT=... python benchmarks/passage_localisation.py --task sections   # heading queries, section answers
    LMK_DOCS_ROOT=... python benchmarks/passage_localisation.py --task needles    # a fact inserted in those pages
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from lmk_rag import LMKEncoder
from lmk_rag.eval.corpora import SourceText
from lmk_rag.eval.domains import domain_tasks, domains_of, read_domain_pages
from lmk_rag.eval.metrics import passage_hits
from lmk_rag.eval.tasks import needle_tasks
from lmk_rag.passages import passage_scores

#: name -> (radius, peak weight); radius 0 is the single best landmark (``peak``).
RULES = {"peak": (0, 1.0), "mean r=1": (1, 0.0), "half r=1": (1, 0.5), "half r=2 (region)": (2, 0.5)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=("sections", "needles"), default="sections")
    ap.add_argument("--model", default=None, help="model folder or name (default: the packaged one)")
    ap.add_argument("--k", type=int, default=32)
    args = ap.parse_args()
    encoder = LMKEncoder(model=args.model, granularity=args.k, device="cpu")
    count = lambda texts: encoder.tokenize(texts).n_tokens
    dev = domains_of("dev")
    if args.task == "sections":
        tasks = domain_tasks(dev, count)
    else:
        haystack = [SourceText(page.name, page.text) for d in dev for page in read_domain_pages(d)]
        tasks = needle_tasks(haystack, count, lengths=(1024, 4096), docs_per_length=40, kind="needle")
    results: dict[str, list[float]] = {name: [] for name in RULES}
    for task in tasks:
        multi = encoder.encode_multi(task.doc_texts)
        q = encoder.encode_query(task.query_texts)
        sims = [m.vectors @ q.T for m in multi]  # per document: (landmarks, queries)
        scores = np.stack([s.max(axis=0) for s in sims], axis=1)  # (queries, documents): MaxSim
        print(f"{task.name}: {len(task.doc_texts)} documents, {len(task.query_texts)} queries")
        for name, (radius, weight) in RULES.items():
            spans: dict[tuple[int, int], tuple[int, int]] = {}
            for qi in range(len(task.query_ids)):
                top = int(np.argmax(scores[qi]))
                best = int(np.argmax(passage_scores(sims[top][:, qi], radius=radius, peak_weight=weight)))
                a, b = multi[top].spans[best]
                spans[(qi, top)] = (int(a), int(b))
            hits = passage_hits(scores, task.query_ids, task.doc_ids, task.answers, spans)
            results[name].append(float(np.mean(list(hits.values()))))
            print(f"  {name}: passage hit@1 {results[name][-1]:.3f}")
    print("\n| rule | " + " | ".join(t.name for t in tasks) + " | mean |")
    print("|---|" + "---:|" * (len(tasks) + 1))
    for name, values in results.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {np.mean(values):.3f} |")


if __name__ == "__main__":
    main()
