"""Run `lmk-rag train` / `lmk-rag eval` for issue #12 on a machine without the documentation packages.

A GPU machine lent for a few minutes has no Debian doc packages, no Python docs and other
installed packages (so other default training texts). ``pack`` reads every source the runs need
here into one xz-compressed JSON file; ``cli`` replays an unchanged ``lmk-rag`` command there,
with the readers answering from that file, so the pairs, the tasks and the queries are the ones
this machine would build.

    python research/scripts/ood_pack.py pack sources.json.xz --max-pages 500
    python research/scripts/ood_pack.py pairs sources.json.xz pairs.jsonl --domains train --max-pages-per-domain 500
    python research/scripts/ood_pack.py cli sources.json.xz -- train --output runs/J --pairs pairs.jsonl ...
    python research/scripts/ood_pack.py weights sources.json.xz MODEL_DIR weights.xz   # here
    python research/scripts/ood_pack.py restore weights.xz MODEL_DIR                   # there

``weights``/``restore`` carry the base model's weights under the device tool's 64 MiB cap: the
matrices (word embeddings, linear layers) in bf16, which is what bf16 autocast training multiplies
them in anyway, the small tensors (biases, norms, position embeddings) in fp32, each split into
byte planes (the sign/exponent bytes compress), xz. Word-embedding rows of tokens that no text in
the packed file can produce (a character the normalised texts never contain: other scripts,
``[unused]``) are left out and restored as zeros: no input on the device reads them.

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

from lmk_rag.corpora.rst import Page, Section
from lmk_rag.corpora.texts import SourceText


def page_to_json(page: Page) -> list[Any]:
    return [page.name, page.text, [[s.title, s.level, s.start, s.end] for s in page.sections]]


def page_from_json(row: list[Any]) -> Page:
    name, text, sections = row
    return Page(name, text, tuple(Section(t, lvl, a, b) for t, lvl, a, b in sections))


def pack(path: Path, max_pages: int, splits: tuple[str, ...] = ("train", "dev", "test")) -> None:
    from lmk_rag.corpora.domains import DOMAINS, read_domain_pages
    from lmk_rag.corpora.rst import read_rst_pages
    from lmk_rag.corpora.texts import training_texts
    from lmk_rag.train.data import split_key

    domains = {}
    for domain in DOMAINS.values():
        if domain.split not in splits:
            continue
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


def packed_characters(path: Path) -> set[str]:
    """Every character the packed texts hold, normalised as an uncased BERT tokenizer does."""
    import unicodedata

    with lzma.open(path, "rt", encoding="utf-8") as f:
        raw = json.dumps(json.load(f), ensure_ascii=False).lower()  # the file escapes non-ASCII as \\uXXXX
    return set(unicodedata.normalize("NFD", raw)) | set(raw)


def possible_token_rows(vocab: list[str], chars: set[str]) -> list[int]:
    """Vocabulary ids whose characters all occur in ``chars`` (special tokens always)."""
    keep = []
    for i, token in enumerate(vocab):
        if token.startswith("[") and token.endswith("]"):
            if not token.startswith("[unused"):
                keep.append(i)
            continue
        piece = token[2:] if token.startswith("##") else token
        if all(c in chars for c in piece):
            keep.append(i)
    return keep


def _is_matrix(name: str, shape: tuple[int, ...]) -> bool:
    """The weights carried in bf16: word embeddings and the linear layers' matrices."""
    return len(shape) == 2 and "position_embeddings" not in name and "token_type" not in name


def _planes(values: Any, width: int) -> bytes:
    """Little-endian values as byte planes, most significant first (sign and exponent compress)."""
    import numpy as np

    raw = np.ascontiguousarray(values).view(np.uint8).reshape(-1, width)
    return b"".join(raw[:, i].tobytes() for i in reversed(range(width)))


def _unplanes(data: Any, width: int) -> Any:
    import numpy as np

    n = data.size // width
    raw = np.empty((n, width), dtype=np.uint8)
    for plane, i in enumerate(reversed(range(width))):
        raw[:, i] = data[plane * n : (plane + 1) * n]
    return raw.reshape(-1)


