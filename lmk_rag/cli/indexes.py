"""``lmk-rag copy`` and ``lmk-rag info``: move an index between stores without re-encoding, and
show what an index records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..encoding.inputs import check_int
from ..errors import IndexNotFoundError, InvalidInputError
from ..index.redact import redact_uri
from .options import Command, add_index_options, add_quantization_option, open_index_of

EXAMPLE_COPY = """examples:
  lmk-rag copy qdrant:./lmk_index qdrant+http://localhost:6333"""
EXAMPLE_INFO = """examples:
  lmk-rag info --index qdrant:./lmk_index --json"""


def add_parser(command: Command) -> None:
    """The ``copy`` and ``info`` commands and their options."""
    cp = command(
        "copy",
        run_copy,
        EXAMPLE_COPY,
        help="copy an index into another store without re-encoding (embedded -> server, Chroma -> Qdrant)",
        description="Copy every document (text, metadata, spans, vectors) of SOURCE into DEST, e.g. "
        "qdrant:./lmk_index -> qdrant+http://host:6333, or chroma:./db -> qdrant:./lmk_index. Ids are kept: run "
        "it again to finish a copy that stopped.",
    )
    from ..index.uri import URI_HELP

    cp.add_argument("source", metavar="SOURCE", help=URI_HELP)
    cp.add_argument("dest", metavar="DEST", help=URI_HELP)
    cp.add_argument("--batch", type=int, default=256, help="documents read and written together")
    add_quantization_option(cp)
    cp.add_argument("--no-progress", action="store_true", help="no progress bar")

    info = command("info", run_info, EXAMPLE_INFO, help="the index's encoder fingerprint and counts")
    add_index_options(info, runtime_only=True)
    info.add_argument("--json", action="store_true", help="machine-readable output")


def run_copy(args: argparse.Namespace) -> int:
    """``lmk-rag copy SOURCE DEST``: every document with its vectors, nothing re-encoded; the
    destination records the source's encoder."""
    from ..index import copy_index
    from ..index.uri import open_index, parse_index_uri, read_fingerprint

    check_int("--batch", args.batch)
    source_uri, dest_uri = parse_index_uri(args.source), parse_index_uri(args.dest)
    if _same_store(source_uri, dest_uri):
        raise InvalidInputError(
            f"SOURCE and DEST are the same index ({redact_uri(args.source)}); copy into another folder or server"
        )
    stored = read_fingerprint(source_uri)
    if stored is None:
        raise IndexNotFoundError(f"no lmk-rag index at {redact_uri(args.source)}")
    from ..encoder import LMKEncoder

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
    print(
        f"copied {copied} documents from {redact_uri(args.source)} to {redact_uri(args.dest)} ({total} documents there)"
    )
    return 0


def _same_store(a: Any, b: Any) -> bool:
    """Two URIs that name one store (the same folder, however written, or the same server)."""
    if a.path is not None and b.path is not None:
        return a.backend.split("-")[0] == b.backend.split("-")[0] and Path(a.path).resolve() == Path(b.path).resolve()
    return (
        a.path is None and b.path is None and (a.backend, a.url, a.host, a.port) == (b.backend, b.url, b.host, b.port)
    )


def run_info(args: argparse.Namespace) -> int:
    """``lmk-rag info``: the index's documents, landmark rows and encoder fingerprint."""
    import json

    index = open_index_of(args, must_exist=True)
    try:
        fingerprint = index.encoder.fingerprint.to_dict()
        data: dict[str, object] = {
            "index": redact_uri(args.index),
            "documents": len(index),
            "fingerprint": fingerprint,
        }
        store = getattr(index, "store", None)  # Qdrant: the landmark index beside the documents
        if store is not None and hasattr(store, "landmark_count"):
            data["landmark_rows"] = store.landmark_count()
    finally:
        index.close()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(f"index: {data['index']}\ndocuments: {data['documents']}")
        for key, value in fingerprint.items():
            print(f"{key}: {value}")
    return 0
