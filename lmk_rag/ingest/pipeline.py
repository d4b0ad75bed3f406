"""Files -> documents -> index: idempotent, resumable, with progress and a summary.

A document's id is its file's absolute path, links resolved: two runs over different folders
never share an id (each project's README.md stays), a folder and its subfolder, or a file and a
link to it, give one document, and the id does not depend on where the command runs. A SHA-256
of a file's bytes, kept in metadata, lets a re-run skip unchanged files. Documents are written in
small batches, each document atomically (one Qdrant point; a Chroma generation), so a run that is
killed and started again ends with every document in the index exactly once. Symbolic links that
lead out of the folder given are not followed unless asked; FIFOs, devices and the index's own
folder are never read.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DamagedIndexError, InsufficientSpaceError, InvalidInputError, ReadOnlyIndexError
from ..index.base import MultiVectorIndex
from ..types import MultiVector
from .discovery import _under
from .readers import NotText, read_document

if TYPE_CHECKING:
    from ..encoder import LMKEncoder
    from .driver import RunOptions

logger = logging.getLogger(__name__)
#: More files than this passed over for one reason are printed as one line (``--json`` lists each).
_IGNORED_LINES_PER_REASON = 3


@dataclass
class IngestSummary:
    """What an ingest did: documents added, updated, skipped, pruned, failed (with reasons) and
    ignored (with reasons), landmarks, tokens and time."""

    added: int = 0
    updated: int = 0
    skipped: int = 0
    pruned: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    landmarks: int = 0
    tokens: int = 0
    seconds: float = 0.0
    #: Ray nodes whose actors read and encoded files (``--ray`` only): shows a cluster was used.
    ray_nodes: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, object]:
        """The summary as JSON-serialisable data (``lmk-rag ingest --json``)."""
        return {
            "added": self.added,
            "updated": self.updated,
            "skipped": self.skipped,
            "pruned": self.pruned,
            "failed": dict(sorted(self.failed.items())),
            "ignored": dict(sorted(self.ignored.items())),
            "landmarks": self.landmarks,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "ray_nodes": sorted(self.ray_nodes),
        }

    def lines(self) -> list[str]:
        """The summary as the command line prints it: one line, then a line per failed file and per
        ignored file (one line for a reason shared by many)."""
        rate = self.tokens / self.seconds if self.seconds else 0.0
        nodes = len(self.ray_nodes)
        on_ray = f"; ran on {nodes} Ray node{'s' if nodes != 1 else ''}" if nodes else ""
        out = [
            f"added {self.added}, updated {self.updated}, skipped {self.skipped} unchanged, pruned {self.pruned}, "
            f"failed {len(self.failed)}; {self.landmarks} landmarks, {self.tokens} tokens in {self.seconds:.1f} s "
            f"({rate:.0f} tokens/s){on_ray}"
        ]
        out += [f"  failed {path}: {reason}" for path, reason in sorted(self.failed.items())]
        by_reason: dict[str, list[str]] = {}
        for path, reason in sorted(self.ignored.items()):
            by_reason.setdefault(reason, []).append(path)
        for reason, paths in by_reason.items():
            if len(paths) > _IGNORED_LINES_PER_REASON:  # e.g. the images of an HTML tree: one line, --json has all
                out.append(f"  ignored {len(paths)} files: {reason} ({paths[0]}, ...; --json lists them)")
            else:
                out += [f"  ignored {path}: {reason}" for path in paths]
        return out


@dataclass
class ReadFile:
    """One discovered file after reading: ``status`` is "new", "changed", "unchanged", "failed" or
    "ignored" (no text in it; then ``reason`` says why); text and metadata are set for new and
    changed files."""

    id: str
    status: str
    text: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def read_for_ingest(
    doc_id: str, path: Path, known: Mapping[str, str | None], max_file_mb: float | None = None
) -> ReadFile:
    """Read one file and compare its SHA-256 with the one the index holds (``known``: id -> sha256
    of the documents already stored). Metadata: ``source`` (the file's resolved path, equal to the
    id), ``sha256``, ``bytes`` and what the reader learnt (``encoding``, ``title``, the page map).
    A gzip file may unpack to at most ``max_file_mb`` MB. The single-process and the Ray ingest
    both read through here."""
    try:
        read = read_document(path, None if max_file_mb is None else int(max_file_mb * 2**20))
    except NotText as exc:
        return ReadFile(doc_id, "ignored", reason=str(exc))
    except ValueError as exc:
        return ReadFile(doc_id, "failed", reason=str(exc))
    except OSError as exc:  # vanished, no permission, a path longer than the system allows
        return ReadFile(doc_id, "failed", reason=f"not read: {exc.strerror or exc}")
    digest = hashlib.sha256(read.raw).hexdigest()
    if doc_id in known and known[doc_id] == digest:
        return ReadFile(doc_id, "unchanged")
    metadata = {"source": doc_id, "sha256": digest, "bytes": len(read.raw), **read.metadata}
    return ReadFile(doc_id, "changed" if doc_id in known else "new", read.text, metadata)


def stored_digests(index: MultiVectorIndex, ids: Sequence[str]) -> dict[str, str | None]:
    """id -> sha256 of the documents of ``ids`` the index holds (None where none was recorded)."""
    return {d.id: d.metadata.get("sha256") for d in index.get(list(ids))} if ids else {}


# Errors no retry and no other document can get past: a full disk, a damaged index, bad input.
STOPS_THE_RUN = (InvalidInputError, TypeError, InsufficientSpaceError, DamagedIndexError, ReadOnlyIndexError)


def _retrying(step: Callable[[], Any], attempts: int, what: str) -> Any:
    """Run ``step``; on an error other than bad input, wait (0.5 s, 1 s, ...) and run it again,
    ``attempts`` times in all; the last error is raised."""
    for attempt in range(attempts):
        try:
            return step()
        except STOPS_THE_RUN:
            raise
        except Exception as exc:
            if attempt == attempts - 1:
                raise
            logger.warning("%s failed (%s); retrying (%d of %d)", what, exc, attempt + 2, attempts)
            time.sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def encode_files(
    encoder: LMKEncoder, files: Sequence[ReadFile], show_progress: bool = False
) -> tuple[list[MultiVector | None], dict[str, str]]:
    """(MultiVector per file, None where it failed; {id: reason} for those files). The batch is encoded
    at once; if that fails, each file alone, so one bad file fails alone."""
    if not files:
        return [], {}
    try:
        whole: list[MultiVector | None] = list(
            encoder.encode_multi([f.text for f in files], show_progress=show_progress)
        )
        return whole, {}
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - any failure: find the file(s) that cause it, one by one
        logger.warning("encoding a batch of %d files failed; encoding them one by one", len(files))
    encoded: list[MultiVector | None] = []
    failed: dict[str, str] = {}
    for f in files:
        try:
            encoded.extend(encoder.encode_multi([f.text], show_progress=False))
        except Exception as exc:  # noqa: BLE001 - reported per file; the others go on
            failed[f.id] = f"could not be encoded: {_reason(exc)}"
            encoded.append(None)
    return encoded, failed


def write_files(
    index: MultiVectorIndex, files: Sequence[ReadFile], multis: Sequence[MultiVector | None], *, attempts: int = 3
) -> dict[str, str]:
    """Write encoded files, each document atomically; a batch that fails is retried ``attempts``
    times, then each document alone (retried the same), so the failures are known per file.
    Returns {id: reason} for the documents not written."""
    pairs = [(f, m) for f, m in zip(files, multis) if m is not None]
    if not pairs:
        return {}

    def write(group: Sequence[tuple[ReadFile, Any]]) -> None:
        index.add_encoded(
            [m for _, m in group], [f.text for f, _ in group], [f.id for f, _ in group], [f.metadata for f, _ in group]
        )

    try:
        _retrying(functools.partial(write, pairs), attempts, f"writing {len(pairs)} documents")
        return {}
    except STOPS_THE_RUN:
        raise
    except Exception as exc:  # noqa: BLE001 - narrowed down per document below
        if len(pairs) == 1:
            return {pairs[0][0].id: f"not written: {_reason(exc)}"}
    failed = {}
    for pair in pairs:
        try:
            _retrying(functools.partial(write, [pair]), attempts, f"writing {pair[0].id}")
        except Exception as exc:  # noqa: BLE001 - reported per file; the others go on
            failed[pair[0].id] = f"not written: {_reason(exc)}"
    return failed


def tally(
    summary: IngestSummary, files: Sequence[ReadFile], multis: Sequence[MultiVector | None], failed: Mapping[str, str]
) -> None:
    """Count a written batch into ``summary`` (failures by file, with their reasons)."""
    for f, mv in zip(files, multis):
        if f.id in failed:
            summary.failed[f.id] = failed[f.id]
        elif mv is not None:
            summary.updated += f.status == "changed"
            summary.added += f.status == "new"
            summary.landmarks += len(mv)
            summary.tokens += mv.n_tokens


@dataclass(frozen=True)
class LocalExecutor:
    """Reads, encodes and writes in this process, ``batch_docs`` documents at a time (the
    default executor of :func:`lmk_rag.ingest.ingest`)."""

    label: str = "ingest"

    def run(
        self,
        index: MultiVectorIndex,
        files: Sequence[tuple[str, Path]],
        known: Mapping[str, str | None],
        options: RunOptions,
        summary: IngestSummary,
        done: Callable[[int], None],
    ) -> None:
        """See :class:`~.driver.Executor`."""
        pending: list[ReadFile] = []

        def flush() -> None:
            if not pending:
                return
            # The encoder's own bar (tokens) moves inside long documents; the run's counts documents.
            multis, failed = encode_files(index.encoder, pending, options.show_progress)
            failed.update(write_files(index, pending, multis, attempts=options.attempts))
            tally(summary, pending, multis, failed)
            logger.info("committed %d documents (%s ... %s)", len(pending), pending[0].id, pending[-1].id)
            done(len(pending))
            pending.clear()

        for doc_id, path in files:
            read = read_for_ingest(doc_id, path, known, options.max_file_mb)
            if read.status in ("failed", "ignored", "unchanged"):
                if read.status == "failed":
                    summary.failed[doc_id] = read.reason
                elif read.status == "ignored":
                    summary.ignored[doc_id] = read.reason
                else:
                    summary.skipped += 1
                done(1)
                continue
            pending.append(read)
            if len(pending) >= options.batch_docs:
                flush()
        flush()


def prune_vanished(index: MultiVectorIndex, paths: Sequence[str | Path], present: set[str]) -> int:
    """Delete the documents whose source file lies under ``paths`` and no longer exists; documents
    from other folders, and files that exist but were not read this run, are kept."""
    roots = [Path(p).absolute() for p in paths] + [Path(p).resolve() for p in paths]
    gone = []
    for doc in index.get([i for i in index.ids() if i not in present]):
        source = doc.metadata.get("source")
        if isinstance(source, str) and _under(Path(source).absolute(), roots) and not os.path.lexists(source):
            gone.append(doc.id)
    index.delete(gone)
    return len(gone)
