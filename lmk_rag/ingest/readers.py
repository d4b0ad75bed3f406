"""Reading files as text: plain text in any common encoding (a byte-order mark is honoured, UTF-8
otherwise), HTML without its markup, PDF through pypdf; binary and undecodable files are refused
with the reason."""

from __future__ import annotations

import codecs
import html.parser
from pathlib import Path

from ..errors import InvalidInputError

TEXT_SUFFIXES = {
    ".txt",
    ".md",
    ".markdown",
    ".rst",
    ".adoc",
    ".tex",
    ".csv",
    ".tsv",
    ".json",
    ".jsonl",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".xml",
    ".py",
    ".pyi",
    ".js",
    ".jsx",
    ".ts",
    ".tsx",
    ".java",
    ".kt",
    ".scala",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".cs",
    ".go",
    ".rs",
    ".rb",
    ".php",
    ".swift",
    ".m",
    ".r",
    ".jl",
    ".lua",
    ".sh",
    ".bash",
    ".zsh",
    ".sql",
    ".css",
    ".scss",
    ".html",
    ".htm",
}
HTML_SUFFIXES = {".html", ".htm"}


class _HTMLText(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        if tag in ("p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    """The text of an HTML page: scripts and styles dropped, block elements on their own lines."""
    parser = _HTMLText()
    parser.feed(markup)
    return "".join(parser.parts)


# Byte-order marks, longest first (the UTF-32 LE mark begins with the UTF-16 LE one).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(raw: bytes) -> str:
    """UTF-8, or UTF-16/32 and UTF-8 with a byte-order mark; ValueError for binary or other encodings."""
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom)), None)
    if encoding is None:
        if b"\x00" in raw[:8192]:
            raise InvalidInputError("binary file")
        encoding = "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"not {encoding.upper().replace('-SIG', '')} (byte {exc.start})") from exc
    if "\x00" in text[:8192]:
        raise InvalidInputError("binary file")
    return text


def read_document(path: Path) -> tuple[str, bytes]:
    """(text, raw bytes); ValueError with a reason for binary, undecodable or unreadable files."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"unreadable: {exc.strerror or exc}") from exc
    if path.suffix.lower() == ".pdf":
        return _pdf_text(path), raw
    text = decode_text(raw)
    if path.suffix.lower() in HTML_SUFFIXES:
        text = html_to_text(text)
    return text, raw


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise InvalidInputError("PDF needs the optional extra: pip install 'lmk-rag[pdf]'") from exc
    try:
        return "\n\n".join(page.extract_text() or "" for page in PdfReader(str(path)).pages)
    except Exception as exc:
        raise InvalidInputError(f"unreadable PDF: {exc}") from exc
