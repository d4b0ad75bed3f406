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
from lmk_rag.corpora.faqs import faq_sources_of
from lmk_rag.corpora.rst import read_rst_pages
from lmk_rag.eval.contexts import (
    ChunkContexts,
    ContextRun,
    LandmarkContexts,
    TokenBudget,
    chunk_spans,
    context_metrics,
    fill_budget,
)
from lmk_rag.eval.domains import domain_tasks
from lmk_rag.eval.faqs import faq_task
from lmk_rag.eval.sections import section_task, short_section_task
from lmk_rag.eval.tasks import RetrievalTask

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


def single_landmarks(lmk: LMKEncoder, budget: TokenBudget, task, budgets) -> ContextRun:
    """The ceiling row of issue #45: every landmark of the corpus ranked by its cosine to the query,
    taken one by one (its own span, no widening) while the budget lasts."""
    multi = lmk.encode_multi(task.doc_texts)
    q = lmk.encode_query(task.query_texts)
    vectors = np.concatenate([m.vectors for m in multi])
    owner = np.concatenate([np.full(len(m.vectors), d) for d, m in enumerate(multi)])
    spans = np.concatenate([np.asarray(m.spans).reshape(-1, 2) for m in multi])
    scores = q @ vectors.T
    contexts = {b: [] for b in budgets}
    for qi in range(len(task.query_texts)):
        order = np.argsort(-scores[qi], kind="stable")[:200]
        ranked = [(int(owner[j]), int(spans[j, 0]), int(spans[j, 1])) for j in order]
        for b in budgets:
            contexts[b].append(fill_budget(ranked, task.doc_texts, b, budget.count, budget.clip))
    return ContextRun("single-landmarks", contexts)


def build_tasks(specs: str, count) -> list:
    """Tasks named ``domains:SPLIT``, ``domains-short:SPLIT``, ``faq:SPLIT``, ``sections`` or
    ``sections-short``, joined by +."""
    tasks = []
    for spec in specs.split("+"):
        if spec.startswith("faq:"):
            tasks.append(faq_task(faq_sources_of(spec[4:]), name=f"faq-{spec[4:]}"))
        elif spec in ("sections", "sections-short"):
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
    p.add_argument("--seeds", default="4")
    p.add_argument("--bonus", default="1.0")
    p.add_argument("--peak", default="0.5")
    p.add_argument("--share", default="0.5")
    p.add_argument("--min-scores", default="", help="relevance floors to try (each a row), e.g. 0.25,0.3")
    p.add_argument("--off-topic", default=None, help="a file of questions no document answers: share of empty contexts")
    p.add_argument("--lmk-only", action="store_true", help="no chunk rows (they do not change with the rule)")
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
        f"w{w}-lex{lx}-rank{r}-snap{s}-seeds{n}-share{sh}-bonus{b}-peak{pk}": ContextRule(
            width=w,
            lexical_weight=lx,
            rank_weight=r,
            snap_chars=s,
            seeds=n,
            cover_share=sh,
            widen_bonus=b,
            peak_weight=pk,
        )
        for w, lx, r, s, n, sh, b, pk in itertools.product(
            [int(x) for x in args.widths.split(",")],
            [float(x) for x in args.lexical.split(",")],
            [float(x) for x in args.rank.split(",")],
            [int(x) for x in args.snap.split(",")],
            [int(x) for x in args.seeds.split(",")],
            [float(x) for x in args.share.split(",")],
            [float(x) for x in args.bonus.split(",")],
            [float(x) for x in args.peak.split(",")],
        )
    }
    rows: dict[str, dict[str, dict[str, float]]] = {}
    offtopic: dict[str, dict[str, dict[str, float]]] = {}
    per_query: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for task in tasks:
        print(f"{task.name}: {len(task.doc_ids)} documents, {len(task.query_ids)} queries", flush=True)
        runs = []
        for chunker in [] if args.lmk_only else args.chunks.split(","):
            t0 = time.perf_counter()
            runs.append(ChunkContexts(chunker, "dense", base, budget).run(task, budgets))
            print(f"  {runs[-1].method}: {time.perf_counter() - t0:.0f} s", flush=True)
        if not args.lmk_only:
            runs.append(ChunkContexts("tokens:128", "bm25", base, budget).run(task, budgets))
            runs.append(single_landmarks(lmk, budget, task, budgets))
        for ranking in args.rankings.split(","):
            for k in [int(x) for x in args.k.split(",")]:
                t0 = time.perf_counter()
                for floor in [None] + [float(x) for x in args.min_scores.split(",") if x]:
                    method = LandmarkContexts(lmk, budget, k=k, ranking=ranking, rules=rules, min_score=floor)
                    for run in method.run(task, budgets):
                        run.method = f"{run.method}-k{k}" + (f"-ms{floor}" if floor is not None else "")
                        runs.append(run)
                    if args.off_topic and floor is not None:
                        off = Path(args.off_topic).read_text().split("\n")
                        off_task = RetrievalTask(
                            task.name + "-offtopic",
                            task.doc_ids,
                            task.doc_texts,
                            [f"off{i}" for i in range(len([q for q in off if q.strip()]))],
                            [q for q in off if q.strip()],
                            {},
                        )
                        off_runs = LandmarkContexts(
                            lmk, budget, k=k, ranking=ranking, rules=rules, min_score=floor
                        ).run(off_task, budgets)
                        for run in off_runs:
                            name = f"{run.method}-k{k}-ms{floor}"
                            empty = {
                                f"ctx{b}_offtopic_empty": float(np.mean([not c for c in run.contexts[b]]))
                                for b in budgets
                            }
                            offtopic.setdefault(name, {})[task.name] = empty
                print(f"  lmk {ranking} k={k}: {time.perf_counter() - t0:.0f} s", flush=True)
        for run in runs:
            agg, pq = context_metrics(task, run)
            for b in budgets:  # contexts holding a passage under 16 tokens
                agg[f"ctx{b}_short"] = float(
                    np.mean([any(budget.count(task.doc_texts[d][x:y]) < 16 for d, x, y in c) for c in run.contexts[b]])
                )
            rows.setdefault(run.method, {})[task.name] = agg
            per_query.setdefault(run.method, {})[task.name] = pq
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    (out / "per_query.json").write_text(json.dumps(per_query))
    (out / "offtopic.json").write_text(json.dumps(offtopic, indent=1))
    for name, by_task in offtopic.items():
        print("off-topic empty", name, {t: v for t, v in by_task.items()})
    names = sorted(rows)
    keys = [f"ctx{b}_{m}" for b in budgets for m in ("recall", "hit", "full", "short")]
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
