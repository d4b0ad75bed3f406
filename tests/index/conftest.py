"""Backends under one shared suite: Qdrant (memory, folder) and Chroma (folder, HTTP server)."""

from __future__ import annotations

import pytest

from lmk_rag import LMKEncoder
from tests.chroma_server import start_chroma_server, stop


@pytest.fixture(scope="session")
def base_encoder():
    return LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real `chroma run` on loopback, started and stopped by the tests, in bounded time."""
    proc, port = start_chroma_server(tmp_path_factory.mktemp("chroma_server"))
    yield port
    stop(proc)


_counter = iter(range(10**6))


@pytest.fixture(params=["qdrant-memory", "qdrant-path", "chroma-path", "chroma-http"])
def make_index(request, tmp_path, base_encoder):
    """A factory: make_index(encoder=None) opens (or re-opens) the same backend store."""
    from lmk_rag.index import ChromaIndex, QdrantIndex

    kind = request.param
    opened = []
    collection = f"col{next(_counter)}"
    port = request.getfixturevalue("chroma_server") if kind == "chroma-http" else None
    memory_client = {}

    def factory(encoder=None):
        enc = encoder or base_encoder
        for idx in opened:  # qdrant local mode: one open client per folder
            if kind == "qdrant-path":
                idx.close()
        if kind == "qdrant-memory":
            if "client" not in memory_client:
                from qdrant_client import QdrantClient

                memory_client["client"] = QdrantClient(location=":memory:")
            idx = QdrantIndex(client=memory_client["client"], encoder=enc, collection=collection)
        elif kind == "qdrant-path":
            idx = QdrantIndex(tmp_path / "qdrant", encoder=enc, collection=collection)
        elif kind == "chroma-path":
            idx = ChromaIndex(tmp_path / "chroma", encoder=enc, collection=collection)
        else:
            idx = ChromaIndex(host="127.0.0.1", port=port, encoder=enc, collection=collection)
        opened.append(idx)
        return idx

    factory.kind = kind
    yield factory
    for idx in opened:
        if kind == "qdrant-path":
            idx.close()
