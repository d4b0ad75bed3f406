"""Ingestion on a Ray cluster: Ray Data reads the files and encodes them in an actor pool (one
:class:`~lmk_rag.encoder.LMKEncoder` per actor, loaded once, on a GPU where asked), then writes.

Discovery, the SHA-256 skip, reading, encoding, retries and pruning are the single-process
ingest's own functions (:mod:`lmk_rag.ingest`); only where they run changes. A server index
(``qdrant+http(s)://``, ``chroma+http(s)://``) is written by the actors themselves; an embedded
one (a folder, which one process holds) by this process as results stream back. Either way each
document is written atomically under an id made from its path, so a run killed half-way and
started again ends with every file exactly once.

Needs the ``[ray]`` extra. On a cluster every node needs lmk-rag installed and the files (and a
model folder, if one is given) at the same paths, e.g. on a shared file system.
"""

from __future__ import annotations

import json
import logging
import math
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..encoding.inputs import check_int, check_number
from ..errors import IncompatibleIndexError, InvalidInputError, LMKError, MissingDependencyError
from ..index.base import MultiVectorIndex
from ..index.uri import IndexURI, open_index
from ..types import Fingerprint
from .driver import RunOptions
from .pipeline import IngestSummary, ReadFile, encode_files, read_for_ingest, tally, write_files

logger = logging.getLogger(__name__)
#: Calls each actor gets at least (when there are enough files), for an even finish.
_CALLS_PER_ACTOR = 8

__all__ = ["RayExecutor", "connect"]


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise MissingDependencyError("--ray needs Ray Data: pip install 'lmk-rag[ray]'") from exc
    return ray


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Join the Ray cluster at ``address`` ("auto", "ray://host:10001", "host:6379"), or start a
    local one (``None`` or "local", with ``num_cpus``). Returns True when this call connected
    (so the caller may shut it down); False when Ray was already running in this process."""
    ray = _ray()
    if ray.is_initialized():
        return False
    if address in (None, "", "local"):
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    else:
        if num_cpus is not None:
            raise InvalidInputError("num_cpus applies to a local Ray; a cluster at an address has its own")
        ray.init(address=address, log_to_driver=False)
    return True


class _IngestActor:
    """One Ray actor: its encoder (and, for a server index, its client) live as long as it does.
    Each call reads, hashes and encodes a batch of files and, given a server, writes it."""

    def __init__(
        self,
        settings: dict[str, Any],
        fingerprint: dict[str, Any],
        index_address: IndexURI | None,
        threads: int,
        attempts: int,
        max_file_mb: float | None = None,
    ) -> None:
        import torch

        from ..encoder import LMKEncoder

        torch.set_num_threads(max(1, threads))
        self.encoder = LMKEncoder(**settings)
        differences = self.encoder.fingerprint.differences(Fingerprint.from_dict(fingerprint))
        if differences:
            raise IncompatibleIndexError(
                "the encoder loaded on a Ray worker differs from the driver's ("
                + "; ".join(differences)
                + "); install the same lmk-rag and model on every node"
            )
        self.index = open_index(index_address, self.encoder) if index_address is not None else None
        self.attempts = attempts
        self.max_file_mb = max_file_mb
        import ray

        self.node = ray.get_runtime_context().get_node_id()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        known = {i: (s or None) for i, s, stored in zip(batch["id"], batch["sha256"], batch["stored"]) if stored}
        reads = [
            read_for_ingest(str(i), Path(str(p)), known, self.max_file_mb) for i, p in zip(batch["id"], batch["path"])
        ]
        todo = [r for r in reads if r.status in ("new", "changed")]
        multis, failed = encode_files(self.encoder, todo)
        if self.index is not None:
            failed.update(write_files(self.index, todo, multis, attempts=self.attempts))
        encoded = dict(zip([r.id for r in todo], multis))
        out: dict[str, list[Any]] = {k: [] for k in ("id", "status", "reason", "text", "metadata", "encoded", "node")}
        for r in reads:
            mv = encoded.get(r.id)
            status, reason = ("failed", failed[r.id]) if r.id in failed else (r.status, r.reason)
            out["id"].append(r.id)
            out["status"].append(status)
            out["reason"].append(reason)
            # For an embedded index this process writes: the text and vectors travel back.
            keep = self.index is None and status in ("new", "changed")
            out["text"].append(r.text if keep else "")
            out["metadata"].append(json.dumps(r.metadata) if keep else "")
            # Written or not, the landmark and token counts come back for the summary.
            out["encoded"].append(pickle.dumps(_counts_only(mv) if not keep and mv is not None else mv))
            out["node"].append(self.node)
        return {k: np.array(v, dtype=object) for k, v in out.items()}


def _counts_only(mv: Any) -> Any:
    """What the summary needs of a document a worker already wrote: its landmark and token counts."""
    return (len(mv), mv.n_tokens)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read (and reported) by the actor


def _unwrap(exc: BaseException) -> BaseException:
    """The lmk-rag error a Ray task error carries, if any (so the user sees what to change)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, LMKError):
            return seen
        seen = getattr(seen, "cause", None) or seen.__cause__ or seen.__context__
    return exc


