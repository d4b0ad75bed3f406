"""``lmk-rag export``, ``merge`` and ``train``: write models other tools load, blend adapters, and
teach an encoder to pool at landmarks (train's options come from :class:`~lmk_rag.train.config.TrainConfig`)."""

from __future__ import annotations

import argparse
import dataclasses

from ..export import SAVE_FORMATS
from ..train.config import TrainConfig, config_fields
from .options import Command, add_config_options, add_encoder_options, encoder_options, floats

EXAMPLE_EXPORT = """examples:
  lmk-rag export default st-model/ --format sentence-transformers
  lmk-rag export my-lmk-model merged/ --format merged"""
EXAMPLE_MERGE = """examples:
  lmk-rag merge my-lmk-model lmk-rag/all-MiniLM-L6-v2-lmk-v4 --weights 0.5,0.5 --output blend
  lmk-rag merge lmk-rag/all-MiniLM-L6-v2-lmk-v4 --weights 0.75 --base-weight 0.25 --output softer"""
EXAMPLE_TRAIN = """examples:
  lmk-rag train --texts my_docs/ --output my-lmk-model --steps 200   # pip install 'lmk-rag[train]'
  lmk-rag ingest docs/ --model my-lmk-model --index qdrant:./my_index   # then search it as usual"""


def add_parser(command: Command) -> None:
    """The ``export``, ``merge`` and ``train`` commands and their options."""
    ex = command(
        "export",
        run_export,
        EXAMPLE_EXPORT,
        help="save a model in a format other tools load (sentence-transformers, merged weights)",
        description="Write MODEL (a folder, a hub id, or 'default' for the packaged model) to the folder OUT. "
        "Formats: lmk (lmk-rag's folder: settings + adapter), merged (a plain Hugging Face folder with the "
        "adapter and landmark offset merged into the weights), sentence-transformers (loads with "
        "SentenceTransformer(OUT, trust_remote_code=True), no lmk-rag needed), multi-vector (a "
        "sentence-transformers MultiVectorEncoder whose document vectors are the landmark vectors).",
    )
    ex.add_argument("source", metavar="MODEL", help="model folder or hub id; 'default' = the packaged model")
    ex.add_argument("output", help="folder to write (must not exist or be empty, unless --overwrite)")
    ex.add_argument("--format", required=True, choices=SAVE_FORMATS, help="what to write (see above)")
    ex.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    add_encoder_options(ex, exclude=("model", "device", "batch_size", "max_batch_tokens"))

    mg = command(
        "merge",
        run_merge,
        EXAMPLE_MERGE,
        help="interpolate the weights of LMK adapters trained on the same base (model soup)",
        description="Write to OUT the LMK folder whose weights are the weighted sum of MODEL adapters' "
        "(e.g. your own domain's adapter and the shipped one: a model between the two, no training). "
        "Exact: the result is one LoRA adapter of the summed rank.",
    )
    mg.add_argument(
        "models",
        metavar="MODEL",
        nargs="+",
        help="LMK folders or shipped adapter names (two or more, or one with --base-weight)",
    )
    mg.add_argument(
        "--weights",
        type=floats,
        required=True,
        help="comma-separated, one per MODEL; with --base-weight, summing to 1",
    )
    mg.add_argument(
        "--base-weight",
        type=float,
        default=0.0,
        help="share of the untrained base model (default 0): moves the adapters back toward it (WiSE-FT)",
    )
    mg.add_argument("--output", required=True, help="folder to write (must not exist or be empty, unless --overwrite)")
    mg.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")

    tr = command(
        "train", run_train, EXAMPLE_TRAIN, help="teach an encoder to pool at landmarks (LoRA or full fine-tuning)"
    )
    add_config_options(tr, config_fields())


def run_export(args: argparse.Namespace) -> int:
    """``lmk-rag export MODEL OUT --format F``: write the model in a format other tools load."""
    from ..encoder import LMKEncoder

    model = None if args.source == "default" else args.source
    encoder = LMKEncoder(model, device="cpu", **encoder_options(args))
    folder = encoder.save(args.output, format=args.format, overwrite=args.overwrite)
    settings = f"pooling={encoder.pooling}, k={encoder.granularity}"
    print(f"wrote {args.format} folder {folder} ({encoder.model_name}, {settings})")
    return 0


def run_train(args: argparse.Namespace) -> int:
    """Train with the options given (every field of :class:`TrainConfig` is an option) and save."""
    from ..train import train

    config = TrainConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if f.metadata["cli"]}
    )
    out = train(config)
    print(f"wrote {out}; load it with LMKEncoder(model={str(out)!r})")
    return 0


def run_merge(args: argparse.Namespace) -> int:
    """``lmk-rag merge MODELS --weights W``: write the weighted blend of LMK adapters."""
    from ..train.merge import merge_lmk_folders

    out = merge_lmk_folders(
        args.models, args.weights, args.output, base_weight=args.base_weight, overwrite=args.overwrite
    )
    print(f"wrote {out}; load it with LMKEncoder(model={str(out)!r})")
    return 0
