"""Errors as HTTP answers: the OpenAI shape ``{"error": {"message", "type", "param", "code"}}``,
which OpenAI clients, LangChain and LlamaIndex already read, with the status that says who must act."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match

from ..errors import (
    IndexNotFoundError,
    IndexUnavailableError,
    InsufficientSpaceError,
    LMKError,
    MissingDependencyError,
    ReadOnlyIndexError,
)
from .engine import ServerClosingError
from .schemas import FIELD_NAMES

logger = logging.getLogger(__name__)

#: The error ``type`` for each status (OpenAI's names where it has one).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable",
    507: "insufficient_storage",
}


def error_content(status: int, message: str, param: str | None = None) -> dict[str, dict[str, str | int | None]]:
    """The JSON body of an error answer."""
    return {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "invalid_request_error"),
            "param": param,
            "code": status,
        }
    }


def error_response(
    status: int, message: str, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error answer: ``status`` and :func:`error_content`."""
    return JSONResponse(error_content(status, message, param), status_code=status, headers=headers)


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx), what to change, and the field at fault."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def status_of(exc: LMKError) -> int:
    """The HTTP status of a library error: 4xx for what the client can change, 503/507 for the server."""
    if isinstance(exc, ServerClosingError):
        return 503
    if isinstance(exc, IndexNotFoundError):
        return 404
    if isinstance(exc, ReadOnlyIndexError):
        return 409
    if isinstance(exc, InsufficientSpaceError):
        return 507
    if isinstance(exc, (IndexUnavailableError, MissingDependencyError)):
        return 503
    return 422


#: Errors that only say "not this type": under a union (a text or a list of texts) each branch
#: reports one; the error of the branch the value did match the type of says more.
_TYPE_ONLY = {
    "string_type",
    "list_type",
    "int_type",
    "float_type",
    "bool_type",
    "dict_type",
    "model_type",
    "none_required",
}
#: A union branch's tag in an error location ("constrained-str", "list[str]"), not a field name.
_UNION_TAG = re.compile(r"^(str|int|float|bool|list|dict|none)$|^(constrained|function)-|\[")


def _field_of(loc: tuple[str | int, ...], fields: set[str]) -> str:
    parts = [p for p in (loc[1:] if loc and loc[0] in ("body", "query", "path") else loc)]
    named = [str(p) for p in parts if isinstance(p, int) or p in fields or not _UNION_TAG.search(p)]
    return ".".join(named) if named else "body"


def _most_telling(errors: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    telling = [e for e in errors if e.get("type") not in _TYPE_ONLY]
    return (telling or list(errors) or [{"loc": ("body",), "msg": "invalid request"}])[0]


def _allowed_methods(app: FastAPI, request: Request) -> str:
    """Every method some route takes on this path (FastAPI makes one route per method, so the
    405 of the first route to match names only its own)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, BaseRoute) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    """Every failure answers JSON: validation (422 naming the field), HTTP errors (404, 405, ...),
    library errors (:func:`status_of`), and anything unforeseen (500, logged, no traceback sent)."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = _most_telling(exc.errors())
        if first.get("type") == "json_invalid":
            return error_response(422, f"the body is not valid JSON ({first.get('msg', '')})", "body")
        where = _field_of(tuple(first.get("loc", ("body",))), FIELD_NAMES)
        message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        if first.get("type") == "string_pattern_mismatch" and (first.get("ctx") or {}).get("pattern") == r"\S":
            message = "is empty; every input needs some text"
        return error_response(422, f"{where}: {message}", where)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 400 and message == "There was an error parsing the body":
            return error_response(422, "the body is not valid JSON (UTF-8 text)", "body")
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}; /docs lists the routes"
        elif exc.status_code == 405 and message == "Method Not Allowed":
            allowed = _allowed_methods(app, request) or (exc.headers or {}).get("Allow", "another method")
            message = f"{request.method} is not allowed on {request.url.path}; use {allowed}"
            return error_response(405, message, headers={"Allow": allowed})
        return error_response(exc.status_code, message, headers=dict(exc.headers or {}))

    @app.exception_handler(RequestError)
    async def refused(_: Request, exc: RequestError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.param)

    @app.exception_handler(LMKError)
    async def library_error(_: Request, exc: LMKError) -> JSONResponse:
        return error_response(status_of(exc), str(exc))

    @app.exception_handler(Exception)
    async def unforeseen(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, f"internal error ({type(exc).__name__}); the server log has the details")
