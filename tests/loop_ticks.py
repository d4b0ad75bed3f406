"""Whether a coroutine leaves the event loop free: count the loop's turns while it runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def loop_ticks() -> AsyncIterator[list[int]]:
    """``ticks[0]`` counts 10 ms turns of the event loop while the body runs: a call that blocks
    the loop for 0.3 s leaves it near 0, one that runs in a thread near 30."""
    ticks = [0]

    async def tick() -> None:
        while True:
            await asyncio.sleep(0.01)
            ticks[0] += 1

    task = asyncio.create_task(tick())
    try:
        yield ticks
    finally:
        task.cancel()
