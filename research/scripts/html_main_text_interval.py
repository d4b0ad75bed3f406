"""Paired bootstrap interval of the main-text F1 difference (lmk-rag's reader minus the previous
reader) over the test pages of research/data/html_main_text_labels.json.

    python research/scripts/html_main_text_interval.py
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import html_main_text as measure


def main() -> None:
    labels = [lab for lab in json.loads(measure.LABELS.read_text()) if lab["split"] == "test"]
    diffs = []
    for lab in labels:
        raw = (measure.ROOT / lab["path"]).read_bytes()
        gold = measure.gold_text(raw, lab["main"], lab["drop"])
        new = measure.prf(measure.lmk_rag_reader(raw), gold)[2]
        diffs.append(new - measure.prf(measure.old_reader(raw), gold)[2])
    rng = random.Random(0)
    means = sorted(sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(10000))
    mean = sum(diffs) / len(diffs)
    print(f"mean F1 difference {mean:+.4f}, 95% bootstrap [{means[250]:+.4f}, {means[9750]:+.4f}], {len(diffs)} pages")


if __name__ == "__main__":
    main()
