"""``lmk-rag`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import shlex
import sys
import traceback
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import IndexNotFoundError, InvalidInputError, LMKError, PathNotFoundError
from .export import SAVE_FORMATS
from .passages import DEFAULT_PASSAGE_RULE, PASSAGE_RULES
from .pooling import LANDMARK_WEIGHTS
from .settings import EncoderSettings, setting_fields

logger = logging.getLogger("lmk_rag")


def redact_uri(uri: str) -> str:
    """``uri`` with any ``user:password@`` removed, for printing."""
    return re.sub(r"(://)[^/@]*@", r"\1", uri)


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


def _granularity(text: str) -> int | str | list[int] | None:
    """'32', 'sentence', 'none' (one landmark per window) or '32,64,128' (variable)."""
    if text in ("sentence", "default"):
        return text
    if text.lower() == "none":
        return None
    ks = _ints(text)
    return ks[0] if len(ks) == 1 else ks


def add_encoder_options(p: argparse.ArgumentParser, *, exclude: Sequence[str] = ()) -> None:
    """One ``--option`` per :class:`EncoderSettings` field marked ``cli``; an option not given
    leaves the setting to the index, the model folder or the default, in that order."""
    group = p.add_argument_group("encoder settings (default: the index's, else the model folder's, else built-in)")
    for f, hint in setting_fields():
        if not f.metadata["cli"] or f.name in exclude:
            continue
        kwargs: dict[str, Any] = {
            "dest": f.name,
            "default": None,
            "help": f"{f.metadata['help']} (default {f.default!r})",
        }
        if hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif f.name == "granularity":
            kwargs["type"] = _granularity
        elif int in (hint, *typing.get_args(hint)):
            kwargs["type"] = int
        if f.metadata["choices"]:
            kwargs["choices"] = f.metadata["choices"]
        group.add_argument("--" + f.name.replace("_", "-"), **kwargs)


def encoder_options(args: argparse.Namespace) -> dict[str, Any]:
    """The encoder settings given on the command line."""
    return {
        name: getattr(args, name)
        for name in EncoderSettings.names("cli")
        if hasattr(args, name) and getattr(args, name) is not None
    }


# Set by each evaluation method itself, so not options of `lmk-rag eval`.
_EVAL_OWN = ("pooling", "granularity", "max_tokens")


# One runnable example per command, shown at the end of `lmk-rag COMMAND -h`.
EXAMPLES = {
    "ingest": """examples:
  lmk-rag ingest docs/ --index qdrant:./lmk_index          # embedded Qdrant, packaged model
  lmk-rag ingest docs/ notes.md --index chroma:./chroma_db --json
  lmk-rag ingest docs/ --index qdrant+http://localhost:6333 --prune   # a server; drop deleted files
  lmk-rag ingest docs/ --verify   # first re-encode stored documents whose vectors are damaged""",
    "search": """examples:
  lmk-rag search "how do I rotate the keys?" --index qdrant:./lmk_index -k 5
  lmk-rag search "E4711 error" --mode hybrid --json
  lmk-rag search "release notes" --filter '{"year": {"$gte": 2024}, "lang": {"$in": ["en", "de"]}}'
  lmk-rag search "how do I rotate the keys?" --context 512   # the passages to hand an LLM""",
    "info": """examples:
  lmk-rag info --index qdrant:./lmk_index --json""",
    "copy": """examples:
  lmk-rag copy qdrant:./lmk_index qdrant+http://localhost:6333""",
    "eval": """examples:
  lmk-rag eval --methods lmk:32,chunk:128,bm25 --task passkey --out report/
  lmk-rag eval --task beir:./my_beir_folder --methods lmk:32,bm25""",
    "train": """examples:
  lmk-rag train --texts my_docs/ --output my-lmk-model --steps 200   # pip install 'lmk-rag[train]'
  lmk-rag search "a question" --model my-lmk-model --index qdrant:./my_index""",
    "export": """examples:
  lmk-rag export default st-model/ --format sentence-transformers
  lmk-rag export my-lmk-model merged/ --format merged""",
    "merge": """examples:
  lmk-rag merge my-lmk-model lmk-rag/all-MiniLM-L6-v2-lmk-v4 --weights 0.5,0.5 --output blend
  lmk-rag merge lmk-rag/all-MiniLM-L6-v2-lmk-v4 --weights 0.75 --base-weight 0.25 --output softer""",
}


