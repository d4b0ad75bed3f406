"""Index URIs for the command line: ``qdrant:PATH`` (default), ``qdrant+http(s)://host:port``,
``chroma:PATH``, ``chroma+http(s)://host:port``. A bare path means ``qdrant:PATH``.

A Qdrant server URI may carry the settings of a collection it creates, as a query:
``qdrant+http://host:6333?shard_number=6&replication_factor=2&write_consistency_factor=1&on_disk=true``;
its API key is read from the environment variable ``QDRANT_API_KEY``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlparse

from ..errors import IndexUnavailableError, InvalidInputError
from ..types import Fingerprint

URI_HELP = "qdrant:PATH, qdrant+http(s)://host:port, chroma:PATH or chroma+http(s)://host:port"
# Read-only uses (lmk-rag copy's source): an index written by qdrant-client's local mode.
LOCAL_MODE_SCHEME = "qdrant-local:"


@dataclass(frozen=True)
class IndexURI:
    backend: str  # "qdrant", "chroma", or "qdrant-local" (qdrant-client's local mode, to convert)
    path: str | None = None
    url: str | None = None
    host: str | None = None
    port: int | None = None
    ssl: bool = False
    #: Qdrant cluster settings of a new collection (shard_number, replication_factor, ...).
    options: dict[str, Any] = field(default_factory=dict)
    #: HTTP headers for a server (basic auth from ``user:password@`` in a Chroma URI).
    headers: dict[str, str] | None = field(default=None, repr=False)


def basic_auth(username: str | None, password: str | None) -> dict[str, str] | None:
    """The Authorization header of ``user:password@`` in a URI (None without a user)."""
    import base64
    from urllib.parse import unquote

    if not username:
        return None
    token = base64.b64encode(f"{unquote(username)}:{unquote(password or '')}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _cluster_options(uri: str, query: str) -> dict[str, Any]:
    """The Qdrant collection settings in a URI's query, as typed values."""
    from .qdrant_client_store import CLUSTER_OPTIONS

    options: dict[str, Any] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in CLUSTER_OPTIONS:
            raise InvalidInputError(f"index URI {uri!r}: unknown setting {name!r}; use {', '.join(CLUSTER_OPTIONS)}")
        if name == "on_disk":
            if value.lower() not in ("true", "false", "1", "0"):
                raise InvalidInputError(f"index URI {uri!r}: on_disk must be true or false, got {value!r}")
            options[name] = value.lower() in ("true", "1")
        elif value.isdigit() and int(value) >= 1:
            options[name] = int(value)
        else:
            raise InvalidInputError(f"index URI {uri!r}: {name} must be an int >= 1, got {value!r}")
    return options


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
            options = _cluster_options(uri, parsed.query)
            if backend == "qdrant":
                return IndexURI("qdrant", url=f"{parsed.scheme}://{parsed.hostname}:{port or 6333}", options=options)
            if options:
                raise InvalidInputError(f"index URI {uri!r}: {', '.join(options)} are Qdrant collection settings")
            headers = basic_auth(parsed.username, parsed.password)  # sent to the server, never printed
            return IndexURI(
                "chroma", host=parsed.hostname, port=port or 8000, ssl=parsed.scheme == "https", headers=headers
            )
    if uri.startswith(LOCAL_MODE_SCHEME):
        if not uri[len(LOCAL_MODE_SCHEME) :]:
            raise InvalidInputError(f"index URI {uri!r} has no path; use qdrant-local:PATH")
        return IndexURI("qdrant-local", path=uri[len(LOCAL_MODE_SCHEME) :])
    if uri.startswith(("qdrant:", "chroma:")):
        backend, path = uri.split(":", 1)
        if not path:
            raise InvalidInputError(f"index URI {uri!r} has no path; use {URI_HELP}")
        return IndexURI(backend, path=os.path.expanduser(path))
    if "://" in uri or (":" in uri.split("/")[0] and len(uri.split(":")[0]) > 1):
        raise InvalidInputError(f"unknown index URI {uri!r}; use {URI_HELP}")
    return IndexURI("qdrant", path=uri)


def open_index(uri: IndexURI, encoder: Any, *, quantization: str | None = None) -> Any:
    """The index a URI names; ``quantization`` applies to Qdrant collections created now."""
    from . import ChromaIndex, QdrantIndex

    if uri.backend == "qdrant-local":
        return QdrantIndex(local_path=uri.path, encoder=encoder)
    if uri.backend == "qdrant":
        api_key = os.environ.get("QDRANT_API_KEY") or None
        where: dict[str, Any] = {"path": uri.path} if uri.path else {"url": uri.url, "api_key": api_key, **uri.options}
        return QdrantIndex(**where, encoder=encoder, quantization=quantization)
    if quantization is not None:
        raise InvalidInputError("quantization is a Qdrant setting; Chroma indexes store float32 vectors")
    if uri.path:
        return ChromaIndex(uri.path, encoder=encoder)
    return ChromaIndex(host=uri.host, port=uri.port or 8000, ssl=uri.ssl, headers=uri.headers, encoder=encoder)


def holds_index(uri: IndexURI, collection: str = "lmk") -> bool:
    """Whether an embedded location holds a store already (servers: always asked)."""
    if uri.path is None:
        return True
    folder = Path(uri.path)
    if folder.exists() and not folder.is_dir():
        raise IndexUnavailableError(f"the index path {uri.path!r} is a file; give a folder for {uri.backend}:PATH")
    if uri.backend == "chroma":
        return (folder / "chroma.sqlite3").is_file()
    from .qdrant_edge_store import holds_edge_index, holds_local_mode_index

    if uri.backend == "qdrant-local":
        return holds_local_mode_index(folder)
    return holds_edge_index(folder, collection) or holds_local_mode_index(folder)


def read_fingerprint(uri: IndexURI, collection: str = "lmk", api_key: str | None = None) -> Fingerprint | None:
    """The fingerprint an existing index was built with, or None for a new / empty location.
    Reads only: a folder that holds no index is left untouched. A Qdrant server is asked with
    ``api_key``, else ``$QDRANT_API_KEY``."""
    if not holds_index(uri, collection):
        return None
    if uri.backend == "qdrant" and uri.path:
        from ..errors import IncompatibleIndexError
        from .qdrant_edge_store import holds_edge_index, local_mode_message, read_meta

        folder = Path(uri.path)
        if not holds_edge_index(folder, collection):
            raise IncompatibleIndexError(local_mode_message(folder, collection))
        meta = read_meta(folder, collection)
        return Fingerprint.from_dict(meta["fingerprint"]) if meta and meta.get("fingerprint") else None
    if uri.backend in ("qdrant", "qdrant-local"):
        from qdrant_client import QdrantClient

        from .qdrant_client_store import auth_error, is_connection_error, open_local_mode, stored_fingerprint

        key = api_key or os.environ.get("QDRANT_API_KEY") or None
        qdrant = open_local_mode(Path(uri.path)) if uri.path else QdrantClient(url=uri.url, api_key=key)
        try:
            return stored_fingerprint(qdrant, collection)
        except Exception as exc:
            refused = auth_error(exc, uri.url) if uri.url else None
            if refused is not None:
                raise refused from exc
            if uri.url and is_connection_error(exc):
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
            client = chromadb.HttpClient(
                host=uri.host or "localhost", port=uri.port or 8000, ssl=uri.ssl, headers=uri.headers
            )
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if f"{collection}__lmk_meta" not in names:
            return None
        return fingerprint_in(client.get_collection(f"{collection}__lmk_meta"))
    except Exception as exc:
        raise unavailable(exc, where, opening=True) from exc
