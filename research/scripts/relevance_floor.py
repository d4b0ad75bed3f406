"""Choosing the relevance floor's documented value (issue #45 item 3): for each candidate floor, the
share of answerable questions whose answer holds no landmark at least that similar (their answer
can only come from widening) and the share of off-topic questions that would get an empty context
(no landmark of the corpus reaches the floor), on the dev sets.

    LMK_DOCS_ROOT=... python research/scripts/relevance_floor.py --task faq:dev+domains:nodejs,sqlite \\
        --off-topic research/data/off_topic_questions.txt --out research/results/relevance-floor
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from context_sweep import build_tasks, cached_encoder

from lmk_rag import LMKEncoder


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", required=True)
    p.add_argument("--off-topic", required=True)
    p.add_argument("--floors", default="0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5")
    p.add_argument("--cache", default=".cache/context-sweep")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    lmk = cached_encoder(LMKEncoder(device="cpu", show_progress=False), Path(args.cache), "lmk-v4")
    off = [q for q in Path(args.off_topic).read_text().splitlines() if q.strip()]
    floors = [float(x) for x in args.floors.split(",")]
    out: dict[str, dict[str, list[float]]] = {}
    for task in build_tasks(args.task, lambda xs: lmk.tokenize(xs).n_tokens):
        multi = lmk.encode_multi(task.doc_texts)
        q = lmk.encode_query(task.query_texts)
        qo = lmk.encode_query(off)
        doc_index = {d: i for i, d in enumerate(task.doc_ids)}
        best_in_answer = []
        for qi, qid in enumerate(task.query_ids):
            doc, a, b = task.answers[qid]
            m = multi[doc_index[doc]]
            spans = np.asarray(m.spans).reshape(-1, 2)
            inside = (spans[:, 1] > a) & (spans[:, 0] < b)
            best_in_answer.append(float((m.vectors[inside] @ q[qi]).max()) if inside.any() else -1.0)
        best_off = np.max(np.stack([(m.vectors @ qo.T).max(axis=0) for m in multi]), axis=0)
        best_on = np.array(best_in_answer)
        out[task.name] = {
            "answer_below": [float((best_on < f).mean()) for f in floors],
            "off_topic_empty": [float((best_off < f).mean()) for f in floors],
        }
        print(task.name, len(best_on), "questions", flush=True)
    lines = ["| floor | " + " | ".join(f"{t} answer below / off-topic empty" for t in out) + " |"]
    lines.append("|---:|" + "---:|" * len(out))
    for i, f in enumerate(floors):
        cells = [f"{v['answer_below'][i]:.3f} / {v['off_topic_empty'][i]:.3f}" for v in out.values()]
        lines.append(f"| {f} | " + " | ".join(cells) + " |")
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "floors.json").write_text(json.dumps({"floors": floors, "tasks": out}, indent=1))
    (folder / "README.md").write_text(f"# Relevance floor on {args.task}\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
