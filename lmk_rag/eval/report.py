"""Markdown + JSON reports and PNG plots (accuracy vs needle position and vs document length)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from .runner import EvalRow
from .significance import PairedComparison

COLUMNS = ["nDCG@10", "R@10", "MRR", "top1", "passage_hit@1"]


def breakdown(rows: Sequence[EvalRow], key: str, metric: str = "top1") -> dict[str, dict[float, float]]:
    """``{method: {meta value: mean metric}}`` over queries that carry ``key`` in their meta."""
    sums: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for qid, values in row.per_query.items():
            meta = row.query_meta.get(qid)
            if meta and key in meta and metric in values:
                sums[row.method][meta[key]].append(values[metric])
    return {m: {k: sum(v) / len(v) for k, v in sorted(d.items())} for m, d in sums.items()}


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def mean_over_tasks(by_task: dict[str, list[EvalRow]]) -> list[str]:
    """A table of each metric averaged over the tasks (each task weighs the same), for the
    methods run on every task; empty for a single task."""
    if len(by_task) < 2:
        return []
    per_method: dict[str, list[EvalRow]] = defaultdict(list)
    for task_rows in by_task.values():
        for r in task_rows:
            per_method[r.method].append(r)
    lines = [
        f"## mean over the {len(by_task)} tasks ({', '.join(by_task)})",
        "",
        "| method | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for method, rows in per_method.items():
        if len(rows) != len(by_task) or not any(c in rows[0].metrics for c in COLUMNS):
            continue
        cells = []
        for c in COLUMNS:
            values = [r.metrics[c] for r in rows if c in r.metrics]
            cells.append(_fmt(sum(values) / len(values)) if len(values) == len(rows) else "")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def context_columns(rows: Sequence[EvalRow]) -> list[str]:
    """The context metrics present (``ctxB_recall`` / ``_hit`` / ``_full`` / ``_precision``), by budget."""
    names = {k for r in rows for k in r.metrics if k.startswith("ctx")}
    order = {"recall": 0, "hit": 1, "full": 2, "precision": 3}
    return sorted(names, key=lambda k: (int(k[3:].split("_")[0]), order.get(k.split("_")[1], 9)))


def context_tables(by_task: dict[str, list[EvalRow]]) -> list[str]:
    """What reaches the LLM: each context row's answer coverage per task, and the mean over tasks."""
    rows = [r for task_rows in by_task.values() for r in task_rows if any(k.startswith("ctx") for k in r.metrics)]
    if not rows:
        return []
    columns = context_columns(rows)
    head = ["| method | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    lines = [
        "## what reaches the LLM: answer coverage of a context of B tokens",
        "",
        "recall: share of the answer's characters in the context; hit: the context touches the answer; "
        "full: it holds all of it; precision: share of the context's characters inside the answer (the answer: "
        "the queried section, or the whole relevant document).",
        "",
    ]
    per_method: dict[str, list[EvalRow]] = defaultdict(list)
    for task, task_rows in by_task.items():
        ctx = [r for r in task_rows if r in rows]
        if not ctx:
            continue
        lines += [f"### {task}", "", *head]
        for r in ctx:
            per_method[r.method].append(r)
            lines.append(f"| {r.method} | " + " | ".join(_fmt(r.metrics.get(c)) for c in columns) + " |")
        lines.append("")
    tasks = [t for t in by_task if any(r in rows for r in by_task[t])]
    if len(tasks) > 1:
        lines += [f"### mean over the {len(tasks)} tasks", "", *head]
        for method, mine in per_method.items():
            if len(mine) == len(tasks):
                cells = [_fmt(sum(r.metrics[c] for r in mine) / len(mine)) for c in columns]
                lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def comparison_table(comparisons: Sequence[PairedComparison]) -> list[str]:
    """Markdown of each method's paired difference to the baseline, per task and over all tasks."""
    if not comparisons:
        return []
    first = comparisons[0]
    lines = [
        f"## paired comparison with {first.baseline}",
        "",
        "Method minus baseline on the same queries: mean difference, 95% bootstrap interval over queries, "
        "two-sided p of a paired randomization (sign-flip) test; over several tasks each task weighs the same.",
        "",
        "| method | metric | tasks | queries | difference | 95% interval | p |",
        "|---|---|---|---:|---:|---|---:|",
    ]
    for c in comparisons:
        tasks = c.tasks[0] if len(c.tasks) == 1 else f"mean over {len(c.tasks)}"
        interval = "" if math.isnan(c.ci_low) else f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]"
        p = "<0.001" if c.p_value < 0.001 else f"{c.p_value:.3f}"  # the resampling cannot say smaller
        lines.append(f"| {c.method} | {c.metric} | {tasks} | {c.n_queries} | {c.delta:+.4f} | {interval} | {p} |")
    return [*lines, ""]


