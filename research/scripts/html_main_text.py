"""Main-text extraction from HTML documentation pages, measured (issue #47).

Gold: research/data/html_main_text_labels.json names, for each page of Debian packages' docs, the
element holding the main text (`main`, XPath) and the boilerplate inside it (`drop`), chosen by
reading each page. Score: bag-of-words precision, recall and F1 of an extractor's text against
the gold text (the measure of the article-extraction benchmarks), averaged over pages, per split.

    python research/scripts/html_main_text.py [--split dev|test|all] [--show N]
"""

from __future__ import annotations

import argparse
import html.parser
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import lxml.html

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
ROOT = Path("/work/docs-root")
LABELS = Path(__file__).resolve().parents[1] / "data" / "html_main_text_labels.json"


def gold_text(markup: bytes, main: str, drop: list[str]) -> str:
    tree = lxml.html.fromstring(markup)
    parts = []
    for el in tree.xpath(main):
        for xp in drop:
            for bad in el.xpath(xp):
                bad.drop_tree()
        for bad in el.xpath(".//script | .//style"):
            bad.drop_tree()
        parts.append(el.text_content())
    return "\n".join(parts)


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


def prf(got: str, gold: str) -> tuple[float, float, float]:
    g, t = words(got), words(gold)
    common = sum((g & t).values())
    p = common / max(sum(g.values()), 1)
    r = common / max(sum(t.values()), 1)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


class _TagStripper(html.parser.HTMLParser):
    """The reader before issue #47, kept here as the baseline: tags stripped, scripts and styles
    dropped, block elements ended by a newline."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        if tag in ("p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def old_reader(markup: bytes) -> str:
    """The reader before issue #47 (tags stripped, scripts and styles dropped)."""
    parser = _TagStripper()
    parser.feed(markup.decode("utf-8", errors="replace"))
    return "".join(parser.parts)


def trafilatura_default(markup: bytes) -> str:
    import trafilatura

    return trafilatura.extract(markup, include_tables=True) or ""


def trafilatura_recall(markup: bytes) -> str:
    import trafilatura

    return trafilatura.extract(markup, include_tables=True, favor_recall=True) or ""


def trafilatura_recall_markdown(markup: bytes) -> str:
    import trafilatura

    return (
        trafilatura.extract(
            markup, include_tables=True, favor_recall=True, include_formatting=True, output_format="markdown"
        )
        or ""
    )


def readability(markup: bytes) -> str:
    from readability import Document

    summary = Document(markup).summary(html_partial=True)
    return lxml.html.fromstring(summary).text_content() if summary.strip() else ""


def lmk_rag_reader(markup: bytes) -> str:
    """What lmk-rag's HTML reader gives today (after issue #47)."""
    from lmk_rag.ingest import html as reader

    return reader.html_main_text(markup).text


EXTRACTORS: dict[str, Callable[[bytes], str]] = {
    "old reader": old_reader,
    "readability-lxml": readability,
    "trafilatura": trafilatura_default,
    "trafilatura favor_recall": trafilatura_recall,
    "trafilatura recall, markdown": trafilatura_recall_markdown,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="dev", choices=["dev", "test", "all"])
    ap.add_argument("--show", type=int, default=0, help="print the gold text's head and tail of N pages")
    ap.add_argument("--lmk-rag", action="store_true", help="also score lmk-rag's current HTML reader")
    args = ap.parse_args()
    labels = [lab for lab in json.loads(LABELS.read_text()) if args.split in ("all", lab["split"])]
    if args.lmk_rag:
        EXTRACTORS["lmk-rag reader"] = lmk_rag_reader
    golds = [gold_text((ROOT / lab["path"]).read_bytes(), lab["main"], lab["drop"]) for lab in labels]
    for lab, gold in list(zip(labels, golds))[: args.show]:
        flat = " ".join(gold.split())
        print(f"--- {lab['path']} ({len(flat.split())} words)\n  {flat[:300]}\n  ... {flat[-300:]}")
    print(f"{len(labels)} pages ({args.split}); bag-of-words P / R / F1 against the labelled main text; time per page")
    for name, fn in EXTRACTORS.items():
        rows, start, worst = [], time.perf_counter(), (1.0, "")
        for lab, gold in zip(labels, golds):
            got = fn((ROOT / lab["path"]).read_bytes())
            rows.append(prf(got, gold))
            worst = min(worst, (rows[-1][2], lab["path"]))
        ms = (time.perf_counter() - start) / len(labels) * 1000
        p, r, f = (sum(x[i] for x in rows) / len(rows) for i in range(3))
        print(
            f"{name:24s} P {p:.3f}  R {r:.3f}  F1 {f:.3f}  worst F1 {worst[0]:.3f} ({Path(worst[1]).name})  {ms:.0f} ms"
        )


if __name__ == "__main__":
    main()
