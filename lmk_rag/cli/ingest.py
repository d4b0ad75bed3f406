"""``lmk-rag ingest``: read files into an index (resumable, idempotent; locally or on Ray)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ..errors import InvalidInputError, PathNotFoundError
from ..index.redact import redact_uri
from ..ingest.discovery import DEFAULT_MAX_FILE_MB, check_globs, check_max_file_mb, sample_folder
from .options import Command, add_index_options, add_quantization_option, open_index_of

EXAMPLE_INGEST = """examples:
  lmk-rag ingest --sample --index qdrant:./lmk_index       # the demo corpus that ships (Markdown, HTML, PDF)
  lmk-rag ingest docs/ --index qdrant:./lmk_index          # embedded Qdrant, packaged model
  lmk-rag ingest docs/ notes.md --index chroma:./chroma_db --json
  lmk-rag ingest docs/ --index qdrant+http://localhost:6333 --prune   # a server; drop deleted files
  lmk-rag ingest docs/ --include '*.md' --exclude 'build/**'   # gitignore-style globs below each folder
  lmk-rag ingest docs/ --verify   # first re-encode stored documents whose vectors are damaged

Every file under a folder is added, skipped (unchanged), ignored (hidden, not text, outside the
globs, too large; with the reason) or failed (with the reason). Exit status: 0 when none failed,
1 when some failed (the others are ingested), 2 for something to change before anything runs."""


def add_parser(command: Command) -> None:
    """The ``ingest`` command and its options."""
    ing = command(
        "ingest", run_ingest, EXAMPLE_INGEST, help="read files into a Qdrant or Chroma index (resumable, idempotent)"
    )
    ing.add_argument("paths", nargs="*", help="files or folders (text of any encoding, HTML, PDF, .gz of these)")
    ing.add_argument("--sample", action="store_true", help="also ingest the demo corpus that ships with lmk-rag")
    ing.add_argument(
        "--include",
        action="append",
        default=None,
        metavar="GLOB",
        help="read only files matching this gitignore-style glob below each folder (repeatable), e.g. '*.md'",
    )
    ing.add_argument(
        "--exclude",
        action="append",
        default=None,
        metavar="GLOB",
        help="pass over files and folders matching this glob (repeatable), e.g. 'build/**'",
    )
    add_index_options(ing)
    add_quantization_option(ing)
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
    ing.add_argument(
        "--max-file-mb",
        type=float,
        default=DEFAULT_MAX_FILE_MB,
        help=f"pass over files larger than this, with a message (default {DEFAULT_MAX_FILE_MB:g}; 0: no limit)",
    )
    ing.add_argument("--batch-docs", type=int, default=16, help="documents encoded and written together")
    ing.add_argument("--no-progress", action="store_true", help="no progress bars")
    ing.add_argument("--json", action="store_true", help="print the summary as JSON (counts, failed and ignored files)")
    ray = ing.add_argument_group("Ray (pip install 'lmk-rag[ray]')", "encode on a Ray cluster: see docs/guides/ray.md")
    ray.add_argument("--ray", action="store_true", help="read and encode in a Ray Data actor pool")
    ray.add_argument(
        "--ray-address",
        default=None,
        help="cluster to join: auto, ray://HOST:10001 or HOST:6379 (default: a local Ray on this machine)",
    )
    ray.add_argument("--actors", type=int, default=None, help="encoders in the pool, one model each (default 2)")
    ray.add_argument("--gpus-per-actor", type=float, default=None, help="GPUs per encoder (default 0: CPU)")
    ray.add_argument("--cpus-per-actor", type=float, default=None, help="CPUs (torch threads) per encoder (default 1)")


def run_ingest(args: argparse.Namespace) -> int:
    """``lmk-rag ingest PATHS``: read, encode and store files (here or on Ray), optionally verifying
    and pruning first; exit 1 when a file failed."""
    from ..ingest import ingest

    if args.sample:
        args.paths = [*args.paths, str(sample_folder())]
    if not args.paths:
        raise InvalidInputError("give the files or folders to ingest (or --sample for the demo corpus)")
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
    check_max_file_mb(args.max_file_mb)  # before the index is opened or anything encoded
    check_globs(args.include, "include")
    check_globs(args.exclude, "exclude")
    index = open_index_of(args, must_exist=False)
    started_ray = False
    verified = None
    try:
        if args.verify:
            from ..index.verify import verify_index

            index, verified = verify_index(index)
        common = {
            "prune": args.prune,
            "batch_docs": args.batch_docs,
            "show_progress": not args.no_progress,
            "follow_symlinks": args.follow_symlinks,
            "max_file_mb": args.max_file_mb,
            "include": args.include,
            "exclude": args.exclude,
        }
        if args.ray:
            from ..ingest.ray import RayExecutor, connect

            started_ray = connect(args.ray_address)
            options = {k: v for k, v in ray_options.items() if v is not None and k != "address"}
            summary = ingest(index, args.paths, executor=RayExecutor(**options), **common)
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
