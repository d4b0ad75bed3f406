"""Files -> documents -> index: readers (``readers``), discovery and document ids (``discovery``),
the idempotent, resumable pipeline (``pipeline``) and its Ray executor (``ray``)."""

from .discovery import DEFAULT_MAX_FILE_MB, Discovery, discover, document_id
from .pipeline import IngestSummary, ReadFile, adopt_legacy_ids, ingest, prune_vanished, read_for_ingest
from .readers import HTML_SUFFIXES, TEXT_SUFFIXES, decode_text, html_to_text, read_document

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "HTML_SUFFIXES",
    "TEXT_SUFFIXES",
    "Discovery",
    "IngestSummary",
    "ReadFile",
    "adopt_legacy_ids",
    "decode_text",
    "discover",
    "document_id",
    "html_to_text",
    "ingest",
    "prune_vanished",
    "read_document",
    "read_for_ingest",
]
