"""Files -> documents -> index: idempotent, resumable, with progress and a summary.

A document's id is its path relative to the root it was found under; a SHA-256 of its bytes,
kept in metadata, lets a re-run skip unchanged files. Documents are written in small batches,
each document atomically (one Qdrant point; a Chroma generation), so a run that is killed and
started again ends with every document in the index exactly once.
"""

from __future__ import annotations

import hashlib
import html.parser
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .index.base import MultiVectorIndex

logger = logging.getLogger("lmk_rag")

TEXT_SUFFIXES = {
    ".txt", ".md", ".markdown", ".rst", ".adoc", ".tex", ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml",
    ".toml", ".ini", ".cfg", ".xml", ".py", ".pyi", ".js", ".jsx", ".ts", ".tsx", ".java", ".kt", ".scala",
    ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".go", ".rs", ".rb", ".php", ".swift", ".m", ".r", ".jl", ".lua",
    ".sh", ".bash", ".zsh", ".sql", ".css", ".scss", ".html", ".htm",
}
HTML_SUFFIXES = {".html", ".htm"}


@dataclass
class IngestSummary:
    added: int = 0
    updated: int = 0
    skipped: int = 0
    pruned: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    landmarks: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        rate = self.tokens / self.seconds if self.seconds else 0.0
        out = [f"added {self.added}, updated {self.updated}, skipped {self.skipped} unchanged, pruned {self.pruned}, "
               f"failed {len(self.failed)}; {self.landmarks} landmarks, {self.tokens} tokens in {self.seconds:.1f} s "
               f"({rate:.0f} tokens/s)"]
        out += [f"  failed {path}: {reason}" for path, reason in sorted(self.failed.items())]
        return out


class _HTMLText(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        if tag in ("p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr"):
            self.parts.append("\n")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    parser = _HTMLText()
    parser.feed(markup)
    return "".join(parser.parts)


def read_document(path: Path) -> tuple[str, bytes]:
    """(text, raw bytes); ValueError with a reason for binary, non-UTF-8 or unreadable files."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"unreadable: {exc.strerror or exc}") from exc
    if path.suffix.lower() == ".pdf":
        return _pdf_text(path), raw
    if b"\x00" in raw[:8192]:
        raise ValueError("binary file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start})") from exc
    if path.suffix.lower() in HTML_SUFFIXES:
        text = html_to_text(text)
    return text, raw


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise ValueError("PDF needs the optional extra: pip install 'lmk-rag[pdf]'") from exc
    try:
        return "\n\n".join(page.extract_text() or "" for page in PdfReader(str(path)).pages)
    except Exception as exc:  # noqa: BLE001 - a broken PDF is a per-file failure
        raise ValueError(f"unreadable PDF: {exc}") from exc


def discover(paths: Sequence[str | Path], suffixes: Iterable[str] = TEXT_SUFFIXES | {".pdf"}) -> list[tuple[str, Path]]:
    """(document id, file) pairs: ids are paths relative to each root given (a file's own name)."""
    wanted = {s.lower() for s in suffixes}
    found: dict[str, Path] = {}
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise FileNotFoundError(f"no such file or folder: {given}")
        if root.is_file():
            found[root.name] = root
            continue
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and path.suffix.lower() in wanted and not any(p.startswith(".") for p in rel.parts):
                found[rel.as_posix()] = path
    return sorted(found.items())


def ingest(index: MultiVectorIndex, paths: Sequence[str | Path], *, prune: bool = False, batch_docs: int = 16,
           show_progress: bool = True) -> IngestSummary:
    """Add new and changed files to ``index``, skip unchanged ones, optionally prune vanished ones."""
    from tqdm.auto import tqdm

    summary = IngestSummary()
    t0 = time.perf_counter()
    files = discover(paths)
    known = {d.id: d.metadata.get("sha256") for d in index.get([i for i, _ in files])} if files else {}
    pending: list[tuple[str, str, dict]] = []

    bar = tqdm(total=len(files), unit="doc", desc="ingest", disable=not show_progress)

    def flush() -> None:
        if not pending:
            return
        ids, texts, metas = zip(*pending)
        multis = index.encoder.encode_multi(list(texts))
        index.add_encoded(multis, list(texts), list(ids), list(metas))
        for doc_id, mv in zip(ids, multis):
            if doc_id in known:
                summary.updated += 1
            else:
                summary.added += 1
            summary.landmarks += len(mv)
            summary.tokens += mv.n_tokens
        logger.info("committed %d documents (%s ... %s)", len(ids), ids[0], ids[-1])
        bar.update(len(ids))
        elapsed = time.perf_counter() - t0
        bar.set_postfix_str(f"{summary.tokens / max(elapsed, 1e-9):.0f} tok/s")
        pending.clear()

    for doc_id, path in files:
        try:
            text, raw = read_document(path)
        except ValueError as exc:
            summary.failed[doc_id] = str(exc)
            bar.update(1)
            continue
        digest = hashlib.sha256(raw).hexdigest()
        if known.get(doc_id) == digest:
            summary.skipped += 1
            bar.update(1)
            continue
        pending.append((doc_id, text, {"source": str(path), "sha256": digest, "bytes": len(raw)}))
        if len(pending) >= batch_docs:
            flush()
    flush()
    bar.close()
    if prune:
        present = {i for i, _ in files}
        gone = [i for i in index.ids() if i not in present]
        index.delete(gone)
        summary.pruned = len(gone)
    summary.seconds = time.perf_counter() - t0
    return summary
