"""The HTTP routes of ``lmk-rag serve``: embeddings in OpenAI's and TEI's shapes, landmarks with
their spans, and (with an index) search, context and document writes. :func:`create_app` builds
the ASGI app around an encoder and an optional index; the CLI runs it under uvicorn."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import numpy as np
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response

from ..encoder import LMKEncoder
from ..errors import InvalidInputError, LMKError
from ..index import Hit, MultiVectorIndex, parse_filter
from ..types import MultiVector
from .engine import EmbedKind, Encoded, Engine
from .errors import RequestError, install_error_handlers
from .guard import Guard
from .metrics import ServerMetrics
from .responses import VectorResponse
from .schemas import (
    ERROR_RESPONSES,
    ContextRequest,
    ContextResponse,
    Deleted,
    DocumentsRequest,
    DocumentsResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EmbedLandmarksRequest,
    EmbedRequest,
    LandmarkEmbedding,
    ModelList,
    SearchRequest,
    SearchResponse,
    StoredDocumentOut,
)
from .settings import ServeSettings

INDEX_ROUTES_HELP = "this server runs without an index; start it with `lmk-rag serve --index URI`"


def create_app(
    encoder: LMKEncoder,
    index: MultiVectorIndex | None = None,
    settings: ServeSettings | None = None,
    *,
    index_name: str | None = None,
) -> FastAPI:
    """The server's ASGI app for ``encoder`` and, when given, ``index`` (which must use that
    encoder; the app closes it on shutdown). ``index_name``: how ``/info`` names the index
    (credentials removed), default its class."""
    if index is not None and index.encoder.fingerprint != encoder.fingerprint:
        raise InvalidInputError(
            "the index was opened with another encoder than the one served; pass index.encoder as the encoder"
        )
    limits = settings or ServeSettings()
    metrics = ServerMetrics()
    engine = Engine(encoder, index, limits.max_batch_tokens, metrics, limits.batch_wait_ms / 1000)
    model_id = encoder.model_name

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        try:
            yield
        finally:
            await engine.stop()

    app = FastAPI(
        title="lmk-rag",
        summary="Landmark-pooled embeddings with spans, search and contexts; long inputs never truncated.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    app.state.engine = engine
    install_error_handlers(app)

    def check_count(n: int, field: str) -> None:
        if n > limits.max_inputs:
            raise RequestError(413, f"{field} holds {n} items; the limit is {limits.max_inputs} (--max-inputs)", field)

    def needs_index() -> MultiVectorIndex:
        if engine.index is None:
            raise RequestError(404, INDEX_ROUTES_HELP)
        return engine.index

    def checked_filter(where: dict[str, object] | None) -> dict[str, object] | None:
        try:
            parse_filter(where)
        except LMKError as exc:
            raise RequestError(422, str(exc), "filter") from exc
        return where

    async def encoded(kind: EmbedKind, texts: list[str], normalize: bool, route: str) -> tuple[Encoded, int]:
        """The texts' vectors (a shared batch) and their tokens, counted once for usage, batching and metrics."""
        tokens = sum(await engine.count_tokens(texts))
        vectors = await engine.embed(kind, texts, tokens, normalize)
        metrics.tokens.labels(route).inc(tokens)
        return vectors, tokens

    # ------------------------------------------------------------------ service
    @app.get("/health", tags=["service"])
    async def health() -> dict[str, str]:
        """Liveness: 200 while the server takes requests (no API key needed)."""
        return {"status": "ok"}

    @app.get("/info", tags=["service"])
    async def info() -> dict[str, object]:
        """The model, its vectors, how long inputs are read, the limits, and the index."""
        fp = encoder.fingerprint
        data: dict[str, object] = {
            "model": model_id,
            "dimension": encoder.dimension,
            "landmark_interval": fp.granularity,
            "window_tokens": encoder.max_length,
            "window_overlap": encoder.window_overlap,
            "truncation": "none: long inputs are encoded in windows",
            "fingerprint": fp.to_dict(),
            "limits": {
                "max_batch_tokens": limits.max_batch_tokens,
                "max_inputs": limits.max_inputs,
                "max_body_bytes": limits.max_body_bytes,
                "max_concurrent": limits.max_concurrent,
            },
            "index": None,
        }
        if engine.index is not None:
            count = await engine.call(len, engine.index)
            data["index"] = {"name": index_name or type(engine.index).__name__, "documents": count}
        return data

    @app.get("/metrics", tags=["service"], response_class=Response)
    async def metrics_route() -> Response:
        """Prometheus metrics: requests by route and status, latency, tokens, batch sizes."""
        return Response(metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

    # ------------------------------------------------------------------ embeddings
    @app.get("/v1/models", tags=["openai"], response_model=ModelList)
    async def models() -> dict[str, object]:
        """The model this server runs, as OpenAI lists models."""
        return {"object": "list", "data": [{"id": model_id, "object": "model", "created": 0, "owned_by": "lmk-rag"}]}

    @app.post("/v1/embeddings", tags=["openai"], response_model=EmbeddingsResponse)
    @app.post("/embeddings", include_in_schema=False)
    async def embeddings(body: EmbeddingsRequest) -> Response:
        """One pooled vector per input (OpenAI's shape); long inputs encoded in windows, never cut."""
        texts = body.texts
        check_count(len(texts), "input")
        if body.dimensions is not None and body.dimensions != encoder.dimension:
            raise RequestError(
                422,
                f"dimensions must be the model's {encoder.dimension} (no shortened vectors), got {body.dimensions}",
                "dimensions",
            )
        kind: EmbedKind = "queries" if body.input_type == "query" else "documents"
        found, tokens = await encoded(kind, texts, True, "/v1/embeddings")
        vectors = cast(list[np.ndarray], found)  # documents and queries: one pooled vector each
        if body.encoding_format == "base64":
            shown: list[object] = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
        else:
            shown = list(vectors)
        data = [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(shown)]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return VectorResponse({"object": "list", "data": data, "model": model_id, "usage": usage})

    @app.post("/embed", tags=["tei"], response_model=list[list[float]])
    async def embed(body: EmbedRequest) -> Response:
        """One pooled vector per input (TEI's shape); ``truncate`` is refused, nothing is cut."""
        texts = body.texts
        check_count(len(texts), "inputs")
        kind: EmbedKind = "queries" if body.prompt_name == "query" else "documents"
        vectors, _ = await encoded(kind, texts, body.normalize, "/embed")
        return VectorResponse(vectors)

    @app.post("/embed_landmarks", tags=["tei"], response_model=list[list[LandmarkEmbedding]])
    async def embed_landmarks(body: EmbedLandmarksRequest) -> Response:
        """One vector per landmark of each input with the characters it covers
        (``text_offset``, Elasticsearch's chunked-inference shape)."""
        texts = body.texts
        check_count(len(texts), "inputs")
        multis, _ = await encoded("landmarks", texts, body.normalize, "/embed_landmarks")
        out = []
        for multi in multis:
            assert isinstance(multi, MultiVector)
            out.append(
                [
                    {"embedding": vector, "text_offset": {"start": int(a), "end": int(b)}}
                    for vector, (a, b) in zip(multi.vectors, multi.spans)
                ]
            )
        return VectorResponse(out)

    # ------------------------------------------------------------------ index
    @app.post("/search", tags=["index"], response_model=SearchResponse)
    async def search(body: SearchRequest) -> dict[str, object]:
        """The ``k`` best documents, each with the passage that matched best and its span."""
        index = needs_index()
        hits = await engine.call(
            index.search,
            body.query,
            body.k,
            filter=checked_filter(body.filter),
            mode=body.mode,
            neighbours=body.neighbours,
            passage=body.passage,
        )
        return {"hits": [_hit(h, body.with_text) for h in hits]}

    @app.post("/context", tags=["index"], response_model=ContextResponse)
    async def context(body: ContextRequest) -> dict[str, object]:
        """The passages to hand an LLM for ``query`` within ``max_tokens`` (the encoder's tokens)."""
        index = needs_index()
        passages = await engine.call(
            index.context,
            body.query,
            body.max_tokens,
            k=body.k,
            filter=checked_filter(body.filter),
            mode=body.mode,
            min_score=body.min_score,
        )
        out = [
            {
                "id": p.id,
                "span": {"start": p.span[0], "end": p.span[1]},
                "text": p.text,
                "score": p.score,
                "tokens": p.tokens,
                "metadata": p.metadata,
                "pages": list(p.pages),
                "page_labels": list(p.page_labels),
            }
            for p in passages
        ]
        return {"passages": out, "tokens": sum(p.tokens for p in passages)}

    @app.post("/documents", tags=["index"], response_model=DocumentsResponse)
    async def add_documents(body: DocumentsRequest) -> dict[str, list[str]]:
        """Store whole documents (an existing id is replaced with all its landmarks); the answer
        comes once they are written."""
        index = needs_index()
        check_count(len(body.documents), "documents")
        ids = [d.id if d.id is not None else uuid.uuid4().hex for d in body.documents]
        texts = [d.text for d in body.documents]
        metadatas = [dict(d.metadata) for d in body.documents]
        stored = await engine.call(index.add, texts, ids=ids, metadatas=metadatas)
        return {"ids": stored}

    @app.get("/documents/{doc_id:path}", tags=["index"], response_model=StoredDocumentOut)
    async def get_document(doc_id: str) -> dict[str, object]:
        """A stored document's text and metadata."""
        found = await engine.call(needs_index().get, [doc_id])
        if not found:
            raise RequestError(404, f"no document with id {doc_id!r}", "doc_id")
        return {"id": found[0].id, "text": found[0].text, "metadata": found[0].metadata}

    @app.delete("/documents/{doc_id:path}", tags=["index"], response_model=Deleted)
    async def delete_document(doc_id: str) -> dict[str, str]:
        """Delete a document and its landmarks; 404 when there is none with that id."""
        index = needs_index()
        if not await engine.call(index.get, [doc_id]):
            raise RequestError(404, f"no document with id {doc_id!r}", "doc_id")
        await engine.call(index.delete, [doc_id])
        return {"deleted": doc_id}

    app.add_middleware(Guard, settings=limits, metrics=metrics)
    if limits.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(limits.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    return app


def _hit(hit: Hit, with_text: bool) -> dict[str, object]:
    return {
        "id": hit.id,
        "score": hit.score,
        "similarity": hit.similarity,
        "passage": hit.passage,
        "span": {"start": hit.span[0], "end": hit.span[1]},
        "landmark": hit.landmark,
        "landmark_span": {"start": hit.landmark_span[0], "end": hit.landmark_span[1]},
        "metadata": hit.metadata,
        "pages": list(hit.pages),
        "page_labels": list(hit.page_labels),
        "text": hit.text if with_text else None,
    }
