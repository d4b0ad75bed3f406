"""One ingest run, whatever executes it: discover the files, skip those whose stored SHA-256 still
matches, hand the rest to an executor (this process: :class:`~.pipeline.LocalExecutor`; a Ray
cluster: :class:`~.ray.RayExecutor`) under one progress bar, prune what vanished, time it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..encoding.inputs import check_int
from ..index.base import MultiVectorIndex
from .discovery import DEFAULT_MAX_FILE_MB, check_max_file_mb, discover
from .pipeline import IngestSummary, LocalExecutor, prune_vanished, stored_digests


@dataclass(frozen=True)
class RunOptions:
    """How an executor works through the files: ``batch_docs`` documents encoded and written
    together, a failed write tried ``attempts`` times, compressed files unpacked up to
    ``max_file_mb`` (None: no limit), the encoder's own progress shown or not."""

    batch_docs: int
    attempts: int
    max_file_mb: float | None
    show_progress: bool


class Executor(Protocol):
    """Reads, encodes and writes the files of one run, counting into the summary."""

    @property
    def label(self) -> str:
        """The progress bar's label."""

    def run(
        self,
        index: MultiVectorIndex,
        files: Sequence[tuple[str, Path]],
        known: Mapping[str, str | None],
        options: RunOptions,
        summary: IngestSummary,
        done: Callable[[int], None],
    ) -> None:
        """Ingest ``files`` (id, path) into ``index``; ``known`` holds the stored digests (an
        unchanged file is skipped); ``done(n)`` after every ``n`` documents finished."""


def ingest(
    index: MultiVectorIndex,
    paths: Sequence[str | Path],
    *,
    executor: Executor | None = None,
    prune: bool = False,
    batch_docs: int = 16,
    show_progress: bool = True,
    follow_symlinks: bool = False,
    attempts: int = 3,
    max_file_mb: float | None = DEFAULT_MAX_FILE_MB,
    include: Sequence[str] | str | None = None,
    exclude: Sequence[str] | str | None = None,
) -> IngestSummary:
    """Add new and changed files to ``index``, skip unchanged ones; with ``prune``, remove the
    documents whose files, under the paths given, are gone.

    Args:
        index: The index to fill; its own folder is never read.
        paths: Files and folders to read.
        executor: Where reading and encoding run: this process (the default), or a Ray cluster
            (:class:`lmk_rag.ingest.ray.RayExecutor`).
        prune: Also delete the documents whose files under ``paths`` no longer exist.
        batch_docs: Documents encoded and written together.
        show_progress: A progress bar of documents (and tokens per second).
        follow_symlinks: Follow links that lead out of the folders given.
        attempts: Tries of a batch that cannot be written, before its files are reported failed.
        max_file_mb: Larger files (and larger unpacked ``.gz``) are ignored; None: no limit.
        include: gitignore-style globs (``"*.md"``) of the files to read below each folder given.
        exclude: gitignore-style globs (``"build/**"``) of files and folders to pass over.

    Returns:
        What the run did; every file passed over is in ``summary.ignored`` with the reason, every
        file that could not be read, encoded or written in ``summary.failed`` (the others are
        still ingested).

    Raises:
        InvalidInputError: A bad argument (named in the message).
    """
    from tqdm.auto import tqdm

    check_int("batch_docs", batch_docs)
    options = RunOptions(batch_docs, attempts, check_max_file_mb(max_file_mb), show_progress)
    run_by: Executor = LocalExecutor() if executor is None else executor
    summary = IngestSummary()
    t0 = time.perf_counter()
    found = discover(
        paths,
        follow_symlinks=follow_symlinks,
        not_entered=[index.folder] if index.folder else [],
        max_file_mb=max_file_mb,
        include=include,
        exclude=exclude,
    )
    summary.ignored.update(found.ignored)
    known = stored_digests(index, [i for i, _ in found.files])
    bar = tqdm(total=len(found.files), unit="doc", desc=run_by.label, disable=not show_progress)

    def done(n: int) -> None:
        bar.update(n)
        bar.set_postfix_str(f"{summary.tokens / max(time.perf_counter() - t0, 1e-9):.0f} tok/s")

    try:
        if found.files:
            run_by.run(index, found.files, known, options, summary, done)
    finally:
        bar.close()
    if prune:
        summary.pruned = prune_vanished(index, paths, {i for i, _ in found.files})
    summary.seconds = time.perf_counter() - t0
    return summary
