"""Index URIs for the command line: ``qdrant:PATH`` (default), ``qdrant+http(s)://host:port``,
``chroma:PATH``, ``chroma+http://host:port``. A bare path means ``qdrant:PATH``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

URI_HELP = "qdrant:PATH, qdrant+http(s)://host:port, chroma:PATH or chroma+http://host:port"


@dataclass(frozen=True)
class IndexURI:
    backend: str  # "qdrant" or "chroma"
    path: str | None = None
    url: str | None = None
    host: str | None = None
    port: int | None = None


def parse_index_uri(uri: str) -> IndexURI:
    if not isinstance(uri, str) or not uri.strip():
        raise ValueError(f"index URI must be {URI_HELP}, got {uri!r}")
    for scheme in ("qdrant+http://", "qdrant+https://", "chroma+http://", "chroma+https://"):
        if uri.startswith(scheme):
            backend = scheme.split("+")[0]
            parsed = urlparse(uri.split("+", 1)[1])
            if not parsed.hostname:
                raise ValueError(f"index URI {uri!r} has no host; use {URI_HELP}")
            try:
                port = parsed.port
            except ValueError as exc:
                raise ValueError(f"index URI {uri!r} has a bad port; use {URI_HELP}") from exc
            if backend == "qdrant":
                return IndexURI("qdrant", url=f"{parsed.scheme}://{parsed.hostname}:{port or 6333}")
            return IndexURI("chroma", host=parsed.hostname, port=port or 8000)
    if uri.startswith(("qdrant:", "chroma:")):
        backend, path = uri.split(":", 1)
        if not path:
            raise ValueError(f"index URI {uri!r} has no path; use {URI_HELP}")
        return IndexURI(backend, path=path)
    if "://" in uri or (":" in uri.split("/")[0] and len(uri.split(":")[0]) > 1):
        raise ValueError(f"unknown index URI {uri!r}; use {URI_HELP}")
    return IndexURI("qdrant", path=uri)


def open_index(uri: IndexURI, encoder):
    from . import ChromaIndex, QdrantIndex

    if uri.backend == "qdrant":
        return QdrantIndex(uri.path, encoder=encoder) if uri.path else QdrantIndex(url=uri.url, encoder=encoder)
    if uri.path:
        return ChromaIndex(uri.path, encoder=encoder)
    return ChromaIndex(host=uri.host, port=uri.port, encoder=encoder)


def read_fingerprint(uri: IndexURI, collection: str = "lmk"):
    """The fingerprint an existing index was built with, or None for a new / empty location."""
    import json

    from ..types import Fingerprint

    if uri.backend == "qdrant":
        from pathlib import Path

        from qdrant_client import QdrantClient

        if uri.path and not Path(uri.path).exists():
            return None
        client = QdrantClient(path=uri.path) if uri.path else QdrantClient(url=uri.url)
        try:
            meta = f"{collection}__lmk_meta"
            if not client.collection_exists(meta):
                return None
            from .qdrant import point_id

            points = client.retrieve(meta, ids=[point_id("fingerprint")], with_payload=True)
            return Fingerprint.from_dict(points[0].payload["fingerprint"]) if points else None
        finally:
            client.close()
    import chromadb

    client = chromadb.PersistentClient(path=uri.path) if uri.path else chromadb.HttpClient(host=uri.host, port=uri.port)
    names = {getattr(c, "name", c) for c in client.list_collections()}
    if f"{collection}__lmk_meta" not in names:
        return None
    found = client.get_collection(f"{collection}__lmk_meta").get(ids=["fingerprint"], include=["metadatas"])
    return Fingerprint.from_dict(json.loads(found["metadatas"][0]["json"])) if found["ids"] else None
