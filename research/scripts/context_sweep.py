"""Choosing the context builder's rule on the dev domains (issue #36): answer coverage of contexts
of 256 / 512 / 1024 tokens, the chunk-then-embed rows and the builder's candidate rules, in one
process (each corpus encoded once per model).

    LMK_DOCS_ROOT=... python research/scripts/context_sweep.py --task domains:dev --out research/results/context-dev
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import pickle
import time
from pathlib import Path

import numpy as np

from lmk_rag import LMKEncoder
from lmk_rag.context import ContextRule
from lmk_rag.corpora.domains import domains_of
from lmk_rag.corpora.rst import read_rst_pages
from lmk_rag.eval.contexts import ChunkContexts, LandmarkContexts, TokenBudget, chunk_spans, context_metrics
from lmk_rag.eval.domains import domain_tasks
from lmk_rag.eval.sections import section_task, short_section_task

BASE = "sentence-transformers/all-MiniLM-L6-v2"


def cached_encoder(encoder: LMKEncoder, cache: Path, tag: str) -> LMKEncoder:
    """``encoder`` whose encode / encode_multi / encode_query results are kept on disk, keyed by the
    texts: a second sweep over the same tasks encodes nothing."""
    cache.mkdir(parents=True, exist_ok=True)

    def wrap(name: str):
        inner = getattr(encoder, name)

        def call(texts, *args, **kwargs):
            key = hashlib.sha256(("\x00".join([tag, name, *texts])).encode()).hexdigest()[:24]
            path = cache / f"{key}.pkl"
            if path.exists():
                return pickle.loads(path.read_bytes())
            out = inner(texts, *args, **kwargs)
            path.write_bytes(pickle.dumps(out))
            return out

        return call

    for name in ("encode", "encode_multi", "encode_query"):
        setattr(encoder, name, wrap(name))
    return encoder


def build_tasks(specs: str, count) -> list:
    """Tasks named ``domains:SPLIT``, ``domains-short:SPLIT``, ``sections`` or ``sections-short``, joined by +."""
    tasks = []
    for spec in specs.split("+"):
        if spec in ("sections", "sections-short"):
            pages = read_rst_pages(None, split="eval")
            tasks.append(section_task(pages, count) if spec == "sections" else short_section_task(pages, count))
        else:
            kind, _, which = spec.partition(":")
            tasks += domain_tasks(domains_of(which), count, short=kind == "domains-short")
    return tasks


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", default="domains:dev", help="domains:SPLIT, sections, sections-short; join with +")
    p.add_argument("--budgets", default="256,512,1024")
    p.add_argument("--widths", default="2,4,8")
    p.add_argument("--lexical", default="0,0.3,0.5")
    p.add_argument("--rank", default="0,0.3")
    p.add_argument("--snap", default="0,200")
    p.add_argument("--k", default="10")
    p.add_argument("--rankings", default="maxsim,hybrid")
    p.add_argument("--chunks", default="tokens:128,tokens:256,langchain,llamaindex")
    p.add_argument("--out", required=True)
    p.add_argument("--cache", default=".cache/context-sweep", help="encodings kept between runs")
    p.add_argument("--encode-only", action="store_true", help="only fill the cache")
    args = p.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    lmk = cached_encoder(LMKEncoder(device="cpu", show_progress=False), Path(args.cache), "lmk-v4")
    base = cached_encoder(
        LMKEncoder(BASE, pooling="mean", granularity=None, device="cpu", show_progress=False), Path(args.cache), "base"
    )
    budget = TokenBudget(lmk)
    tasks = build_tasks(args.task, lambda xs: lmk.tokenize(xs).n_tokens)
    if args.encode_only:  # warm the cache: every encoding the rows need, no contexts built
        for task in tasks:
            for chunker in args.chunks.split(","):
                spans = chunk_spans(chunker, task, base)
                base.encode([task.doc_texts[d][a:b] for d, a, b in spans])
            base.encode_query(task.query_texts)
            lmk.encode_multi(task.doc_texts)
            lmk.encode_query(task.query_texts)
            print(f"encoded {task.name}", flush=True)
        return
    rules = {
        f"w{w}-lex{lx}-rank{r}-snap{s}": ContextRule(width=w, lexical_weight=lx, rank_weight=r, snap_chars=s)
        for w, lx, r, s in itertools.product(
            [int(x) for x in args.widths.split(",")],
            [float(x) for x in args.lexical.split(",")],
            [float(x) for x in args.rank.split(",")],
            [int(x) for x in args.snap.split(",")],
        )
    }
    rows: dict[str, dict[str, dict[str, float]]] = {}
    per_query: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for task in tasks:
        print(f"{task.name}: {len(task.doc_ids)} documents, {len(task.query_ids)} queries", flush=True)
        runs = []
        for chunker in args.chunks.split(","):
            t0 = time.perf_counter()
            runs.append(ChunkContexts(chunker, "dense", base, budget).run(task, budgets))
            print(f"  {runs[-1].method}: {time.perf_counter() - t0:.0f} s", flush=True)
        runs.append(ChunkContexts("tokens:128", "bm25", base, budget).run(task, budgets))
        for ranking in args.rankings.split(","):
            for k in [int(x) for x in args.k.split(",")]:
                t0 = time.perf_counter()
                method = LandmarkContexts(lmk, budget, k=k, ranking=ranking, rules=rules)
                for run in method.run(task, budgets):
                    run.method = f"{run.method}-k{k}"
                    runs.append(run)
                print(f"  lmk {ranking} k={k}: {time.perf_counter() - t0:.0f} s", flush=True)
        for run in runs:
            agg, pq = context_metrics(task, run)
            rows.setdefault(run.method, {})[task.name] = agg
            per_query.setdefault(run.method, {})[task.name] = pq
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    (out / "per_query.json").write_text(json.dumps(per_query))
    names = sorted(rows)
    keys = [f"ctx{b}_{m}" for b in budgets for m in ("recall", "hit", "full")]
    lines = ["| method | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    mean = {n: {k: float(np.mean([rows[n][t][k] for t in rows[n]])) for k in keys} for n in names}
    for n in sorted(names, key=lambda n: -mean[n][f"ctx{budgets[len(budgets) // 2]}_recall"]):
        lines.append(f"| {n} | " + " | ".join(f"{mean[n][k]:.3f}" for k in keys) + " |")
    (out / "README.md").write_text(
        f"# {args.task}: context coverage, mean over {len(tasks)} tasks\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
