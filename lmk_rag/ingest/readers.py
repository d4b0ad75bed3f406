"""Files -> text and reader metadata: plain text in any encoding (recorded), HTML's main text and
title, PDF text with its page map, gzip-compressed files of any of these; files whose suffix says
nothing are recognised by their content. Binary files are told apart with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidInputError
from ..types import PAGE_MAP_KEY
from .html import html_main_text
from .pdf import pdf_text
from .text import GZIP_MAGIC, decode_text, gunzip, is_text

#: Suffixes read as plain text without looking at the content first.
TEXT_SUFFIXES = frozenset(
    {".txt", ".text", ".md", ".markdown", ".rst", ".adoc", ".asciidoc", ".org", ".tex", ".texi", ".texinfo"}
    | {".pod", ".man", ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".xml"}
    | {".py", ".pyi", ".js", ".jsx", ".ts", ".tsx", ".java", ".kt", ".scala", ".c", ".h", ".cc", ".cpp", ".hpp"}
    | {".cs", ".go", ".rs", ".rb", ".php", ".swift", ".m", ".r", ".jl", ".lua", ".sh", ".bash", ".zsh", ".sql"}
    | {".css", ".scss", ".el", ".vim", ".diff", ".patch", ".log"}
)
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
PDF_SUFFIXES = frozenset({".pdf"})
#: Suffixes of formats that hold no text lmk-rag reads: listed as ignored without being opened.
BINARY_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".ico", ".webp", ".svgz", ".psd", ".xcf"}  # images
    | {".mp3", ".ogg", ".oga", ".flac", ".wav", ".mp4", ".mkv", ".avi", ".mov", ".webm"}  # sound, video
    | {".zip", ".tar", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".deb", ".rpm", ".jar", ".whl", ".egg"}  # archives
    | {".so", ".o", ".a", ".dll", ".dylib", ".exe", ".bin", ".pyc", ".pyo", ".class"}  # programs
    | {".woff", ".woff2", ".ttf", ".otf", ".eot", ".db", ".sqlite", ".sqlite3", ".mo", ".gmo"}  # fonts, databases
    | {".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".epub", ".dvi", ".ps", ".eps"}
    | {".parquet", ".arrow", ".npy", ".npz", ".pt", ".pth", ".safetensors", ".onnx", ".pkl"}  # data, models
)
_SNIFF_BYTES = 8192


class NotText(InvalidInputError):
    """A file that holds no text to read (an image, an archive, other binary content): listed as
    ignored with the reason, not as failed."""


@dataclass(frozen=True)
class ReadText:
    """What a reader made of a file: its text, its bytes as stored (their SHA-256 tells whether it
    changed) and metadata the reader learnt (encoding, title, page map, compression)."""

    text: str
    raw: bytes
    metadata: dict[str, str | int] = field(default_factory=dict)


def binary_suffix(path: Path) -> str | None:
    """The suffix when ``path``'s name marks a binary format (``.png``), else None."""
    suffix = path.suffix.lower()
    return suffix if suffix in BINARY_SUFFIXES else None


def read_document(path: Path, max_bytes: int | None = None) -> ReadText:
    """Read ``path`` (see the module docstring). Raises NotText for binary content in a file whose
    suffix did not promise text, InvalidInputError with the reason for a file that should hold
    text and does not (or cannot be read), OSError as the system raises it."""
    raw = path.read_bytes()
    name, data, metadata = path.name, raw, dict[str, str | int]()
    if path.suffix.lower() == ".gz" or raw.startswith(GZIP_MAGIC):
        data = gunzip(raw, max_bytes)
        name = name[:-3] if name.lower().endswith(".gz") else name
        metadata["compression"] = "gzip"
    text, found = _read(Path(name), data)
    return ReadText(text, raw, {**metadata, **found})


def _read(name: Path, data: bytes) -> tuple[str, dict[str, str | int]]:
    suffix = name.suffix.lower()
    head = data[:_SNIFF_BYTES]
    if suffix in PDF_SUFFIXES or head.startswith(b"%PDF-"):
        pdf = pdf_text(data)
        meta: dict[str, str | int] = {PAGE_MAP_KEY: pdf.pages.to_metadata(), "total_pages": len(pdf.pages.starts)}
        return pdf.text, {**meta, **({"title": pdf.title} if pdf.title else {})}
    if suffix in HTML_SUFFIXES or (suffix not in TEXT_SUFFIXES and _looks_like_html(head)):
        decoded = decode_text(data, html=True)
        page = html_main_text(decoded.text)
        return page.text, {"encoding": decoded.encoding, **({"title": page.title} if page.title else {})}
    if suffix not in TEXT_SUFFIXES and not is_text(head):
        raise NotText("binary content (not text, HTML or PDF)")
    decoded = decode_text(data)
    return decoded.text, {"encoding": decoded.encoding}


def _looks_like_html(head: bytes) -> bool:
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return start.startswith((b"<!doctype html", b"<html"))
