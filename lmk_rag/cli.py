"""``lmk-rag`` command line."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from collections.abc import Sequence


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc


def add_encoder_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="model folder or hub id (default: the packaged model)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--batch-size", type=int, default=32)


def encoder_kwargs(args: argparse.Namespace) -> dict:
    return {"model": args.model, "device": args.device, "dtype": args.dtype, "batch_size": args.batch_size}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lmk-rag", description="Landmark-pooled retrieval.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="long-document retrieval benchmark of pooling modes")
    add_encoder_options(ev)
    ev.add_argument("--methods", default="cls,mean,lmk:32,lmk:128,chunk:32,chunk:128,bm25",
                    help="comma-separated: cls, mean, lmk:K, chunk:N, bm25")
    ev.add_argument("--task", action="append", default=None,
                    help="passkey, needle, or beir:FOLDER (repeatable; default passkey)")
    ev.add_argument("--haystack", default="python-docs",
                    help="folder of text for needle documents, or 'python-docs' (the eval half of CPython's docs)")
    ev.add_argument("--lengths", type=_ints, default=[256, 512, 1024, 2048, 4096])
    ev.add_argument("--positions", type=_floats, default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ev.add_argument("--docs-per-length", type=int, default=25)
    ev.add_argument("--beir-split", default="test")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", default="eval_report", help="folder for report.md, report.json and plots")
    ev.add_argument("--title", default="lmk-rag eval")
    ev.add_argument("--no-progress", action="store_true")
    tr = sub.add_parser("train", help="teach an encoder to pool at landmarks (LoRA or full fine-tuning)")
    tr.add_argument("--output", required=True, help="folder to write; LMKEncoder(model=folder) loads it")
    tr.add_argument("--base-model", default=None, help="model folder or hub id (default: packaged all-MiniLM-L6-v2)")
    tr.add_argument("--pairs", default=None, help="JSONL of {query, positive[, negative]}")
    tr.add_argument("--texts", action="append", default=[],
                    help="folder of raw text for inverse-cloze pairs, or 'default' (repeatable)")
    tr.add_argument("--granularities", type=_ints, default=[32, 64, 128])
    tr.add_argument("--steps", type=int, default=400)
    tr.add_argument("--batch-size", type=int, default=16)
    tr.add_argument("--grad-accum", type=int, default=1)
    tr.add_argument("--lr", type=float, default=5e-4)
    tr.add_argument("--temperature", type=float, default=0.05)
    tr.add_argument("--contrastive-weight", type=float, default=1.0)
    tr.add_argument("--maxsim-weight", type=float, default=1.0)
    tr.add_argument("--distill-weight", type=float, default=1.0)
    tr.add_argument("--distill-only-steps", type=int, default=0)
    tr.add_argument("--full-finetune", action="store_true", help="train all weights instead of LoRA")
    tr.add_argument("--lora-r", type=int, default=16)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--checkpoint-every", type=int, default=50)
    tr.add_argument("--device", default="cpu")
    tr.add_argument("--no-progress", action="store_true")
    return parser


def run_train(args: argparse.Namespace) -> int:
    from .models import DEFAULT_MODEL
    from .train import TrainConfig, train

    config = TrainConfig(
        output=args.output, base_model=args.base_model or DEFAULT_MODEL, pairs=args.pairs, texts=args.texts,
        granularities=args.granularities, steps=args.steps, batch_size=args.batch_size, grad_accum=args.grad_accum,
        lr=args.lr, temperature=args.temperature, contrastive_weight=args.contrastive_weight,
        maxsim_weight=args.maxsim_weight, distill_weight=args.distill_weight,
        distill_only_steps=args.distill_only_steps, full_finetune=args.full_finetune, lora_r=args.lora_r,
        seed=args.seed, checkpoint_every=args.checkpoint_every, device=args.device,
        show_progress=not args.no_progress,
    )
    out = train(config)
    print(f"wrote {out}; load it with LMKEncoder(model={str(out)!r})")
    return 0


def run_eval(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .encoder import LMKEncoder
    from .eval import beir_task, default_haystack, evaluate, needle_tasks, parse_methods, read_folder, write_report

    kwargs = encoder_kwargs(args)
    methods = parse_methods(args.methods, **kwargs)
    counter = LMKEncoder(**kwargs)
    tasks = []
    for spec in args.task or ["passkey"]:
        if spec.startswith("beir:"):
            tasks.append(beir_task(spec[5:], split=args.beir_split))
        elif spec in ("passkey", "needle"):
            haystack = default_haystack("eval") if args.haystack == "python-docs" else read_folder(args.haystack)
            tasks += needle_tasks(
                haystack, lambda xs: counter.tokenize(xs).n_tokens, lengths=args.lengths,
                positions=args.positions, docs_per_length=args.docs_per_length, kind=spec, seed=args.seed,
            )
        else:
            raise ValueError(f"unknown task {spec!r}; use passkey, needle or beir:FOLDER")
    rows = evaluate(tasks, methods, progress=not args.no_progress)
    command = "lmk-rag " + " ".join(shlex.quote(a) for a in argv)
    paths = write_report(rows, args.out, title=args.title, command=command, settings=vars(args))
    print(paths["markdown"].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        if args.command == "eval":
            return run_eval(args, argv)
        if args.command == "train":
            return run_train(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"lmk-rag {args.command}: error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