@dataclass(frozen=True)
class RayExecutor:
    """Reading and encoding (and, for a server index, writing) on a Ray cluster, for
    :func:`lmk_rag.ingest.ingest`: ``actors`` encoders, each with ``cpus_per_actor`` CPUs and
    ``gpus_per_actor`` GPUs. Joins the cluster at ``address`` (or starts a local one) unless Ray is
    running already. Same ids, texts, spans and vectors as in this process.

    Example:
        ``ingest(index, ["docs/"], executor=RayExecutor(actors=8, gpus_per_actor=1, address="auto"))``
    """

    actors: int = 2
    gpus_per_actor: float = 0.0
    cpus_per_actor: float = 1.0
    address: str | None = None
    label: str = "ingest (ray)"

    def __post_init__(self) -> None:
        _ray()  # a missing extra is said before any file is read
        check_int("actors", self.actors)
        check_number("gpus_per_actor", self.gpus_per_actor, 0)
        check_number("cpus_per_actor", self.cpus_per_actor, 0)
        if self.cpus_per_actor == 0 and self.gpus_per_actor == 0:
            raise InvalidInputError("an actor needs cpus_per_actor > 0 or gpus_per_actor > 0")

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
        ray = _ray()
        connect(self.address)
        # The run's bar and summary report progress; Ray Data's own bars and per-run banners would double them.
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        ray.data.DataContext.get_current().enable_progress_bars = False
        index_address = index.address()
        # Largest files first, in calls small enough that every actor gets several: the pool
        # ends together instead of waiting on one actor's last big batch.
        largest_first = sorted(files, key=lambda file: -_size(file[1]))
        rows = [
            {"id": i, "path": str(p.absolute()), "sha256": known.get(i) or "", "stored": i in known}
            for i, p in largest_first
        ]
        per_call = max(1, min(options.batch_docs, math.ceil(len(rows) / (_CALLS_PER_ACTOR * self.actors))))
        settings = {**asdict(index.encoder.settings), "device": "auto" if self.gpus_per_actor > 0 else "cpu"}
        dataset = ray.data.from_items(rows, override_num_blocks=math.ceil(len(rows) / per_call)).map_batches(
            _IngestActor,
            batch_size=per_call,
            batch_format="numpy",
            # One call in flight per actor: the next call goes to whichever actor is free (calls
            # queued ahead are bound to one actor, which left the other idle at the end).
            compute=ray.data.ActorPoolStrategy(size=self.actors, max_tasks_in_flight_per_actor=1),
            num_cpus=self.cpus_per_actor,
            num_gpus=self.gpus_per_actor,
            fn_constructor_kwargs={
                "settings": settings,
                "fingerprint": index.encoder.fingerprint.to_dict(),
                "index_address": index_address,
                "threads": max(1, int(self.cpus_per_actor)),
                "attempts": options.attempts,
                "max_file_mb": options.max_file_mb,
            },
        )  # Ray Data restarts actors that die and retries their batches (its defaults)
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
                _collect(index, batch, index_address is None, summary, options.attempts)
                done(len(batch["id"]))
                logger.info("committed %d documents (%s ... %s)", len(batch["id"]), batch["id"][0], batch["id"][-1])
        except Exception as exc:
            cause = _unwrap(exc)
            if cause is not exc:
                raise cause from exc
            raise


def _collect(
    index: MultiVectorIndex, batch: dict[str, np.ndarray], write_here: bool, summary: IngestSummary, attempts: int
) -> None:
    """Count one batch of results into ``summary``; for an embedded index, write it first."""
    summary.ray_nodes.update(str(node) for node in batch["node"])
    writes: list[tuple[ReadFile, Any]] = []
    for doc_id, status, reason, text, metadata, encoded in zip(
        batch["id"], batch["status"], batch["reason"], batch["text"], batch["metadata"], batch["encoded"]
    ):
        doc_id = str(doc_id)
        if status == "failed":
            summary.failed[doc_id] = str(reason)
        elif status == "ignored":
            summary.ignored[doc_id] = str(reason)
        elif status == "unchanged":
            summary.skipped += 1
        elif write_here:
            writes.append((ReadFile(doc_id, str(status), str(text), json.loads(metadata)), pickle.loads(encoded)))
        else:
            landmarks, tokens = pickle.loads(encoded)
            summary.added += status == "new"
            summary.updated += status == "changed"
            summary.landmarks += landmarks
            summary.tokens += tokens
    if writes:
        files, multis = [f for f, _ in writes], [m for _, m in writes]
        tally(summary, files, multis, write_files(index, files, multis, attempts=attempts))