def _json_filter(text: str) -> Any:
    """``--filter``: a JSON object, checked before any model loads."""
    import json

    from .index.filters import parse_filter

    try:
        where = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f'not JSON ({exc.msg}); give an object such as \'{{"lang": "en"}}\'') from exc
    try:
        parse_filter(where)
    except LMKError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return where


def package_version() -> str:
    """The installed distribution's version (the package's own when run from a source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lmk-rag")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        from . import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmk-rag",
        description="Landmark-pooled retrieval: index folders of documents and find the passage that answers.",
        epilog="Run `lmk-rag COMMAND -h` for a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"lmk-rag {package_version()}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log what lmk-rag does (model, index, settings); tracebacks"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return subparsers.add_parser(
            name, epilog=EXAMPLES[name], formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs
        )

    ev = command("eval", help="long-document retrieval benchmark of pooling modes")
    add_encoder_options(ev, exclude=_EVAL_OWN)
    ev.add_argument(
        "--methods",
        default="cls,mean,lmk:32,lmk:128,chunk:32,chunk:128,bm25",
        help="comma-separated: cls, mean, lmk:K, chunk:N, bm25 (METHOD@MODEL for another model), or none "
        "(with --export-beir: only write the tasks)",
    )
    ev.add_argument(
        "--task",
        action="append",
        default=None,
        help="passkey, needle, sections (section headings of long documentation pages as queries), "
        "sections-short (headings vs sections of <= 256 tokens), domains:SPLIT|NAMES (the sections task on "
        "other projects' documentation, one task per domain: SPLIT is train, dev or test; NAMES e.g. "
        "git,postgresql), domains-short:SPLIT|NAMES, or beir:FOLDER (repeatable; default passkey)",
    )
    ev.add_argument(
        "--docs-root",
        default=None,
        help="folder holding one `dpkg -x` of each documentation package, for the domains tasks "
        "(default: $LMK_DOCS_ROOT, else / for installed packages)",
    )
    ev.add_argument(
        "--export-beir",
        default=None,
        metavar="DIR",
        help="also write every task as a BEIR folder DIR/TASK (corpus, queries, qrels, answer spans)",
    )
    ev.add_argument(
        "--docs-folder",
        default=None,
        help="reST documentation sources for the sections tasks (default: $LMK_PYTHON_DOCS, else "
        "/usr/share/doc/python3*/html/_sources); the eval half of its pages is used",
    )
    ev.add_argument(
        "--haystack",
        default="python-docs",
        help="folder of text for needle documents, or 'python-docs' (the eval half of CPython's docs)",
    )
    ev.add_argument(
        "--lengths",
        type=_ints,
        default=[256, 512, 1024, 2048, 4096],
        help="passkey/needle document lengths in tokens, comma-separated (default 256,...,4096)",
    )
    ev.add_argument(
        "--positions",
        type=_floats,
        default=[0.0, 0.25, 0.5, 0.75, 1.0],
        help="where the needle sits, as fractions of the document, comma-separated (default 0,0.25,...,1)",
    )
    ev.add_argument("--docs-per-length", type=int, default=25, help="passkey/needle documents per length (default 25)")
    ev.add_argument("--beir-split", default="test", help="qrels split of beir:FOLDER tasks (default test)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the tasks' sampling and the statistics (default 0)")
    ev.add_argument(
        "--passage",
        default=DEFAULT_PASSAGE_RULE,
        help=f"passage rule of the multi-vector lmk rows (as `lmk-rag search --passage`): one of {PASSAGE_RULES}, "
        "or several joined by commas (`peak,region`: one row per rule from one encoding)",
    )
    ev.add_argument(
        "--baseline",
        default=None,
        help="a method's row name as the report prints it (e.g. mean-truncated@all-MiniLM-L6-v2): every other row "
        "gets its paired difference to it per task and over the tasks, with a 95%% bootstrap interval and a "
        "randomization-test p (nDCG@10, and passage hit@1 where both have it)",
    )
    ev.add_argument(
        "--context-tokens",
        type=_ints,
        default=None,
        metavar="B,B,...",
        help="also measure what reaches the LLM: answer recall / hit / full of contexts of B tokens "
        "(e.g. 256,512,1024) from chunk-then-embed (128 and 256 tokens, LangChain's and LlamaIndex's "
        "splitters), BM25 over chunks, and lmk-rag's context builder",
    )
    ev.add_argument(
        "--context-chunk-model",
        default="sentence-transformers/all-MiniLM-L6-v2",
        help="model of the chunk-then-embed context rows (default: the packaged base, all-MiniLM-L6-v2)",
    )
    ev.add_argument("--out", default="eval_report", help="folder for report.md, report.json and plots")
    ev.add_argument("--title", default="lmk-rag eval", help="title of the report")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ing = command("ingest", help="read files into a Qdrant or Chroma index (resumable, idempotent)")
    ing.add_argument("paths", nargs="+", help="files or folders")
    _index_options(ing)
    _quantization_option(ing)
    ing.add_argument(
        "--prune", action="store_true", help="remove documents whose files, under the paths given, are gone"
    )
    ing.add_argument(
        "--verify",
        action="store_true",
        help="first check every stored document's vectors and re-encode, from the stored text, those that are "
        "unreadable, not one per landmark, not finite or not of unit length (what damaged files leave)",
    )
    ing.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="read files and folders that symbolic links lead to outside the paths given",
    )
    ing.add_argument("--batch-docs", type=int, default=16, help="documents encoded and written together")
    ing.add_argument("--no-progress", action="store_true", help="no progress bars")
    ing.add_argument("--json", action="store_true", help="print the summary as JSON (counts, failed and ignored files)")
    ray = ing.add_argument_group(
        "Ray (pip install 'lmk-rag[ray]')", "encode on a Ray cluster: see the README, Ingesting at scale"
    )
    ray.add_argument("--ray", action="store_true", help="read and encode in a Ray Data actor pool")
    ray.add_argument(
        "--ray-address",
        default=None,
        help="cluster to join: auto, ray://HOST:10001 or HOST:6379 (default: a local Ray on this machine)",
    )
    ray.add_argument("--actors", type=int, default=None, help="encoders in the pool, one model each (default 2)")
    ray.add_argument("--gpus-per-actor", type=float, default=None, help="GPUs per encoder (default 0: CPU)")
    ray.add_argument("--cpus-per-actor", type=float, default=None, help="CPUs (torch threads) per encoder (default 1)")

    se = command("search", help="ranked documents with the matched passage")
    se.add_argument("query", help="the question or keywords to search for")
    _index_options(se)
    se.add_argument(
        "-k",
        type=int,
        default=None,
        help="documents to return (default 5); with --context, documents searched (default 10)",
    )
    se.add_argument(
        "--context",
        type=int,
        default=None,
        metavar="TOKENS",
        help="print the context to hand an LLM instead: the best passages within TOKENS tokens (e.g. 512)",
    )
    se.add_argument(
        "--mode",
        default=None,
        choices=("hybrid", "prefetch", "maxsim", "pooled"),
        help="qdrant: hybrid (default: BM25 and MaxSim candidates fused), prefetch (pooled HNSW candidates, exact "
        "MaxSim rerank), maxsim (exact), pooled; chroma: maxsim (default) or pooled",
    )
    se.add_argument(
        "--filter",
        type=_json_filter,
        default=None,
        metavar="JSON",
        help='metadata filter as JSON: {"lang": "en"}, ranges {"year": {"$gte": 2020}}, $in/$nin/$ne, $and/$or '
        "(see the docs, Concepts: Metadata filters)",
    )
    se.add_argument("--neighbours", type=int, default=1, help="landmarks of context each side of the passage")
    se.add_argument(
        "--passage",
        default=DEFAULT_PASSAGE_RULE,
        choices=PASSAGE_RULES,
        help="which landmark names the passage: region (default: the one whose neighbourhood matches best) or "
        "peak (the single best landmark); see lmk_rag/passages.py",
    )
    se.add_argument("--json", action="store_true", help="machine-readable output")

    cp = command(
        "copy",
        help="copy an index into another store without re-encoding (embedded -> server, old folders -> Qdrant Edge)",
        description="Copy every document (text, metadata, spans, vectors) of SOURCE into DEST, e.g. "
        "qdrant:./lmk_index -> qdrant+http://host:6333, or qdrant-local:OLD (an index written by "
        "qdrant-client's local mode) -> qdrant:NEW. Ids are kept: run it again to finish a copy that stopped.",
    )
    from .index.uri import URI_HELP

    cp.add_argument("source", metavar="SOURCE", help=URI_HELP + ", or qdrant-local:PATH")
    cp.add_argument("dest", metavar="DEST", help=URI_HELP)
    cp.add_argument("--batch", type=int, default=256, help="documents read and written together")
    _quantization_option(cp)
    cp.add_argument("--no-progress", action="store_true", help="no progress bar")

    info = command("info", help="the index's encoder fingerprint and counts")
    _index_options(info)
    info.add_argument("--json", action="store_true", help="machine-readable output")

    ex = command(
        "export",
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
        type=_floats,
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

    tr = command("train", help="teach an encoder to pool at landmarks (LoRA or full fine-tuning)")
    tr.add_argument("--output", required=True, help="folder to write; LMKEncoder(model=folder) loads it")
    tr.add_argument("--base-model", default=None, help="model folder or hub id (default: packaged all-MiniLM-L6-v2)")
    tr.add_argument("--pairs", default=None, help="JSONL of {query, positive[, negative]}")
    tr.add_argument(
        "--texts",
        action="append",
        default=[],
        help="folder of raw text for inverse-cloze pairs, or 'default' (repeatable)",
    )
    tr.add_argument(
        "--sections",
        action="append",
        default=[],
        help="reST docs folder, or 'default' (the Python docs, see lmk-rag eval --docs-folder): "
        "section heading -> passage pairs and inverse-cloze text from the train half of its pages",
    )
    tr.add_argument(
        "--domains",
        action="append",
        default=[],
        help="'train' or names of train-split documentation domains (lmk_rag.corpora.domains; dev and test "
        "domains are refused): the same pairs from other projects' docs (repeatable)",
    )
    tr.add_argument("--docs-root", default=None, help="where the domain packages are extracted ($LMK_DOCS_ROOT)")
    tr.add_argument("--max-pages-per-domain", type=int, default=400, help="pages read per domain (stable sample)")
    tr.add_argument(
        "--granularities",
        type=_ints,
        default=[32, 64, 128],
        help="chunk sizes k drawn per text, comma-separated (default 32,64,128)",
    )
    tr.add_argument("--steps", type=int, default=400, help="optimizer steps (default 400)")
    tr.add_argument("--batch-size", type=int, default=16, help="pairs per step (default 16)")
    tr.add_argument("--grad-accum", type=int, default=1, help="batches accumulated per step (default 1)")
    tr.add_argument("--lr", type=float, default=5e-4, help="peak learning rate (default 5e-4)")
    tr.add_argument("--warmup-steps", type=int, default=0, help="linear warm-up steps (default 0)")
    tr.add_argument(
        "--lr-decay", default="constant", choices=["constant", "linear"], help="after warm-up (default constant)"
    )
    tr.add_argument("--temperature", type=float, default=0.05, help="InfoNCE temperature (default 0.05)")
    tr.add_argument(
        "--contrastive-weight", type=float, default=1.0, help="weight of InfoNCE on pooled vectors (default 1)"
    )
    tr.add_argument("--maxsim-weight", type=float, default=1.0, help="weight of InfoNCE on MaxSim scores (default 1)")
    tr.add_argument(
        "--distill-weight",
        type=float,
        default=1.0,
        help="weight of landmark distillation toward the base model's chunk embeddings (default 1)",
    )
    tr.add_argument(
        "--distill-only-steps",
        type=int,
        default=0,
        help="first steps train landmark distillation alone (no queries, no negatives needed)",
    )
    tr.add_argument(
        "--distill-batch-size",
        type=int,
        default=None,
        help="batch size of the distillation-only steps (default: --batch-size)",
    )
    tr.add_argument(
        "--score-distill-weight",
        type=float,
        default=0.0,
        help="in contrastive steps, pull each query's MaxSim scores over the batch towards the base model's "
        "chunk-then-embed scores (KL); 0 = off",
    )
    tr.add_argument(
        "--landmark-weight",
        type=float,
        default=0.0,
        help="in contrastive steps, for pairs that know where their answer lies (sections, inverse cloze, a JSONL "
        "'answer' span): the landmarks covering it against the page's other landmarks; 0 = off",
    )
    tr.add_argument(
        "--landmark-weights",
        default=None,
        choices=LANDMARK_WEIGHTS,
        help="how the single vector weighs a text's landmarks, in training and in the saved folder: equal, or "
        "by each chunk's tokens (not --landmark-weight, a loss weight); default: the --init-from folder's, else equal",
    )
    tr.add_argument("--window-min-tokens", type=int, default=192, help="shortest training passage (tokens)")
    tr.add_argument("--window-max-tokens", type=int, default=448, help="longest training passage (tokens)")
    tr.add_argument(
        "--distill-queries",
        action="store_true",
        help="distil the queries' landmark states too, not only the documents'",
    )
    tr.add_argument("--full-finetune", action="store_true", help="train all weights instead of LoRA")
    tr.add_argument("--lora-r", type=int, default=16, help="LoRA rank")
    tr.add_argument(
        "--lora-alpha",
        type=int,
        default=32,
        help="LoRA alpha (updates scale by alpha / rank); with --init-from, the folder's rank and alpha",
    )
    tr.add_argument("--seed", type=int, default=0, help="seed of sampling and initialisation (default 0)")
    tr.add_argument("--checkpoint-every", type=int, default=50, help="steps between resumable checkpoints (default 50)")
    tr.add_argument(
        "--init-from",
        default=None,
        help="start from the LoRA weights and landmark offset of an LMK folder this command wrote (same base)",
    )
    tr.add_argument(
        "--stop-at-step",
        type=int,
        default=None,
        help="stop at this step and save, keeping the learning-rate schedule of --steps (replays a time-boxed run)",
    )
    tr.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop after this much wall time and save what was trained (the output records the step reached)",
    )
    tr.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps (default cpu)")
    tr.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 autocast: faster on GPUs and on CPUs with AVX512-BF16/AMX (weights stay fp32)",
    )
    tr.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _quantization_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quantization",
        choices=("int8", "binary"),
        default=None,
        help="new Qdrant indexes: landmark vectors quantized in RAM, originals on disk for rescoring",
    )


def _index_options(p: argparse.ArgumentParser) -> None:
    from .index.uri import URI_HELP

    p.add_argument("--index", default="qdrant:./lmk_index", help=URI_HELP + " (default qdrant:./lmk_index)")
    add_encoder_options(p)


def _open(args: argparse.Namespace, must_exist: bool) -> Any:
    """Open the index with the encoder it records (options given on the command line override)."""
    from .encoder import LMKEncoder
    from .index.uri import open_index, parse_index_uri, read_fingerprint

    uri = parse_index_uri(args.index)
    stored = read_fingerprint(uri)
    if stored is None and must_exist:
        raise IndexNotFoundError(
            f"no lmk-rag index at {redact_uri(args.index)}; build one with: lmk-rag ingest PATH --index "
            f"{redact_uri(args.index)}"
        )
    settings = stored.encoder_settings() if stored is not None else {}
    given = encoder_options(args)
    settings.update(given)
    logger.info(
        "index %s: %s; encoder settings from %s",
        redact_uri(args.index),
        "existing" if stored is not None else "new",
        "the index" + (" and the command line" if given else "") if stored is not None else "the command line",
    )
    index = open_index(uri, LMKEncoder(**settings), quantization=getattr(args, "quantization", None))
    logger.info("opened %s (%d documents)", type(index).__name__, len(index))
    return index


def run_ingest(args: argparse.Namespace) -> int:
    from .ingest import ingest

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        raise PathNotFoundError(f"no such file or folder: {', '.join(missing)}")
    ray_options = {
        "address": args.ray_address,
        "actors": args.actors,
        "gpus_per_actor": args.gpus_per_actor,
        "cpus_per_actor": args.cpus_per_actor,
    }
    given = [f"--{k.replace('_', '-')}" for k, v in ray_options.items() if v is not None]
    if given and not args.ray:
        raise InvalidInputError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to --ray; add --ray")
    index = _open(args, must_exist=False)
    started_ray = False
    verified = None
    try:
        if args.verify:
            from .index.verify import verify_index

            index, verified = verify_index(index)
        common = {
            "prune": args.prune,
            "batch_docs": args.batch_docs,
            "show_progress": not args.no_progress,
            "follow_symlinks": args.follow_symlinks,
        }
        if args.ray:
            from .ingest.ray import connect, ingest_with_ray

            started_ray = connect(args.ray_address)
            options = {k: v for k, v in ray_options.items() if v is not None and k != "address"}
            summary = ingest_with_ray(index, args.paths, **options, **common)
        else:
            summary = ingest(index, args.paths, **common)
        total = len(index)
    finally:
        index.close()
        if started_ray:
            import ray

            ray.shutdown()
    if args.json:
        import json

        checked = {} if verified is None else {"verify": dataclasses.asdict(verified)}
        print(
            json.dumps({"index": redact_uri(args.index), "documents": total, **summary.to_dict(), **checked}, indent=2)
        )
    else:
        if verified is not None:
            print(verified.line())
        for line in summary.lines():
            print(line)
        print(f"{total} documents in {redact_uri(args.index)}")
    return 1 if summary.failed or (verified is not None and verified.unreadable) else 0


_CONTEXT_CHARS = 160


def shown_id(doc_id: str) -> str:
    """A document id as printed: a file's path relative to the working folder when it lies inside
    it (ids are absolute paths; ``--json`` prints them whole)."""
    if not doc_id.startswith("/"):
        return doc_id
    try:
        return Path(doc_id).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return doc_id


def _highlight(hit: Any, tty: bool) -> str:
    """The matched span marked inside up to ``_CONTEXT_CHARS`` of its paragraph on each side, on one
    line: hard-wrapped text keeps its context (only a blank line ends it), cut at whole words."""
    text, (a, b) = hit.text, hit.span
    core = text[a:b]
    if core.strip():  # whitespace at the span's edges is context, so the marks hug the words
        a, b = a + len(core) - len(core.lstrip()), b - (len(core) - len(core.rstrip()))
    lo, hi = max(0, a - _CONTEXT_CHARS), min(len(text), b + _CONTEXT_CHARS)
    before, after = text[lo:a].split("\n\n")[-1], text[b:hi].split("\n\n")[0]
    cut_before = lo > 0 and len(before) == a - lo  # neither the text's nor the paragraph's start
    cut_after = hi < len(text) and len(after) == hi - b
    if cut_before and not text[lo - 1].isspace():
        before = re.sub(r"^\S+", "", before)  # no half word
    if cut_after and not text[hi].isspace():
        after = re.sub(r"\S+$", "", after)
    mark = ("\033[1m", "\033[0m") if tty else ("[[", "]]")
    line = " ".join(f"{before}{mark[0]}{text[a:b]}{mark[1]}{after}".split())
    return f"{'...' if cut_before else ''}{line}{'...' if cut_after else ''}"


def run_search(args: argparse.Namespace) -> int:
    import json

    if args.context is not None:
        return run_context(args)
    index = _open(args, must_exist=True)
    try:
        k = 5 if args.k is None else args.k
        hits = index.search(
            args.query, k=k, filter=args.filter, mode=args.mode, neighbours=args.neighbours, passage=args.passage
        )
    finally:
        index.close()
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": h.id,
                        "score": h.score,
                        "landmark": h.landmark,
                        "span": list(h.span),
                        "passage": h.passage,
                        "metadata": h.metadata,
                    }
                    for h in hits
                ],
                indent=2,
            )
        )
        return 0
    tty = sys.stdout.isatty()
    for rank, hit in enumerate(hits, 1):
        print(f"{rank}. {shown_id(hit.id)}  score {hit.score:.3f}  chars {hit.span[0]}-{hit.span[1]}")
        print("   " + _highlight(hit, tty))
    if not hits:
        print("no results")
    return 0


def run_context(args: argparse.Namespace) -> int:
    """``search --context TOKENS``: the passages an LLM should read, best first, within the budget."""
    import json

    from .context import check_max_tokens

    check_max_tokens(args.context)  # before the model loads
    index = _open(args, must_exist=True)
    try:
        passages = index.context(args.query, args.context, k=args.k, where=args.filter, mode=args.mode)
    finally:
        index.close()
    if args.json:
        print(json.dumps([dataclasses.asdict(p) for p in passages], indent=2))
        return 0
    total = sum(p.tokens for p in passages)
    print(f"context for {args.query!r}: {len(passages)} passages, {total} of {args.context} tokens")
    for rank, p in enumerate(passages, 1):
        print(f"\n[{rank}] {shown_id(p.id)}  chars {p.span[0]}-{p.span[1]}  {p.tokens} tokens  score {p.score:.2f}")
        print(p.text.strip())
    if not passages:
        print("no results")
    return 0


def run_copy(args: argparse.Namespace) -> int:
    from .index import copy_index
    from .index.uri import open_index, parse_index_uri, read_fingerprint

    if args.batch < 1:
        raise InvalidInputError(f"--batch must be a positive number, got {args.batch}")
    source_uri, dest_uri = parse_index_uri(args.source), parse_index_uri(args.dest)
    if _same_store(source_uri, dest_uri):
        raise InvalidInputError(
            f"SOURCE and DEST are the same index ({redact_uri(args.source)}); copy into another folder or server"
        )
    stored = read_fingerprint(source_uri)
    if stored is None:
        raise IndexNotFoundError(f"no lmk-rag index at {args.source}")
    from .encoder import LMKEncoder

    # The source's own encoder settings: the destination records them; nothing is re-encoded.
    source = open_index(source_uri, LMKEncoder(**stored.encoder_settings(), device="cpu"))
    try:
        dest = open_index(dest_uri, source.encoder, quantization=args.quantization)
        try:
            copied = copy_index(source, dest, batch_size=args.batch, show_progress=not args.no_progress)
            total = len(dest)
        finally:
            dest.close()
    finally:
        source.close()
    print(f"copied {copied} documents from {args.source} to {args.dest} ({total} documents there)")
    return 0


def _same_store(a: Any, b: Any) -> bool:
    """Two URIs that name one store (the same folder, however written, or the same server)."""
    if a.path is not None and b.path is not None:
        return a.backend.split("-")[0] == b.backend.split("-")[0] and Path(a.path).resolve() == Path(b.path).resolve()
    return (
        a.path is None and b.path is None and (a.backend, a.url, a.host, a.port) == (b.backend, b.url, b.host, b.port)
    )


def run_info(args: argparse.Namespace) -> int:
    import json

    index = _open(args, must_exist=True)
    try:
        data = {
            "index": redact_uri(args.index),
            "documents": len(index),
            "fingerprint": index.encoder.fingerprint.to_dict(),
        }
        if hasattr(index, "landmarks") and hasattr(index.landmarks, "count"):
            data["landmark_rows"] = index.landmarks.count()
    finally:
        index.close()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(f"index: {data['index']}\ndocuments: {data['documents']}")
        for key, value in data["fingerprint"].items():
            print(f"{key}: {value}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from .encoder import LMKEncoder

    model = None if args.source == "default" else args.source
    encoder = LMKEncoder(model, device="cpu", **encoder_options(args))
    folder = encoder.save(args.output, format=args.format, overwrite=args.overwrite)
    settings = f"pooling={encoder.pooling}, k={encoder.granularity}"
    print(f"wrote {args.format} folder {folder} ({encoder.model_name}, {settings})")
    return 0


def run_train(args: argparse.Namespace) -> int:
    from .models import DEFAULT_MODEL
    from .train import TrainConfig, train

    config = TrainConfig(
        output=args.output,
        base_model=args.base_model or DEFAULT_MODEL,
        pairs=args.pairs,
        texts=args.texts,
        sections=args.sections,
        domains=args.domains,
        docs_root=args.docs_root,
        max_pages_per_domain=args.max_pages_per_domain,
        granularities=args.granularities,
        steps=args.steps,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        lr_decay=args.lr_decay,
        temperature=args.temperature,
        contrastive_weight=args.contrastive_weight,
        maxsim_weight=args.maxsim_weight,
        distill_weight=args.distill_weight,
        distill_only_steps=args.distill_only_steps,
        distill_batch_size=args.distill_batch_size,
        distill_queries=args.distill_queries,
        score_distill_weight=args.score_distill_weight,
        landmark_weight=args.landmark_weight,
        landmark_weights=args.landmark_weights,
        full_finetune=args.full_finetune,
        window_min_tokens=args.window_min_tokens,
        window_max_tokens=args.window_max_tokens,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
        max_seconds=args.max_seconds,
        stop_at_step=args.stop_at_step,
        init_from=args.init_from,
        device=args.device,
        bf16=args.bf16,
        show_progress=not args.no_progress,
    )
    out = train(config)
    print(f"wrote {out}; load it with LMKEncoder(model={str(out)!r})")
    return 0


def run_merge(args: argparse.Namespace) -> int:
    from .train.merge import merge_lmk_folders

    out = merge_lmk_folders(
        args.models, args.weights, args.output, base_weight=args.base_weight, overwrite=args.overwrite
    )
    print(f"wrote {out}; load it with LMKEncoder(model={str(out)!r})")
    return 0


def run_eval(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .corpora.domains import domains_of
    from .corpora.rst import read_rst_pages
    from .encoder import LMKEncoder
    from .eval import beir_task, default_haystack, evaluate, needle_tasks, parse_methods, read_folder, write_report
    from .eval.domains import domain_tasks, export_beir
    from .eval.sections import section_task, short_section_task
    from .eval.significance import PairedComparison, compare_to_baseline

    kwargs = encoder_options(args)
    methods = parse_methods(args.methods, passage=args.passage, **kwargs) if args.methods != "none" else []
    counter = LMKEncoder(**kwargs)
    tasks = []
    pages = None
    for spec in args.task or ["passkey"]:
        if spec.startswith("beir:"):
            tasks.append(beir_task(spec[5:], split=args.beir_split))
        elif spec in ("sections", "sections-short"):
            pages = pages if pages is not None else read_rst_pages(args.docs_folder, split="eval")  # parse once
            count = lambda xs: counter.tokenize(xs).n_tokens
            tasks.append(
                section_task(pages, count, seed=args.seed) if spec == "sections" else short_section_task(pages, count)
            )
        elif spec.startswith(("domains:", "domains-short:")):
            kind, _, which = spec.partition(":")
            count = lambda xs: counter.tokenize(xs).n_tokens
            tasks += domain_tasks(
                domains_of(which), count, root=args.docs_root, short=kind == "domains-short", seed=args.seed
            )
        elif spec in ("passkey", "needle"):
            haystack = default_haystack("eval") if args.haystack == "python-docs" else read_folder(args.haystack)
            tasks += needle_tasks(
                haystack,
                lambda xs: counter.tokenize(xs).n_tokens,
                lengths=args.lengths,
                positions=args.positions,
                docs_per_length=args.docs_per_length,
                kind=spec,
                seed=args.seed,
            )
        else:
            raise InvalidInputError(
                f"unknown task {spec!r}; use passkey, needle, sections, sections-short, domains:SPLIT, "
                "domains-short:SPLIT or beir:FOLDER"
            )
    if args.export_beir:
        for task in tasks:
            print(f"wrote {export_beir(task, Path(args.export_beir) / task.name)}")
    budgets = args.context_tokens or []
    if any(b < 1 for b in budgets):
        raise InvalidInputError(f"--context-tokens must be positive token budgets, got {budgets}")
    if not methods and not budgets:
        return 0
    rows = evaluate(tasks, methods, progress=not args.no_progress) if methods else []
    if budgets:
        from .eval.contexts import context_rows

        chunk_encoder = LMKEncoder(args.context_chunk_model, pooling="mean", granularity=None)
        rows += context_rows(tasks, budgets, counter, chunk_encoder, progress=not args.no_progress)
    command = "lmk-rag " + " ".join(shlex.quote(a) for a in argv)
    comparisons: list[PairedComparison] = []
    wrong_baseline: InvalidInputError | None = None
    if args.baseline:
        try:
            comparisons = compare_to_baseline(rows, args.baseline, seed=args.seed)
        except InvalidInputError as e:
            wrong_baseline = e  # the evaluation is not thrown away: the report is written, then the error
    paths = write_report(
        rows, args.out, title=args.title, command=command, settings=vars(args), comparisons=comparisons
    )
    print(paths["markdown"].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if wrong_baseline is not None:
        raise InvalidInputError(f"--baseline: {wrong_baseline} (the report above was written without the comparison)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    # -v: lmk-rag's own steps at INFO; other libraries stay at WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.verbose:
        logger.setLevel(logging.INFO)
    try:
        if args.command == "eval":
            return run_eval(args, argv)
        if args.command == "train":
            return run_train(args)
        if args.command == "ingest":
            return run_ingest(args)
        if args.command == "search":
            return run_search(args)
        if args.command == "info":
            return run_info(args)
        if args.command == "copy":
            return run_copy(args)
        if args.command == "export":
            return run_export(args)
        if args.command == "merge":
            return run_merge(args)
    except KeyboardInterrupt:
        print(f"lmk-rag {args.command}: interrupted; run it again to resume", file=sys.stderr)
        return 130
    except LMKError as exc:
        # Something the user can change: one line, unless -v asks for the whole story.
        if args.verbose:
            traceback.print_exc()
        print(f"lmk-rag {args.command}: error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
