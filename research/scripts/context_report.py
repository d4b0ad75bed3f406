"""`lmk-rag eval --context-tokens` on encodings cached by context_sweep.py (same rows, same report,
same paired comparison; only the encoding is read from the cache instead of recomputed).

    LMK_DOCS_ROOT=... LMK_PYTHON_DOCS=... python research/scripts/context_report.py \
        --task "domains:test+sections+sections-short" --baseline langchain --out research/results/context-test
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "research" / "scripts"))

from context_sweep import BASE, build_tasks, cached_encoder  # noqa: E402

from lmk_rag import LMKEncoder  # noqa: E402
from lmk_rag.eval.contexts import context_rows  # noqa: E402
from lmk_rag.eval.report import write_report  # noqa: E402
from lmk_rag.eval.significance import compare_to_baseline  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", required=True, help="domains:SPLIT, sections, sections-short; join with +")
    p.add_argument("--budgets", default="256,512,1024")
    p.add_argument(
        "--ranking",
        default="hybrid",
        choices=["maxsim", "hybrid"],
        help="the builder row's ranking (default: the index's, hybrid)",
    )
    p.add_argument("--baseline", default=None)
    p.add_argument("--cache", default=str(ROOT / ".cache" / "context-sweep"))
    p.add_argument("--out", required=True)
    args = p.parse_args()
    cache = Path(args.cache)
    lmk = cached_encoder(LMKEncoder(device="cpu", show_progress=False), cache, "lmk-v4")
    base = cached_encoder(
        LMKEncoder(BASE, pooling="mean", granularity=None, device="cpu", show_progress=False), cache, "base"
    )
    tasks = build_tasks(args.task, lambda xs: lmk.tokenize(xs).n_tokens)
    budgets = [int(b) for b in args.budgets.split(",")]
    rows = context_rows(tasks, budgets, lmk, base, ranking=args.ranking, progress=False)
    baseline = args.baseline
    if baseline == "best-chunk":  # the chunk-then-embed row with the best mean recall at the middle budget
        key = f"ctx{budgets[len(budgets) // 2]}_recall"
        chunk_rows = [r for r in rows if not r.method.startswith("lmk")]
        means: dict[str, list[float]] = {}
        for r in chunk_rows:
            means.setdefault(r.method, []).append(r.metrics[key])
        baseline = max(means, key=lambda m: sum(means[m]) / len(means[m]))
        print(f"baseline: {baseline} (best chunk row by mean {key})")
    comparisons = compare_to_baseline(rows, baseline) if baseline else []
    command = "python research/scripts/context_report.py " + " ".join(sys.argv[1:])
    paths = write_report(rows, args.out, title="what reaches the LLM", command=command, comparisons=comparisons)
    print(paths["markdown"].read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
