"""Files -> documents -> index: readers (``readers``: ``text``, ``html``, ``pdf``), discovery and
document ids (``discovery``), one ingest run (``driver``) and its executors: this process
(``pipeline``) or a Ray cluster (``ray``)."""

from .discovery import DEFAULT_MAX_FILE_MB, Discovery, discover, document_id
from .driver import Executor, RunOptions, ingest
from .html import HTMLText, html_main_text
from .pdf import PDFText, pdf_text
from .pipeline import IngestSummary, LocalExecutor, ReadFile, prune_vanished, read_for_ingest
from .readers import BINARY_SUFFIXES, HTML_SUFFIXES, TEXT_SUFFIXES, NotText, ReadText, read_document
from .text import DecodedText, decode_text

__all__ = [
    "BINARY_SUFFIXES",
    "DEFAULT_MAX_FILE_MB",
    "HTML_SUFFIXES",
    "TEXT_SUFFIXES",
    "DecodedText",
    "Discovery",
    "Executor",
    "HTMLText",
    "IngestSummary",
    "LocalExecutor",
    "NotText",
    "PDFText",
    "ReadFile",
    "ReadText",
    "RunOptions",
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
