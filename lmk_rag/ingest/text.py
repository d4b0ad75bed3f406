"""Bytes -> text: byte-order marks honoured, UTF-8 tried first, other encodings detected
(charset-normalizer) and named, binary content told apart from text, gzip opened."""

from __future__ import annotations

import codecs
import gzip
import io
import re
import zlib
from dataclasses import dataclass

from ..errors import InvalidInputError

# Byte-order marks, longest first (the UTF-32 LE mark begins with the UTF-16 LE one).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_SNIFF_BYTES = 8192
#: Control characters other than tab, newline, form feed and carriage return: text has next to none.
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")
# A declared charset in an HTML page's first bytes (<meta charset=...> or http-equiv content).
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.IGNORECASE)
#: The first bytes of every gzip file.
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class DecodedText:
    """A file's text and the encoding it was read in (recorded in the document's metadata)."""

    text: str
    encoding: str


def _looks_binary(text: str) -> bool:
    """True when more than 1% of the first characters are control characters (or any NUL)."""
    head = text[:_SNIFF_BYTES]
    return "\x00" in head or len(_CONTROL.findall(head)) > len(head) / 100


def _declared_charset(raw: bytes) -> str | None:
    match = _META_CHARSET.search(raw[:4096])
    if match is None:
        return None
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name
    except LookupError:
        return None


def _detected(raw: bytes) -> tuple[str, str] | None:
    """(text, encoding) as charset-normalizer reads ``raw``; None when no encoding gives text.
    Where Windows-1252 reads the bytes as well as the best guess it is chosen: short Western texts
    fit several single-byte code pages equally, and 1252 is the one such files are written in."""
    from charset_normalizer import from_bytes

    matches = from_bytes(raw)
    best = matches.best()
    if best is None:
        return None
    tied = [m for m in matches if m.chaos == best.chaos and m.coherence == best.coherence]
    if any("cp1252" in m.could_be_from_charset for m in tied):
        try:
            return raw.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            pass
    return str(best), best.encoding


def decode_text(raw: bytes, *, html: bool = False) -> DecodedText:
    """The text of ``raw``: a byte-order mark's encoding, else UTF-8, else (for HTML) the page's
    declared charset, else the encoding detected; InvalidInputError("binary file") for content
    that no encoding makes text."""
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom)), None)
    if encoding is not None:
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"not {encoding.upper().replace('-SIG', '')} despite its byte-order mark (byte {exc.start})"
            ) from exc
        return DecodedText(text, encoding.replace("-sig", ""))
    if b"\x00" in raw[:_SNIFF_BYTES]:
        raise InvalidInputError("binary file")
    candidates: list[tuple[str, str]] = []
    try:
        candidates.append((raw.decode("utf-8"), "utf-8"))
    except UnicodeDecodeError:
        declared = _declared_charset(raw) if html else None
        if declared is not None:
            try:
                candidates.append((raw.decode(declared), declared))
            except UnicodeDecodeError:
                pass
        if not candidates:
            detected = _detected(raw)
            if detected is not None:
                candidates.append(detected)
    if not candidates or _looks_binary(candidates[0][0]):
        raise InvalidInputError("binary file")
    return DecodedText(*candidates[0])


def is_text(head: bytes) -> bool:
    """Whether a file's first bytes read as text (used for files whose suffix says nothing)."""
    if any(head.startswith(bom) for bom, _ in _BOMS):
        return True
    try:
        decode_text(head[:_SNIFF_BYTES])
    except InvalidInputError:
        return False
    return True


def gunzip(raw: bytes, limit: int | None) -> bytes:
    """The decompressed bytes of a gzip file; InvalidInputError for a corrupt one or one that
    unpacks to more than ``limit`` bytes (None: no limit)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
            data = f.read(-1 if limit is None else limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InvalidInputError(f"corrupt gzip file ({exc})") from exc
    if limit is not None and len(data) > limit:
        raise InvalidInputError(
            f"unpacks to over {limit / 2**20:g} MB (raise the limit with --max-file-mb or max_file_mb=)"
        )
    return data
