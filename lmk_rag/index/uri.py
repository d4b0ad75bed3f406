"""Index URIs for the command line: ``qdrant:PATH`` (default), ``qdrant+http(s)://host:port``,
``chroma:PATH``, ``chroma+http(s)://host:port``. A bare path means ``qdrant:PATH``.

A Qdrant server URI may carry the settings of a collection it creates, as a query:
``qdrant+http://host:6333?shard_number=6&replication_factor=2&write_consistency_factor=1&on_disk=true``;
its API key is read from the environment variable ``QDRANT_API_KEY``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlparse

from ..errors import IndexUnavailableError, InvalidInputError
from ..types import Fingerprint
from .redact import redact_uri

if TYPE_CHECKING:
    from ..encoder import LMKEncoder
    from .base import MultiVectorIndex
    from .qdrant.layout import Quantization

URI_HELP = "qdrant:PATH, qdrant+http(s)://host:port, chroma:PATH or chroma+http(s)://host:port"


@dataclass(frozen=True)
class IndexURI:
    """Where an index lives, as :func:`parse_index_uri` reads it."""

    backend: str  # "qdrant" or "chroma"
    path: str | None = None
    url: str | None = None
    host: str | None = None
    port: int | None = None
    ssl: bool = False
    #: Qdrant cluster settings of a new collection (shard_number, replication_factor, ...).
    options: dict[str, Any] = field(default_factory=dict)
    #: HTTP headers for a server (basic auth from ``user:password@`` in a Chroma URI).
    headers: dict[str, str] | None = field(default=None, repr=False)
    #: The collection inside the store.
    collection: str = "lmk"
    #: A Qdrant server's key (``$QDRANT_API_KEY`` when None).
    api_key: str | None = field(default=None, repr=False)


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
    from .qdrant.client_store import CLUSTER_OPTIONS

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
    """An index URI (see the module) as an :class:`IndexURI`, or an error that shows the forms."""
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidInputError(f"index URI must be {URI_HELP}, got {uri!r}")
    shown = redact_uri(uri)  # every message below names the URI without its credentials
    for scheme in ("qdrant+http://", "qdrant+https://", "chroma+http://", "chroma+https://"):
        if uri.startswith(scheme):
            backend = scheme.split("+")[0]
            parsed = urlparse(uri.split("+", 1)[1])
            if not parsed.hostname:
                raise InvalidInputError(f"index URI {shown!r} has no host; use {URI_HELP}")
            try:
                port = parsed.port
            except ValueError as exc:
                raise InvalidInputError(f"index URI {shown!r} has a bad port; use {URI_HELP}") from exc
            options = _cluster_options(shown, parsed.query)
            if backend == "qdrant":
                return IndexURI("qdrant", url=f"{parsed.scheme}://{parsed.hostname}:{port or 6333}", options=options)
            if options:
                raise InvalidInputError(f"index URI {shown!r}: {', '.join(options)} are Qdrant collection settings")
            headers = basic_auth(parsed.username, parsed.password)  # sent to the server, never printed
            return IndexURI(
                "chroma", host=parsed.hostname, port=port or 8000, ssl=parsed.scheme == "https", headers=headers
            )
    if uri.startswith(("qdrant:", "chroma:")):
        backend, path = uri.split(":", 1)
        if not path:
            raise InvalidInputError(f"index URI {shown!r} has no path; use {URI_HELP}")
        return IndexURI(backend, path=os.path.expanduser(path))
    if "://" in uri or (":" in uri.split("/")[0] and len(uri.split(":")[0]) > 1):
        raise InvalidInputError(f"unknown index URI {shown!r}; use {URI_HELP}")
    return IndexURI("qdrant", path=uri)


def open_index(
    uri: IndexURI, encoder: LMKEncoder | None, *, quantization: Quantization | None = None
) -> MultiVectorIndex:
    """The index a URI names; ``quantization`` applies to Qdrant collections created now."""
    from .chroma import ChromaIndex
    from .qdrant import QdrantIndex

    if uri.backend == "qdrant":
        if uri.path:
            return QdrantIndex(uri.path, collection=uri.collection, encoder=encoder, quantization=quantization)
        return QdrantIndex(
            url=uri.url,
            api_key=_qdrant_key(uri),
            collection=uri.collection,
            encoder=encoder,
            quantization=quantization,
            **uri.options,
        )
    if quantization is not None:
        raise InvalidInputError("quantization is a Qdrant setting; Chroma indexes store float32 vectors")
    if uri.path:
        return ChromaIndex(uri.path, collection=uri.collection, encoder=encoder)
    return ChromaIndex(
        host=uri.host,
        port=uri.port or 8000,
        ssl=uri.ssl,
        headers=uri.headers,
        collection=uri.collection,
        encoder=encoder,
    )


def read_fingerprint(uri: IndexURI) -> Fingerprint | None:
    """The fingerprint the index at ``uri`` (its collection) was built with, or None for a new /
    empty location. Reads only: a folder that holds no index is left untouched. A Qdrant server
    is asked with the URI's key, else ``$QDRANT_API_KEY``. Each backend knows its own storage."""
    collection = uri.collection
    if uri.path is not None:
        folder = Path(uri.path)
        if folder.exists() and not folder.is_dir():
            raise IndexUnavailableError(f"the index path {uri.path!r} is a file; give a folder for {uri.backend}:PATH")
    if uri.backend == "qdrant" and uri.path:
        from .qdrant.edge_files import folder_fingerprint

        return folder_fingerprint(Path(uri.path), collection)
    if uri.backend == "qdrant":
        from .qdrant.client_store import server_fingerprint

        return server_fingerprint(str(uri.url), _qdrant_key(uri), collection)
    from .chroma import stored_fingerprint

    return stored_fingerprint(collection, path=uri.path, host=uri.host, port=uri.port, ssl=uri.ssl, headers=uri.headers)


def _qdrant_key(uri: IndexURI) -> str | None:
    """A Qdrant server's key: the URI's, else ``$QDRANT_API_KEY``."""
    return uri.api_key or os.environ.get("QDRANT_API_KEY") or None
