"""``lmk-rag serve``: run the HTTP server (:mod:`lmk_rag.serve`) under uvicorn."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import InvalidInputError, MissingDependencyError
from ..index.redact import redact_uri
from ..serve.settings import ServeSettings
from .options import Command, add_encoder_options, encoder_options, open_index_of

EXAMPLE_SERVE = """examples:
  lmk-rag serve                                   # embeddings only: /v1/embeddings, /embed, /embed_landmarks
  lmk-rag serve --index qdrant:./lmk_index        # + /search, /context, /documents
  LMK_RAG_API_KEY=secret lmk-rag serve --index qdrant:./lmk_index --host 0.0.0.0 --port 8080
then:
  curl -s localhost:8080/v1/embeddings -H 'Content-Type: application/json' -d '{"input": "hello"}'"""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parser(command: Command) -> None:
    """The ``serve`` command and its options."""
    se = command(
        "serve",
        run_serve,
        EXAMPLE_SERVE,
        help="an HTTP server: OpenAI/TEI-style embeddings, landmarks with spans, search and contexts",
        description="Serve the encoder (and, with --index, the index) over HTTP. Routes: /v1/embeddings and "
        "/v1/models (OpenAI), /embed (TEI), /embed_landmarks, /search, /context, /documents, /health, /info, "
        "/metrics; the OpenAPI schema at /openapi.json, pages at /docs. Needs: pip install 'lmk-rag[serve]'.",
    )
    se.add_argument("--index", default=None, help="an index URI to serve (search, context, documents); default none")
    se.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    se.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    se.add_argument(
        "--no-warm",
        dest="warm",
        action="store_false",
        help="do not read an embedded index into the page cache at start (by default it is, in the background, "
        "at most half the memory available, so that the first searches do not wait on disk)",
    )
    se.add_argument(
        "--api-key",
        default=None,
        help="clients must send 'Authorization: Bearer KEY' (default: $LMK_RAG_API_KEY; none: no key)",
    )
    limits = se.add_argument_group(
        "limits (a request over one is refused with 413 or 429 and a JSON error; --max-batch-tokens, below, "
        "also bounds the queued requests joined into one batch)"
    )
    limits.add_argument("--max-inputs", type=int, default=2048, help="inputs or documents per request (2048)")
    limits.add_argument("--max-body-mb", type=float, default=8.0, help="request body size in MB (8)")
    limits.add_argument("--max-concurrent", type=int, default=512, help="requests in flight at once (512)")
    limits.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow browser calls from ORIGIN (repeat for several; default: CORS off)",
    )
    limits.add_argument(
        "--batch-wait-ms",
        type=float,
        default=ServeSettings.batch_wait_ms,
        help="under load, how long a batch waits for more requests so passes stay full (default %(default)s)",
    )
    limits.add_argument(
        "--shutdown-timeout", type=float, default=30.0, help="seconds in-flight requests get to finish on stop (30)"
    )
    add_encoder_options(se)


def settings_of(args: argparse.Namespace, max_batch_tokens: int) -> ServeSettings:
    """The :class:`~lmk_rag.serve.ServeSettings` the options ask for (``max_batch_tokens``: the encoder's)."""
    if not 0 < args.max_body_mb <= 1024:
        raise InvalidInputError(f"--max-body-mb must be in (0, 1024], got {args.max_body_mb}")
    if not 0 < args.port < 65536:
        raise InvalidInputError(f"--port must be in 1..65535, got {args.port}")
    api_key = args.api_key or os.environ.get("LMK_RAG_API_KEY") or None
    return ServeSettings(
        max_batch_tokens=max_batch_tokens,
        max_inputs=args.max_inputs,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_concurrent=args.max_concurrent,
        api_key=api_key,
        cors_origins=tuple(args.cors_origin),
        shutdown_timeout=args.shutdown_timeout,
        batch_wait_ms=args.batch_wait_ms,
    )


def run_serve(args: argparse.Namespace) -> int:
    """``lmk-rag serve``: build the app, then serve until SIGINT / SIGTERM (in-flight requests finish)."""
    try:
        import uvicorn

        from ..serve.app import create_app
    except ImportError as exc:
        raise MissingDependencyError(f"lmk-rag serve needs {exc.name}: pip install 'lmk-rag[serve]'") from exc
    from ..encoder import LMKEncoder

    settings = settings_of(args, args.max_batch_tokens or ServeSettings.max_batch_tokens)
    if settings.api_key is None and args.host not in LOOPBACK:
        print(
            f"lmk-rag serve: warning: listening on {args.host} without an API key; anyone who can reach it can "
            "read and change the index (set --api-key or LMK_RAG_API_KEY)",
            file=sys.stderr,
        )
    index = open_index_of(args, must_exist=False) if args.index else None
    encoder = index.encoder if index is not None else LMKEncoder(**encoder_options(args))
    app = create_app(encoder, index, settings, index_name=redact_uri(args.index) if args.index else None)
    # The first searches of a fresh server would otherwise wait on disk for the index's mapped files.
    warming = index.warm() if index is not None and args.warm else 0
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"lmk-rag serve: http://{shown}:{args.port} (model {encoder.model_name}"
        + (f", index {redact_uri(args.index)}" if args.index else ", no index")
        + (f", reading {warming / 1e6:,.1f} MB of it ahead" if warming else "")
        + "); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="info" if args.verbose else "warning",
        access_log=bool(args.verbose),
        timeout_graceful_shutdown=int(settings.shutdown_timeout) or None,
    )
    return 0
