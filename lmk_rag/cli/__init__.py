"""``lmk-rag`` command line: :func:`main` dispatches to one module per command group
(:mod:`.ingest`, :mod:`.search`, :mod:`.indexes`, :mod:`.models`, :mod:`.evaluate`), sharing
:mod:`.options`."""

from ..index.redact import redact_uri
from .main import build_parser, main

__all__ = ["build_parser", "main", "redact_uri"]