def markdown(
    rows: Sequence[EvalRow],
    title: str,
    command: str | None = None,
    comparisons: Sequence[PairedComparison] = (),
) -> str:
    """The report as Markdown: one table per task, the mean over tasks, breakdowns by length and
    position, and the paired comparisons to a baseline."""
    lines = [f"# {title}", ""]
    if command:
        lines += ["Produced by:", "", "```", command, "```", ""]
    by_task: dict[str, list[EvalRow]] = defaultdict(list)
    for row in rows:
        by_task[row.task].append(row)
    for task, task_rows in by_task.items():
        lines += [
            f"## {task}",
            "",
            "| method | " + " | ".join(COLUMNS) + " | vectors/doc | encode s | tok/s |",
            "|---|" + "---:|" * (len(COLUMNS) + 3),
        ]
        for r in task_rows:
            if not any(c in r.metrics for c in COLUMNS):
                continue  # a context row: its own table below
            cells = [_fmt(r.metrics.get(c)) for c in COLUMNS]
            lines.append(
                f"| {r.method} | "
                + " | ".join(cells)
                + f" | {r.vectors_per_doc:.1f} | {r.encode_seconds:.1f} | {r.tokens_per_second:.0f} |"
            )
        lines.append("")
    lines += mean_over_tasks(by_task)
    lines += context_tables(by_task)
    lines += comparison_table(comparisons)
    for key, label in (("length", "document length (tokens)"), ("position", "needle position")):
        table = breakdown(rows, key)
        if not table:
            continue
        values = sorted({v for d in table.values() for v in d})
        lines += [
            f"## top-1 accuracy by {label}",
            "",
            "| method | " + " | ".join(f"{v:g}" for v in values) + " |",
            "|---|" + "---:|" * len(values),
        ]
        for method, d in table.items():
            lines.append(f"| {method} | " + " | ".join(_fmt(d.get(v)) for v in values) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(rows: Sequence[EvalRow], key: str, path: Path, xlabel: str, logx: bool = False) -> Path | None:
    """A plot of top-1 accuracy by ``key`` (length or position) per method at ``path`` (None: no data)."""
    table = breakdown(rows, key)
    if not table:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=120)
    colors = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]
    for i, (method, d) in enumerate(table.items()):
        style = "--" if method.startswith(("chunk", "bm25")) else "-"
        ax.plot(list(d), list(d.values()), style, marker="o", label=method, color=colors[(2 * i) % 20 + (i // 10) % 2])
    if logx:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({v for d in table.values() for v in d}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("top-1 accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(
    rows: Sequence[EvalRow],
    out_dir: str | Path,
    title: str = "lmk-rag eval",
    command: str | None = None,
    settings: Mapping[str, object] | None = None,
    comparisons: Sequence[PairedComparison] = (),
) -> dict[str, Path]:
    """Write ``report.md``, ``report.json`` and the plots into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "report.md", "json": out / "report.json"}
    paths["markdown"].write_text(markdown(rows, title, command, comparisons), encoding="utf-8")
    payload = {
        "title": title,
        "command": command,
        "settings": settings or {},
        "rows": [{k: v for k, v in r.to_dict().items() if k not in ("per_query", "query_meta")} for r in rows],
        "comparisons": [c.to_dict() for c in comparisons],
        "by_length": breakdown(rows, "length"),
        "by_position": breakdown(rows, "position"),
    }
    paths["json"].write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    for key, name, label, logx in (
        ("position", "accuracy_by_position.png", "relative needle position", False),
        ("length", "accuracy_by_length.png", "document length (tokens)", True),
    ):
        p = plot(rows, key, out / name, label, logx)
        if p:
            paths[key] = p
    return paths
