"""Run `lmk-rag train` / `lmk-rag eval` for issue #12 on a machine without the documentation packages.

A GPU machine lent for a few minutes has no Debian doc packages, no Python docs and other
installed packages (so other default training texts). ``pack`` reads every source the runs need
here into one xz-compressed JSON file; ``cli`` replays an unchanged ``lmk-rag`` command there,
with the readers answering from that file, so the pairs, the tasks and the queries are the ones
this machine would build.

    python benchmarks/ood_pack.py pack sources.json.xz --max-pages 500
    python benchmarks/ood_pack.py pairs sources.json.xz pairs.jsonl --domains train --max-pages-per-domain 500
    python benchmarks/ood_pack.py cli sources.json.xz -- train --output runs/J --pairs pairs.jsonl ...

``pairs`` builds the training pairs once (what ``lmk-rag train --texts default --sections default
--domains ...`` builds) and writes them as JSONL, so several runs in parallel share them.

The train domains are capped at pack time to the first ``--max-pages`` pages in the trainer's
stable order (``split_key``), so any ``--max-pages-per-domain`` up to that cap selects the same
pages as on this machine.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path
from typing import Any

from lmk_rag.eval.corpora import SourceText
from lmk_rag.eval.sections import Page, Section


def page_to_json(page: Page) -> list[Any]:
    return [page.name, page.text, [[s.title, s.level, s.start, s.end] for s in page.sections]]


def page_from_json(row: list[Any]) -> Page:
    name, text, sections = row
    return Page(name, text, tuple(Section(t, lvl, a, b) for t, lvl, a, b in sections))


def pack(path: Path, max_pages: int) -> None:
    from lmk_rag.eval.corpora import training_texts
    from lmk_rag.eval.domains import DOMAINS, read_domain_pages
    from lmk_rag.eval.sections import read_rst_pages
    from lmk_rag.train.trainer import split_key

    domains = {}
    for domain in DOMAINS.values():
        pages = read_domain_pages(domain)
        if domain.split == "train":
            pages = sorted(pages, key=lambda p: split_key(p.name))[:max_pages]
        domains[domain.name] = [page_to_json(p) for p in pages]
        print(f"{domain.name}: {len(pages)} pages", flush=True)
    rst = {split: [page_to_json(p) for p in read_rst_pages(None, split=split)] for split in ("train", "eval")}
    texts = [[s.name, s.text] for s in training_texts()]
    with lzma.open(path, "wt", encoding="utf-8", preset=9 | lzma.PRESET_EXTREME) as f:
        json.dump({"domains": domains, "rst": rst, "texts": texts}, f)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


def install_readers(path: Path) -> None:
    """Make the domain, Python-docs and training-text readers answer from the packed file."""
    import lmk_rag.eval.corpora as corpora
    import lmk_rag.eval.domains as domains
    import lmk_rag.eval.sections as sections

    with lzma.open(path, "rt", encoding="utf-8") as f:
        packed = json.load(f)
    by_domain = {name: [page_from_json(r) for r in rows] for name, rows in packed["domains"].items()}
    rst = {split: [page_from_json(r) for r in rows] for split, rows in packed["rst"].items()}
    texts = [SourceText(name, text) for name, text in packed["texts"]]

    def read_domain_pages(domain: Any, root: Any = None) -> list[Page]:
        return list(by_domain[domain.name])

    def read_rst_pages(folder: Any = None, split: str | None = None) -> list[Page]:
        if folder is not None or split not in rst:
            raise ValueError(f"the packed file holds the default Python docs' train/eval halves, not {folder}, {split}")
        return list(rst[split])

    domains.read_domain_pages = read_domain_pages
    sections.read_rst_pages = read_rst_pages
    corpora.training_texts = lambda: list(texts)


def write_pairs(packed: Path, out: Path, args: argparse.Namespace) -> None:
    from lmk_rag.encoder import LMKEncoder
    from lmk_rag.models import DEFAULT_MODEL, resolve_model_path
    from lmk_rag.train.trainer import TrainConfig, build_pairs

    install_readers(packed)
    config = TrainConfig(
        output=str(out.parent),
        texts=["default"],
        sections=["default"],
        domains=args.domains,
        max_pages_per_domain=args.max_pages_per_domain,
        window_min_tokens=args.window_min_tokens,
        window_max_tokens=args.window_max_tokens,
        seed=args.seed,
    )
    tokenize = LMKEncoder(resolve_model_path(DEFAULT_MODEL)[0], granularity=32, device="cpu").tokenize
    pairs = build_pairs(config, tokenize)
    with out.open("w", encoding="utf-8") as f:
        for pair in pairs:
            row: dict[str, Any] = {"query": pair.query, "positive": pair.positive}
            if pair.negative:
                row["negative"] = pair.negative
            if pair.answer:
                row["answer"] = list(pair.answer)
            f.write(json.dumps(row) + "\n")
    print(f"wrote {len(pairs)} pairs to {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="read the sources here into one file")
    p.add_argument("path", type=Path)
    p.add_argument("--max-pages", type=int, default=1500, help="pages kept per train domain")
    q = sub.add_parser("pairs", help="build the training pairs from the file, write them as JSONL")
    q.add_argument("path", type=Path)
    q.add_argument("out", type=Path)
    q.add_argument("--domains", nargs="*", default=["train"])
    q.add_argument("--max-pages-per-domain", type=int, default=400)
    q.add_argument("--window-min-tokens", type=int, default=160)
    q.add_argument("--window-max-tokens", type=int, default=384)
    q.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("cli", help="run `lmk-rag ARGS` with the readers answering from the file")
    c.add_argument("path", type=Path)
    c.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command == "pack":
        pack(args.path, args.max_pages)
        return 0
    if args.command == "pairs":
        write_pairs(args.path, args.out, args)
        return 0
    install_readers(args.path)
    from lmk_rag.cli import main as lmk_main

    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    return lmk_main(rest)


if __name__ == "__main__":
    sys.exit(main())
