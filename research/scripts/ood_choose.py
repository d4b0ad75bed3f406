"""Issue #12's joint rule over candidate LMK models, applied to their dev and in-domain reports.

    python research/scripts/ood_choose.py WORKDIR NAME...

Reads ``WORKDIR/dev-NAME/report.json`` (``lmk-rag eval --task domains:dev --passage peak,region``)
and ``WORKDIR/sections-NAME/report.json`` (``--task sections``) for each candidate, prints a table
to stderr and the winner's name to stdout (nothing when the incumbent stays).

The rule is the research log's ("A stronger dev split and one rule over all of #12's targets"),
with the numbers it was stated with; the incumbent is S50, the default since that entry. Eligible:
1. in-domain sections multi k=32 nDCG@10 >= 0.857 (F - 0.01);
2. dev multi k=32 >= max(C32, C128) and dev single k=32 >= A128 (the base model's chunk baselines);
3. dev multi and single k=32 each >= T2's - 0.01.
Among the eligible, the highest dev multi + passage hit@1 (``peak``) + single wins; it replaces the
incumbent only when its sum beats S50's by more than ``SWITCH_MARGIN`` (a switch makes users
re-index; 0.005 is about the spread of one dev number between neighbouring runs).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

# Five dev domains, means to 4 places (research/results/domains-dev5/, dev5-base, dev5-T2, dev5-S50).
C32, C128, A128 = 0.8657, 0.8502, 0.8015
T2_MULTI, T2_SINGLE = 0.8818, 0.8182
S50_SUM = 0.8826 + 0.3172 + 0.8133
IN_DOMAIN_MIN = 0.857
SWITCH_MARGIN = 0.005


# The tasks those means are over: a dev report over other domains is refused, not compared.
DEV_TASKS = {f"domain-{name}" for name in ("nodejs", "sqlite", "ghc", "postfix", "gnucash")}


def means(report: Path, tasks: set[str] | None = None) -> dict[str, dict[str, float]]:
    """Mean of each metric over the report's tasks (domains), keyed by method without its @model;
    with ``tasks``, the report must hold exactly those."""
    rows = json.loads(report.read_text())["rows"]
    found = {row["task"] for row in rows}
    if tasks is not None and found != tasks:
        raise SystemExit(f"{report}: tasks {sorted(found)}, but the rule's numbers are over {sorted(tasks)}")
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for metric, value in row["metrics"].items():
            values[row["method"].split("@")[0]][metric].append(value)
    return {m: {k: sum(v) / len(v) for k, v in ms.items()} for m, ms in values.items()}


def summary(work: Path, name: str) -> dict[str, float] | None:
    dev, sections = work / f"dev-{name}" / "report.json", work / f"sections-{name}" / "report.json"
    if not dev.is_file() or not sections.is_file():
        return None
    d, s = means(dev, DEV_TASKS), means(sections)
    return {
        "multi": d["lmk-multi-k32-peak"]["nDCG@10"],
        "passage": d["lmk-multi-k32-peak"]["passage_hit@1"],
        "passage_region": d["lmk-multi-k32-region"]["passage_hit@1"],
        "single": d["lmk-k32"]["nDCG@10"],
        "in_domain": s["lmk-multi-k32-peak"]["nDCG@10"],
        "in_domain_passage": s["lmk-multi-k32-peak"]["passage_hit@1"],
        "in_domain_passage_region": s["lmk-multi-k32-region"]["passage_hit@1"],
    }


def failed_gates(x: dict[str, float]) -> list[str]:
    failed = []
    if x["in_domain"] < IN_DOMAIN_MIN:
        failed.append("1")
    if x["multi"] < max(C32, C128) or x["single"] < A128:
        failed.append("2")
    if x["multi"] < T2_MULTI - 0.01 or x["single"] < T2_SINGLE - 0.01:
        failed.append("3")
    return failed


def main(argv: list[str]) -> int:
    work, names = Path(argv[0]), argv[1:]
    best: tuple[float, str] | None = None
    print(f"incumbent S50: sum {S50_SUM:.4f}; to switch: > {S50_SUM + SWITCH_MARGIN:.4f}", file=sys.stderr)
    for name in names:
        x = summary(work, name)
        if x is None:
            print(f"{name}: no reports", file=sys.stderr)
            continue
        total = x["multi"] + x["passage"] + x["single"]
        failed = failed_gates(x)
        cells = " ".join(f"{k} {v:.4f}" for k, v in x.items())
        verdict = f"fails gate {','.join(failed)}" if failed else "eligible"
        print(f"{name}: {cells} sum {total:.4f} {verdict}", file=sys.stderr)
        if not failed and total > S50_SUM + SWITCH_MARGIN and (best is None or total > best[0]):
            best = (total, name)
    if best is not None:
        print(best[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
