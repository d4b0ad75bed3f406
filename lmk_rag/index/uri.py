"""Index URIs for the command line: ``qdrant:PATH`` (default), ``qdrant+http(s)://host:port``,
``chroma:PATH``, ``chroma+http(s)://host:port``. A bare path means ``qdrant:PATH``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import IndexUnavailableError, InvalidInputError
from ..types import Fingerprint

URI_HELP = "qdrant:PATH, qdrant+http(s)://host:port, chroma:PATH or chroma+http(s)://host:port"


@dataclass(frozen=True)
class IndexURI:
    backend: str  # "qdrant" or "chroma"
    path: str | None = None
    url: str | None = None
    host: str | None = None
    port: int | None = None
    ssl: bool = False


def parse_index_uri(uri: str) -> IndexURI:
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidInputError(f"index URI must be {URI_HELP}, got {uri!r}")
    for scheme in ("qdrant+http://", "qdrant+https://", "chroma+http://", "chroma+https://"):
        if uri.startswith(scheme):
            backend = scheme.split("+")[0]
            parsed = urlparse(uri.split("+", 1)[1])
            if not parsed.hostname:
                raise InvalidInputError(f"index URI {uri!r} has no host; use {URI_HELP}")
            try:
                port = parsed.port
            except ValueError as exc:
                raise InvalidInputError(f"index URI {uri!r} has a bad port; use {URI_HELP}") from exc
            if backend == "qdrant":
                return IndexURI("qdrant", url=f"{parsed.scheme}://{parsed.hostname}:{port or 6333}")
            return IndexURI("chroma", host=parsed.hostname, port=port or 8000, ssl=parsed.scheme == "https")
    if uri.startswith(("qdrant:", "chroma:")):
        backend, path = uri.split(":", 1)
        if not path:
            raise InvalidInputError(f"index URI {uri!r} has no path; use {URI_HELP}")
        return IndexURI(backend, path=path)
    if "://" in uri or (":" in uri.split("/")[0] and len(uri.split(":")[0]) > 1):
        raise InvalidInputError(f"unknown index URI {uri!r}; use {URI_HELP}")
    return IndexURI("qdrant", path=uri)


def open_index(uri: IndexURI, encoder: Any) -> Any:
    from . import ChromaIndex, QdrantIndex

    if uri.backend == "qdrant":
        return QdrantIndex(uri.path, encoder=encoder) if uri.path else QdrantIndex(url=uri.url, encoder=encoder)
    if uri.path:
        return ChromaIndex(uri.path, encoder=encoder)
    return ChromaIndex(host=uri.host, port=uri.port or 8000, ssl=uri.ssl, encoder=encoder)


# The file each embedded store writes when it is created: without it a folder holds no index.
_STORE_MARKER = {"qdrant": "meta.json", "chroma": "chroma.sqlite3"}


def holds_index(uri: IndexURI) -> bool:
    """Whether an embedded location holds a store already (servers: always asked)."""
    if uri.path is None:
        return True
    folder = Path(uri.path)
    if folder.exists() and not folder.is_dir():
        raise IndexUnavailableError(f"the index path {uri.path!r} is a file; give a folder for {uri.backend}:PATH")
    return (folder / _STORE_MARKER[uri.backend]).is_file()


def read_fingerprint(uri: IndexURI, collection: str = "lmk") -> Fingerprint | None:
    """The fingerprint an existing index was built with, or None for a new / empty location.
    Reads only: a folder that holds no index is left untouched."""
    if not holds_index(uri):
        return None
    if uri.backend == "qdrant":
        from qdrant_client import QdrantClient

        from .qdrant import _is_connection_error, _open_folder, stored_fingerprint

        qdrant = _open_folder(Path(uri.path)) if uri.path else QdrantClient(url=uri.url)
        try:
            return stored_fingerprint(qdrant, collection)
        except Exception as exc:
            if uri.url and _is_connection_error(exc):
                raise IndexUnavailableError(
                    f"cannot reach the Qdrant server at {uri.url} ({exc}); start it, or check the URL"
                ) from exc
            raise
        finally:
            qdrant.close()
    import chromadb

    from .chroma import fingerprint_in, unavailable

    where = uri.path or f"{'https' if uri.ssl else 'http'}://{uri.host}:{uri.port}"
    try:
        if uri.path:
            client: Any = chromadb.PersistentClient(path=uri.path)
        else:
            client = chromadb.HttpClient(host=uri.host or "localhost", port=uri.port or 8000, ssl=uri.ssl)
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if f"{collection}__lmk_meta" not in names:
            return None
        return fingerprint_in(client.get_collection(f"{collection}__lmk_meta"))
    except Exception as exc:
        raise unavailable(exc, where, opening=True) from exc
