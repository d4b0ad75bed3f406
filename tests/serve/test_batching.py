"""Serving like a server: concurrent requests share forward passes (and each gets its own
vectors back), a bad input fails only its own request, too many requests in flight get 429,
and a shutdown finishes accepted work, then refuses new work with 503."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest

SENTENCES = [f"Sentence {i}: the {w} is where the answer lives." for i, w in enumerate("abcdefghijklmnop")]


async def _started(app):
    await app.state.engine.start()
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_concurrent_requests_share_batches_and_get_their_own_vectors(app_factory, encoder):
    app = app_factory(index=False)
    async with await _started(app) as client:
        answers = await asyncio.gather(*(client.post("/v1/embeddings", json={"input": s}) for s in SENTENCES))
        text = (await client.get("/metrics")).text
    await app.state.engine.stop()
    got = np.array([a.json()["data"][0]["embedding"] for a in answers], dtype=np.float32)
    np.testing.assert_allclose(got, encoder.encode(SENTENCES), atol=1e-5)
    batches = next(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith("lmk_rag_batch_inputs_count")
    )
    assert 1 <= batches < len(SENTENCES)  # requests that waited were joined into shared passes


async def test_a_bad_input_fails_its_own_request_only(app_factory):
    app = app_factory(index=False)
    async with await _started(app) as client:
        bodies = [{"input": s} for s in SENTENCES[:5]] + [{"input": "lone \ud800 surrogate"}]
        headers = {"content-type": "application/json"}  # JSON's \ud800 escape: what a client may send
        answers = await asyncio.gather(
            *(client.post("/v1/embeddings", content=json.dumps(b).encode(), headers=headers) for b in bodies)
        )
    await app.state.engine.stop()
    assert [a.status_code for a in answers] == [200] * 5 + [422]
    assert answers[-1].json()["error"]["param"] == "input"


async def test_a_batch_that_fails_is_retried_job_by_job(app_factory):
    from lmk_rag.errors import NonFiniteVectorError

    app = app_factory(index=False)
    engine = app.state.engine
    real = engine._encode

    def encode(kind, normalize, texts):  # one input the model cannot encode
        if "poison" in texts:
            raise NonFiniteVectorError("a vector is not finite")
        return real(kind, normalize, texts)

    engine._encode = encode
    await engine.start()
    jobs = [engine.embed("documents", [t], 5) for t in ["one", "two", "poison", "three"]]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    await engine.stop()
    assert [type(r).__name__ for r in results] == ["list", "list", "NonFiniteVectorError", "list"]


async def test_more_requests_in_flight_than_allowed_get_429():
    from lmk_rag.serve.guard import Guard
    from lmk_rag.serve.metrics import ServerMetrics
    from lmk_rag.serve.settings import ServeSettings

    release = asyncio.Event()

    async def slow_app(scope, receive, send):
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    guard = Guard(slow_app, ServeSettings(max_concurrent=2), ServerMetrics())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://test") as client:
        held = [asyncio.create_task(client.get("/x")) for _ in range(2)]
        await asyncio.sleep(0.05)
        refused = await client.get("/x")
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert "in flight" in refused.json()["error"]["message"]
        release.set()
        assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]


async def test_shutdown_finishes_accepted_work_then_refuses_with_503(app_factory, encoder):
    app = app_factory(index=True)
    engine = app.state.engine
    async with await _started(app) as client:
        pending = [asyncio.create_task(client.post("/v1/embeddings", json={"input": s})) for s in SENTENCES]
        write = asyncio.create_task(
            client.post("/documents", json={"documents": [{"id": "late", "text": "Written during shutdown."}]})
        )
        await asyncio.sleep(0.01)
        await engine.stop()  # waits for the queued embeddings and the write, then closes the index
        answers = await asyncio.gather(*pending, write)
        late = await client.post("/v1/embeddings", json={"input": "after"})
    accepted = [a for a in answers if a.status_code == 200]
    assert all(a.status_code in (200, 503) for a in answers) and accepted
    assert late.status_code == 503 and "shutting down" in late.json()["error"]["message"]
    from lmk_rag.index import QdrantIndex

    with QdrantIndex(path=app.state.index_folder, encoder=encoder) as reopened:  # closed cleanly: reopens
        stored = [d.id for d in reopened.get(["late"])]
    assert stored == (["late"] if answers[-1].status_code == 200 else [])  # acknowledged means written


@pytest.mark.parametrize("route", ["/search", "/context"])
async def test_index_calls_run_beside_embedding_batches(app_factory, route):
    app = app_factory(index=True)
    async with await _started(app) as client:
        answers = await asyncio.gather(
            *(client.post("/v1/embeddings", json={"input": s}) for s in SENTENCES[:8]),
            *(client.post(route, json={"query": "rotate the keys"}) for _ in range(4)),
        )
    await app.state.engine.stop()
    assert [a.status_code for a in answers] == [200] * 12
