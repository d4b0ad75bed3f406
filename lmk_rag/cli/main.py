"""``lmk-rag``: the parser (one module per command group adds its commands) and the dispatch, which
turns an :class:`~lmk_rag.errors.LMKError` into one line and exit status 2."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from ..errors import LMKError
from ..index.redact import redact_uri
from . import evaluate, indexes, ingest, models, search, serve
from .options import Handler, package_version

#: The command groups, in the order ``lmk-rag -h`` lists their commands.
GROUPS = (evaluate, ingest, search, indexes, models, serve)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``lmk-rag`` parser; each parsed command carries its handler as ``args.run``."""
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

    # -v after the command too (``lmk-rag search q -v``); SUPPRESS keeps one given before it.
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="as lmk-rag -v")

    def command(name: str, run: Handler, example: str, **kwargs: Any) -> argparse.ArgumentParser:
        sub = subparsers.add_parser(
            name,
            epilog=example,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[verbose],
            **kwargs,
        )
        sub.set_defaults(run=run)
        return sub

    for group in GROUPS:
        group.add_parser(command)
    return parser


class _RedactingFormatter(logging.Formatter):
    """Log lines with every URI's credentials removed (:func:`~lmk_rag.index.uri.redact_uri`)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_uri(super().format(record))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lmk-rag ARGV``; the exit status: 0 done, 1 a file failed, 2 something to change, 130 interrupted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    # -v: lmk-rag's own steps at INFO; other libraries stay at WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # no credential reaches a log line either
        handler.setFormatter(_RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
    if args.verbose:  # every lmk_rag.* module logs through the package's logger
        logging.getLogger("lmk_rag").setLevel(logging.INFO)
    if not sys.stderr.isatty():  # progress bars' cursor escapes do not belong in a log file
        for name, off in (("no_progress", True), ("show_progress", False)):
            if hasattr(args, name):
                setattr(args, name, off)
    try:
        args.argv = [redact_uri(a) for a in argv]  # eval records the command line in its report
        status: int = args.run(args)
        sys.stdout.flush()  # inside the try: a reader that left is met here, not at exit
        return status
    except BrokenPipeError:  # the reader left (``lmk-rag info | head -3``): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print(f"lmk-rag {args.command}: interrupted; run it again to resume", file=sys.stderr)
        return 130
    except LMKError as exc:
        # Something the user can change: one line, unless -v asks for the whole story.
        if args.verbose:
            print(redact_uri(traceback.format_exc()), file=sys.stderr, end="")
        print(redact_uri(f"lmk-rag {args.command}: error: {exc}"), file=sys.stderr)
        return 2
