"""Errors as HTTP answers: the OpenAI shape ``{"error": {"message", "type", "param", "code"}}``,
which OpenAI clients, LangChain and LlamaIndex already read, with the status that says who must act."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import (
    IndexNotFoundError,
    IndexUnavailableError,
    InsufficientSpaceError,
    LMKError,
    MissingDependencyError,
    ReadOnlyIndexError,
)
from .engine import ServerClosingError

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


def _field_of(loc: tuple[str | int, ...]) -> str:
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in ("body", "query", "path") else loc)]
    return ".".join(parts) if parts else "body"


def install_error_handlers(app: FastAPI) -> None:
    """Every failure answers JSON: validation (422 naming the field), HTTP errors (404, 405, ...),
    library errors (:func:`status_of`), and anything unforeseen (500, logged, no traceback sent)."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return error_response(422, f"the body is not valid JSON ({first.get('msg', '')})", "body")
        where = _field_of(tuple(first.get("loc", ("body",))))
        message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        return error_response(422, f"{where}: {message}", where)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}; /docs lists the routes"
        elif exc.status_code == 405 and message == "Method Not Allowed":
            allowed = (exc.headers or {}).get("Allow", "another method")
            message = f"{request.method} is not allowed on {request.url.path}; use {allowed}"
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
