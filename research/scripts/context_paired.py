"""Paired differences (95% bootstrap interval, permutation p) between two rows of a context sweep's
per_query.json, per metric, tasks weighed equally (issue #45's test report).

    python research/scripts/context_paired.py RUN/per_query.json METHOD BASELINE [--rows OTHER/per_query.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from lmk_rag.eval.significance import paired_test


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("per_query")
    p.add_argument("method")
    p.add_argument("baseline")
    p.add_argument("--baseline-file", default=None, help="per_query.json holding the baseline, if another run's")
    p.add_argument("--metrics", default="ctx256_recall,ctx256_hit,ctx512_recall,ctx512_hit,ctx1024_recall,ctx1024_hit")
    args = p.parse_args()
    rows = json.loads(Path(args.per_query).read_text())
    base_rows = json.loads(Path(args.baseline_file).read_text()) if args.baseline_file else rows
    method = next(k for k in rows if k.startswith(args.method))
    baseline = next(k for k in base_rows if k.startswith(args.baseline))
    for metric in args.metrics.split(","):
        xs, ys = [], []
        for task, queries in rows[method].items():
            ids = sorted(q for q in queries if q in base_rows[baseline][task])
            xs.append(np.array([queries[q][metric] for q in ids]))
            ys.append(np.array([base_rows[baseline][task][q][metric] for q in ids]))
        delta, low, high, pv = paired_test(xs, ys, n_resamples=4999)
        print(f"{method} - {baseline} {metric}: {delta:+.3f} [{low:+.3f}, {high:+.3f}] p={pv:.3f}")


if __name__ == "__main__":
    main()
