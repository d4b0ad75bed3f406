"""The model and the index behind one worker thread, with embedding requests batched.

Requests wait in a queue; while one forward pass runs, the requests that arrive meanwhile are
joined into the next, up to ``max_batch_tokens`` tokens (TEI's ``--max-batch-tokens``), so
concurrent clients share forward passes instead of queueing one by one. Index calls (search,
context, writes) run on the same thread, one at a time: the encoder is not re-entrant and two
forward passes at once would only fight over the CPU."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np

from ..encoder import LMKEncoder
from ..errors import LMKError
from ..index import MultiVectorIndex
from ..types import MultiVector
from .metrics import ServerMetrics

logger = logging.getLogger(__name__)

#: What an embedding job asks for: pooled document vectors, query vectors, or landmark vectors.
EmbedKind = Literal["documents", "queries", "landmarks"]
Encoded = list[np.ndarray] | list[MultiVector]
T = TypeVar("T")
#: How often a batch waiting for more requests looks at the queue (seconds).
WAIT_STEP = 0.0005
#: Characters of input counted on the event loop itself (a fraction of a millisecond).
INLINE_COUNT_CHARS = 20_000


class ServerClosingError(LMKError):
    """The server is shutting down and takes no new work (HTTP 503)."""


@dataclass
class _Job:
    kind: EmbedKind
    normalize: bool
    texts: list[str]
    tokens: int
    future: asyncio.Future[Encoded] = field(repr=False)

    @property
    def key(self) -> tuple[EmbedKind, bool]:
        return self.kind, self.normalize


class Engine:
    """Runs ``encoder`` (and ``index``, when given) for the server; see the module."""

    def __init__(
        self,
        encoder: LMKEncoder,
        index: MultiVectorIndex | None,
        max_batch_tokens: int,
        metrics: ServerMetrics,
        batch_wait: float = 0.0,
    ) -> None:
        self.encoder = encoder
        self.index = index
        self.max_batch_tokens = max_batch_tokens
        self.batch_wait = batch_wait
        self.metrics = metrics
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lmk-rag-engine")
        self._queue: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        """Start the batching loop on the running event loop."""
        self._queue = asyncio.Queue()
        self._worker = asyncio.create_task(self._work(), name="lmk-rag-batcher")

    async def stop(self) -> None:
        """Refuse new work, finish what was accepted (queued embeddings and the write in progress),
        then close the index: nothing is left half-written."""
        self._closing = True
        if self._queue is not None:
            await self._queue.join()
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        self._pool.shutdown(wait=True)
        if self.index is not None:
            self.index.close()

    async def _check_open(self) -> None:
        """Refuse work once stopping; start on first use where no lifespan ran (an app mounted
        inside another, whose lifespan events do not reach it)."""
        if self._closing:
            raise ServerClosingError("the server is shutting down; send the request to another replica or retry")
        if self._queue is None:
            await self.start()

    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text by the encoder's tokenizer: short inputs on the event loop (a thread
        hop would cost more than the count), long ones on a thread."""
        if sum(map(len, texts)) <= INLINE_COUNT_CHARS:
            return self.encoder.count_tokens(list(texts))
        return await asyncio.to_thread(self.encoder.count_tokens, list(texts))

    async def embed(self, kind: EmbedKind, texts: list[str], tokens: int, normalize: bool = True) -> Encoded:
        """The vectors of ``texts`` (``tokens`` of them in all), encoded in a shared batch."""
        await self._check_open()
        assert self._queue is not None
        future: asyncio.Future[Encoded] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Job(kind, normalize, texts, tokens, future))
        self.metrics.queue_depth.set(self._queue.qsize())
        return await future

    async def call(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """``fn(*args, **kwargs)`` on the engine's thread (index calls), after the work before it."""
        await self._check_open()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    # ------------------------------------------------------------------ batching
    async def _work(self) -> None:
        assert self._queue is not None
        queue, waiting = self._queue, list[_Job]()
        loop = asyncio.get_running_loop()
        last_batch_end, last_batch_size = -1.0, 0
        while True:
            if not waiting:
                waiting.append(await queue.get())
            if last_batch_size > 1:
                # Under concurrent load the clients the last batch just answered send again within a
                # moment; without this pause batches alternate between the clients that waited and
                # those that did not (half-full passes). It ends as soon as the batch is as full as
                # the last one; a lone or sequential client (batches of one) never waits.
                deadline = last_batch_end + self.batch_wait
                while len(waiting) + queue.qsize() < last_batch_size and loop.time() < deadline:
                    await asyncio.sleep(WAIT_STEP)
            while not queue.empty():
                waiting.append(queue.get_nowait())
            self.metrics.queue_depth.set(len(waiting))
            batch, waiting = self._next_batch(waiting)
            try:
                await self._run_batch(batch)
            except Exception as exc:  # a bug here must fail these requests, not stop the loop
                logger.exception("a batch failed outside the encoder")
                for job in batch:
                    _settle(job, exc=exc)
            finally:
                last_batch_end, last_batch_size = loop.time(), len(batch)
                for _ in batch:
                    queue.task_done()

    def _next_batch(self, waiting: list[_Job]) -> tuple[list[_Job], list[_Job]]:
        """The oldest job and the later ones of its kind that fit the token budget; the rest wait."""
        first, batch, rest = waiting[0], [waiting[0]], []
        tokens = first.tokens
        for job in waiting[1:]:
            if job.key == first.key and tokens + job.tokens <= self.max_batch_tokens:
                batch.append(job)
                tokens += job.tokens
            else:
                rest.append(job)
        return batch, rest

    async def _run_batch(self, batch: list[_Job]) -> None:
        live = [job for job in batch if not job.future.done()]  # a client that left is not encoded for
        if not live:
            return
        kind, normalize = live[0].key
        texts = [t for job in live for t in job.texts]
        self.metrics.batch_inputs.observe(len(texts))
        self.metrics.batch_tokens.observe(sum(job.tokens for job in live))
        loop = asyncio.get_running_loop()
        try:
            encoded = await loop.run_in_executor(self._pool, self._encode, kind, normalize, texts)
        except Exception as exc:  # noqa: BLE001 - handed to the requests, which answer with it
            if len(live) > 1:  # one bad input fails its own request only
                for job in live:
                    await self._run_batch([job])
                return
            _settle(live[0], exc=exc)
            return
        start = 0
        for job in live:
            _settle(job, result=encoded[start : start + len(job.texts)])
            start += len(job.texts)

    def _encode(self, kind: EmbedKind, normalize: bool, texts: list[str]) -> Encoded:
        if kind == "landmarks":
            return self.encoder.encode_multi(texts, normalize=normalize, show_progress=False)
        if kind == "queries":
            return list(self.encoder.encode_query(texts, normalize=normalize))
        return list(self.encoder.encode(texts, normalize=normalize, show_progress=False))


def _settle(job: _Job, *, result: Encoded | None = None, exc: BaseException | None = None) -> None:
    if job.future.done():
        return
    if exc is not None:
        job.future.set_exception(exc)
    else:
        assert result is not None
        job.future.set_result(result)
