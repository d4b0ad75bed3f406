"""An index served by ``lmk-rag serve``, used from another process or machine: the same
``search`` / ``context`` / ``add`` / ``get`` / ``delete`` calls as a local index, over HTTP, so a
team runs one server and many chains (the framework retrievers take ``url=`` and build one)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..context import DEFAULT_MAX_TOKENS, Passage, check_max_tokens, check_min_score
from ..encoding.inputs import check_k
from ..errors import (
    IndexNotFoundError,
    IndexUnavailableError,
    InvalidInputError,
    InvalidTypeError,
    MissingDependencyError,
)
from ..passages import DEFAULT_PASSAGE_RULE, PassageRule
from .base import SearchMode, checked_documents, id_list
from .filters import FilterArg
from .hits import Hit, StoredDocument

if TYPE_CHECKING:
    import httpx

#: Seconds a request may take (a search is milliseconds; writing long documents takes longer).
DEFAULT_TIMEOUT = 300.0


class RemoteIndex:
    """The index behind an ``lmk-rag serve --index ...`` at ``url`` (e.g. ``http://127.0.0.1:8080``).

    ``api_key``: the server's key (default ``$LMK_RAG_API_KEY``). Filters are dicts
    (``{"lang": "en"}``, see :mod:`lmk_rag.index.filters`); the context's tokens are the server
    encoder's (a ``token_counter`` cannot travel). Errors are the library's own
    (:class:`~lmk_rag.errors.InvalidInputError` for a refused request,
    :class:`~lmk_rag.errors.IndexUnavailableError` when the server cannot be reached or is busy).

    Example::

        index = RemoteIndex("http://127.0.0.1:8080")
        passages = index.context("how do I rotate the keys?", 512)
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - httpx comes with every framework extra
            raise MissingDependencyError("RemoteIndex needs httpx: pip install 'lmk-rag[client]'") from exc
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInputError(f"url must be the server's http(s)://host:port, got {url!r}")
        self.url = url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get("LMK_RAG_API_KEY") or None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def __repr__(self) -> str:
        return f"RemoteIndex({self.url!r})"

    # ------------------------------------------------------------------ calls
    def _call(self, method: str, path: str, body: Mapping[str, object] | None = None) -> Any:
        import httpx

        try:
            response = self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise IndexUnavailableError(f"lmk-rag server {self.url} cannot be reached ({exc}); is it running?") from exc
        if response.status_code < 400:
            return response.json()
        raise _error_of(response, self.url)

    def search(
        self,
        query: str,
        k: int = 4,
        *,
        filter: FilterArg = None,
        mode: SearchMode | None = None,
        neighbours: int = 0,
        passage: PassageRule = DEFAULT_PASSAGE_RULE,
    ) -> list[Hit]:
        """As :meth:`lmk_rag.index.MultiVectorIndex.search`, run by the server."""
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be str, got {type(query).__name__}")
        body = {
            "query": query,
            "k": check_k(k),
            "filter": _dict_filter(filter),
            "mode": mode,
            "neighbours": neighbours,
            "passage": passage,
            "with_text": True,
        }
        return [_hit(h) for h in self._call("POST", "/search", body)["hits"]]

    def context(
        self,
        query: str,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        *,
        k: int | None = None,
        filter: FilterArg = None,
        mode: SearchMode | None = None,
        token_counter: object = None,
        min_score: float | None = None,
    ) -> list[Passage]:
        """As :meth:`lmk_rag.index.MultiVectorIndex.context`, built by the server; tokens are
        counted by the server's encoder (``token_counter`` must be None)."""
        if token_counter is not None:
            raise InvalidInputError(
                "token_counter cannot be sent to a server: a remote context counts the server encoder's tokens; "
                "leave token_counter out (or use a local index)"
            )
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be str, got {type(query).__name__}")
        body = {
            "query": query,
            "max_tokens": check_max_tokens(max_tokens),
            "k": None if k is None else check_k(k),
            "filter": _dict_filter(filter),
            "mode": mode,
            "min_score": check_min_score(min_score),
        }
        return [_passage(p) for p in self._call("POST", "/context", body)["passages"]]

    def add(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        metadatas: Sequence[Mapping[str, object]] | None = None,
    ) -> list[str]:
        """Store whole documents on the server (an existing id is replaced); their ids."""
        items, doc_ids, metas = checked_documents(texts, ids, metadatas)
        if not items:
            return []
        documents = [{"id": i, "text": t, "metadata": m} for i, t, m in zip(doc_ids, items, metas)]
        stored: list[str] = self._call("POST", "/documents", {"documents": documents})["ids"]
        return stored

    def get(self, ids: Sequence[str]) -> list[StoredDocument]:
        """The stored documents for the ids that exist, in the order asked."""
        found = []
        for doc_id in id_list(ids):
            try:
                data = self._call("GET", f"/documents/{_quoted(doc_id)}")
            except _NoSuchDocument:
                continue
            found.append(StoredDocument(data["id"], data["text"], dict(data["metadata"])))
        return found

    def delete(self, ids: Sequence[str]) -> None:
        """Delete documents by id (ids that do not exist are skipped)."""
        for doc_id in id_list(ids):
            try:
                self._call("DELETE", f"/documents/{_quoted(doc_id)}")
            except _NoSuchDocument:
                continue

    def __len__(self) -> int:
        info = self._call("GET", "/info")
        if info.get("index") is None:
            raise IndexNotFoundError(f"the lmk-rag server at {self.url} runs without an index (start it with --index)")
        return int(info["index"]["documents"])

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> RemoteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _NoSuchDocument(IndexNotFoundError):
    """The server has no document with the id asked (not: the server has no index)."""


def _quoted(doc_id: str) -> str:
    from urllib.parse import quote

    return quote(doc_id, safe="")


def _dict_filter(where: object) -> object:
    if where is not None and not isinstance(where, Mapping):
        raise InvalidTypeError(
            f"a remote index takes a dict filter such as {{'lang': 'en'}}, got {type(where).__name__}"
        )
    return dict(where) if where is not None else None


def _error_of(response: httpx.Response, url: str) -> Exception:
    """The library error for a refused request, with the server's message."""
    try:
        error = response.json()["error"]
        message, param = str(error["message"]), error.get("param")
    except (ValueError, KeyError, TypeError):
        message, param = response.text[:200], None
    status = response.status_code
    text = f"lmk-rag server {url}: {message}"
    if status == 404:
        return _NoSuchDocument(text) if param == "doc_id" else IndexNotFoundError(text)
    if status == 401:
        return InvalidInputError(text + " (give api_key=, or set LMK_RAG_API_KEY)")
    if status in (429, 503, 507) or status >= 500:
        return IndexUnavailableError(text)
    return InvalidInputError(text)


def _span(data: Mapping[str, int]) -> tuple[int, int]:
    return int(data["start"]), int(data["end"])


def _hit(data: Mapping[str, Any]) -> Hit:
    return Hit(
        data["id"],
        float(data["score"]),
        data.get("text") or "",
        dict(data["metadata"]),
        int(data["landmark"]),
        _span(data["span"]),
        data["passage"],
        landmark_span=_span(data["landmark_span"]),
        similarity=float(data["similarity"]),
    )


def _passage(data: Mapping[str, Any]) -> Passage:
    return Passage(
        id=data["id"],
        span=_span(data["span"]),
        text=data["text"],
        score=float(data["score"]),
        tokens=int(data["tokens"]),
        metadata=dict(data["metadata"]),
    )
