"""The markdown table the benchmarks print: one row per variant, one column per task, and the mean."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def print_task_table(
    first_column: str, task_names: Sequence[str], results: dict[str, list[float]], digits: int
) -> None:
    print(f"\n| {first_column} | " + " | ".join(task_names) + " | mean |")
    print("|---|" + "---:|" * (len(task_names) + 1))
    for name, values in results.items():
        cells = " | ".join(f"{v:.{digits}f}" for v in values)
        print(f"| {name} | {cells} | {np.mean(values):.{digits}f} |")