def pack_weights(packed: Path, model_dir: Path, out: Path) -> None:
    import numpy as np
    from safetensors.numpy import load_file

    weights = load_file(str(model_dir / "model.safetensors"))
    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    keep = possible_token_rows(vocab, packed_characters(packed))
    header: dict[str, Any] = {"keep_rows": keep, "tensors": []}
    matrices, rest = [], []
    for name, value in weights.items():
        if name.endswith("word_embeddings.weight"):
            value = value[keep]
        bf16 = _is_matrix(name, value.shape)
        header["tensors"].append([name, list(weights[name].shape), bf16])
        if bf16:  # bf16 = the top half of the fp32 bits, rounded to nearest even
            bits = value.astype(np.float32).view(np.uint32).astype(np.uint64)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            matrices.append(rounded.astype(np.uint16).ravel())
        else:
            rest.append(value.astype(np.float32).ravel())
    body = _planes(np.concatenate(matrices), 2)
    header["bf16_bytes"] = len(body)
    body += _planes(np.concatenate(rest), 4)
    head = json.dumps(header).encode()
    with lzma.open(out, "wb", preset=9) as f:
        f.write(len(head).to_bytes(8, "little") + head + body)
    print(f"kept {len(keep)} of {len(vocab)} embedding rows; wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


def restore_weights(path: Path, model_dir: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    with lzma.open(path, "rb") as f:
        data = f.read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    body = np.frombuffer(data[8 + size :], dtype=np.uint8)
    split = header["bf16_bytes"]
    bf16 = (_unplanes(body[:split], 2).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    fp32 = _unplanes(body[split:], 4).view(np.float32)
    keep = np.asarray(header["keep_rows"])
    out, at = {}, {True: 0, False: 0}
    for name, shape, is_bf16 in header["tensors"]:
        source = bf16 if is_bf16 else fp32
        rows = len(keep) if name.endswith("word_embeddings.weight") else shape[0]
        n = rows * int(np.prod(shape[1:]))
        value = source[at[is_bf16] : at[is_bf16] + n].reshape(rows, *shape[1:])
        at[is_bf16] += n
        if name.endswith("word_embeddings.weight"):
            full = np.zeros(shape, dtype=np.float32)
            full[keep] = value
            value = full
        out[name] = np.ascontiguousarray(value, dtype=np.float32)
    save_file(out, str(model_dir / "model.safetensors"), metadata={"format": "pt"})
    print(f"restored {len(out)} tensors to {model_dir}")


def install_readers(path: Path) -> None:
    """Make the domain, Python-docs and training-text readers answer from the packed file."""
    import lmk_rag.corpora.domains as domains
    import lmk_rag.corpora.rst as rst_pages
    import lmk_rag.corpora.texts as texts_module
    import lmk_rag.eval.domains as domain_tasks

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

    domains.read_domain_pages = domain_tasks.read_domain_pages = read_domain_pages  # training's and eval's
    rst_pages.read_rst_pages = read_rst_pages
    texts_module.training_texts = lambda: list(texts)


def write_pairs(packed: Path, out: Path, args: argparse.Namespace) -> None:
    from make_pairs import write_pairs as build_and_save  # beside this file: the same pairs, from the readers

    install_readers(packed)
    n = build_and_save(
        out, args.domains, args.max_pages_per_domain, args.window_min_tokens, args.window_max_tokens, args.seed
    )
    print(f"wrote {n} pairs to {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="read the sources here into one file")
    p.add_argument("path", type=Path)
    p.add_argument("--max-pages", type=int, default=1500, help="pages kept per train domain")
    p.add_argument(
        "--splits", default="train,dev,test", help="domain splits to pack (leave test out to fit the weights beside)"
    )
    q = sub.add_parser("pairs", help="build the training pairs from the file, write them as JSONL")
    q.add_argument("path", type=Path)
    q.add_argument("out", type=Path)
    q.add_argument("--domains", nargs="*", default=["train"])
    q.add_argument("--max-pages-per-domain", type=int, default=400)
    q.add_argument("--window-min-tokens", type=int, default=160)
    q.add_argument("--window-max-tokens", type=int, default=384)
    q.add_argument("--seed", type=int, default=0)
    w = sub.add_parser("weights", help="pack a BERT model folder's weights for the device (fp16, xz)")
    w.add_argument("path", type=Path)
    w.add_argument("model_dir", type=Path)
    w.add_argument("out", type=Path)
    r = sub.add_parser("restore", help="write model.safetensors (fp32) from a `weights` file")
    r.add_argument("weights", type=Path)
    r.add_argument("model_dir", type=Path)
    c = sub.add_parser("cli", help="run `lmk-rag ARGS` with the readers answering from the file")
    c.add_argument("path", type=Path)
    c.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command == "pack":
        pack(args.path, args.max_pages, tuple(args.splits.split(",")))
        return 0
    if args.command == "pairs":
        write_pairs(args.path, args.out, args)
        return 0
    if args.command == "weights":
        pack_weights(args.path, args.model_dir, args.out)
        return 0
    if args.command == "restore":
        restore_weights(args.weights, args.model_dir)
        return 0
    install_readers(args.path)
    from lmk_rag.cli import main as lmk_main

    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    return lmk_main(rest)


if __name__ == "__main__":
    sys.exit(main())
