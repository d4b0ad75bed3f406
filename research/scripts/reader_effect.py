"""What the readers change in what an LLM gets (issue #47): contexts of 512 tokens built from HTML
pages read by the previous reader (tags stripped) and by lmk-rag's reader (main text).

1. Boilerplate in contexts: the 26 hand-labelled documentation pages
   (research/data/html_main_text_labels.json) as one index; each page's headings (h2/h3, up to 6)
   as queries; the share of context words from a labelled page that are not in its labelled main
   text (counted as a multiset, so a word the main text holds twice is main text twice).
2. Answers: FAQ pages (question-style sets; dev and test sources) as whole HTML pages, questions
   as queries; each answer located in each reader's text (by its first and last six words);
   recall = the share of the answer's words inside the context's passages, hit = any of them;
   an answer the reader lost counts 0 (and is counted apart).

    python research/scripts/reader_effect.py [--faq dev|test|all] [--budget 512]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import lxml.html

sys.path.insert(0, str(Path(__file__).resolve().parent))
from html_main_text import LABELS, ROOT, gold_text, old_reader

from lmk_rag import LMKEncoder
from lmk_rag.corpora.faqs import faq_folder, faq_sources_of, read_faq
from lmk_rag.index import QdrantIndex
from lmk_rag.ingest import html_main_text

_WORDS = re.compile(r"\w+")


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORDS.findall(text))


def new_reader(raw: bytes) -> str:
    return html_main_text(raw).text


READERS = {"previous reader": old_reader, "lmk-rag reader": new_reader}


def index_of(texts: dict[str, str], encoder: LMKEncoder, folder: Path) -> QdrantIndex:
    index = QdrantIndex(folder, encoder=encoder)
    ids = sorted(texts)
    index.add([texts[i] for i in ids], ids=ids)
    return index


def boilerplate(encoder: LMKEncoder, budget: int) -> None:
    labels = json.loads(LABELS.read_text())
    raws = {lab["path"]: (ROOT / lab["path"]).read_bytes() for lab in labels}
    golds = {lab["path"]: words(gold_text(raws[lab["path"]], lab["main"], lab["drop"])) for lab in labels}
    queries = []
    for lab in labels:
        tree = lxml.html.fromstring(raws[lab["path"]])
        heads = [" ".join(h.text_content().replace("¶", "").split()) for h in tree.xpath("//h2 | //h3")]
        queries += [h for h in heads if len(_WORDS.findall(h)) >= 2][:6]
    print(f"boilerplate: {len(labels)} labelled pages, {len(queries)} heading queries, {budget} tokens")
    for name, reader in READERS.items():
        with tempfile.TemporaryDirectory() as tmp:
            index = index_of({p: reader(r) for p, r in raws.items()}, encoder, Path(tmp) / "idx")
            try:
                total = extra = 0
                for q in queries:
                    for p in index.context(q, budget):
                        got = words(p.text)
                        total += sum(got.values())
                        extra += sum((got - golds[p.id]).values())
            finally:
                index.close()
        print(f"  {name:16s} boilerplate words in contexts: {extra / max(total, 1):.2%} of {total}")


def locate(text: str, answer: str) -> tuple[int, int] | None:
    """The character span of ``answer`` in ``text``, found by its first and last six words (the
    readers differ in whitespace and markup, not in the words of a paragraph); None when the
    reader lost it."""
    spans = [(m.start(), m.end(), m.group().lower()) for m in _WORDS.finditer(text)]
    words_ = [w for _, _, w in spans]
    want = [w.lower() for w in _WORDS.findall(answer)]
    if len(want) < 6:
        return None
    head = want[:6]
    starts = [i for i in range(len(words_) - 5) if words_[i : i + 6] == head]
    # The answer's last six words, or, where the reader left out what the answer ends with (the
    # FAQ parser's answer of a page's last question runs on into its navigation), six earlier ones.
    for drop in range(min(40, len(want) - 6) + 1):
        tail = want[len(want) - 6 - drop : len(want) - drop]
        for i in starts:
            for j in range(i, min(len(words_) - 5, i + 3 * len(want))):
                if words_[j : j + 6] == tail:
                    return spans[i][0], spans[j + 5][1]
    return None


def covered(span: tuple[int, int], text: str, passages: list[tuple[int, int]]) -> float:
    """The share of the words of ``text[span]`` that lie inside one of ``passages``."""
    inside = total = 0
    for m in _WORDS.finditer(text, span[0], span[1]):
        total += 1
        inside += any(a <= m.start() and m.end() <= b for a, b in passages)
    return inside / max(total, 1)


def answers(encoder: LMKEncoder, split: str, budget: int) -> None:
    for source in faq_sources_of(split):
        folder = faq_folder(source)
        pages = read_faq(source)
        files = {
            f"{source.name}/{p.relative_to(folder).as_posix()}": p for pat in source.include for p in folder.glob(pat)
        }
        qa = [(q.question, page.name, page.text[q.start : q.end]) for page, qs in pages for q in qs]
        row = []
        for name, reader in READERS.items():
            texts = {}
            for doc_id, path in files.items():
                try:
                    texts[doc_id] = reader(path.read_bytes())
                except ValueError:
                    texts[doc_id] = ""
            with tempfile.TemporaryDirectory() as tmp:
                index = index_of({i: t for i, t in texts.items() if t.strip()}, encoder, Path(tmp) / "idx")
                try:
                    recall = hit = lost = 0.0
                    for question, page, answer in qa:
                        where = locate(texts[page], answer)
                        if where is None:
                            lost += 1
                            continue
                        ctx = [p.span for p in index.context(question, budget) if p.id == page]
                        share = covered(where, texts[page], ctx)
                        recall += share
                        hit += share > 0
                finally:
                    index.close()
            n = len(qa)
            row.append(
                f"{name}: recall {recall / n:.3f}, hit {hit / n:.3f}, answer not found in the text {lost / n:.3f}"
            )
        print(f"  {source.name} ({source.split}, {len(files)} pages, {n} questions): " + "; ".join(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--faq", default="all", help="dev, test or all (the FAQ sources for the answer part)")
    ap.add_argument("--budget", type=int, default=512)
    ap.add_argument("--skip-boilerplate", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    encoder = LMKEncoder()
    if not args.skip_boilerplate:
        boilerplate(encoder, args.budget)
    print(f"answers: FAQ pages as whole HTML pages, {args.budget} tokens")
    for split in ("dev", "test") if args.faq == "all" else (args.faq,):
        answers(encoder, split, args.budget)


if __name__ == "__main__":
    main()
