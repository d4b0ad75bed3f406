"""Write the training pairs `lmk-rag train` would build, as JSONL, so several runs can share them.

    LMK_DOCS_ROOT=... python research/scripts/make_pairs.py pairs.jsonl --domains train --max-pages-per-domain 500
    LMK_DOCS_ROOT=... python research/scripts/make_pairs.py pairs-python.jsonl    # the Python docs' pairs alone

The same pairs as ``lmk-rag train --texts default --sections default --domains ...`` with the
same window and seed options (``research/scripts/ood_pack.py pairs`` does this from a packed file on
a machine without the documentation packages).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def write_pairs(out: Path, domains: list[str], max_pages: int, window_min: int, window_max: int, seed: int) -> int:
    from lmk_rag.encoder import LMKEncoder
    from lmk_rag.folders.models import DEFAULT_MODEL, resolve_model_path
    from lmk_rag.train.config import TrainConfig
    from lmk_rag.train.data import build_pairs, save_pairs

    config = TrainConfig(
        output=str(out.parent),
        texts=["default"],
        sections=["default"],
        domains=domains,
        max_pages_per_domain=max_pages,
        window_min_tokens=window_min,
        window_max_tokens=window_max,
        seed=seed,
    )
    tokenize = LMKEncoder(resolve_model_path(DEFAULT_MODEL)[0], granularity=32, device="cpu").tokenize
    return save_pairs(build_pairs(config, tokenize), out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--domains", nargs="*", default=[], help="'train' or train-split domain names")
    parser.add_argument("--max-pages-per-domain", type=int, default=400)
    parser.add_argument("--window-min-tokens", type=int, default=160)
    parser.add_argument("--window-max-tokens", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = write_pairs(
        args.out, args.domains, args.max_pages_per_domain, args.window_min_tokens, args.window_max_tokens, args.seed
    )
    print(f"wrote {n} pairs to {args.out}")
    return 0


if __name__ == "__main__":  # the sentence splitter's process pool re-imports this module
    raise SystemExit(main())
