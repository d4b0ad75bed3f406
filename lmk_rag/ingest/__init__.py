"""Files -> documents -> index: readers (``readers``: ``text``, ``html``, ``pdf``), discovery and
document ids (``discovery``), the idempotent, resumable pipeline (``pipeline``) and its Ray
executor (``ray``)."""

from .discovery import DEFAULT_MAX_FILE_MB, Discovery, discover, document_id
from .html import HTMLText, html_main_text
from .pdf import PDFText, pdf_text
from .pipeline import IngestSummary, ReadFile, ingest, prune_vanished, read_for_ingest
from .readers import BINARY_SUFFIXES, HTML_SUFFIXES, TEXT_SUFFIXES, NotText, ReadText, read_document
from .text import DecodedText, decode_text

__all__ = [
    "BINARY_SUFFIXES",
    "DEFAULT_MAX_FILE_MB",
    "HTML_SUFFIXES",
    "TEXT_SUFFIXES",
    "DecodedText",
    "Discovery",
    "HTMLText",
    "IngestSummary",
    "NotText",
    "PDFText",
    "ReadFile",
    "ReadText",
    "decode_text",
    "discover",
    "document_id",
    "html_main_text",
    "ingest",
    "pdf_text",
    "prune_vanished",
    "read_document",
    "read_for_ingest",
]
