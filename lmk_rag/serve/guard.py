"""The door of the server, as plain ASGI middleware: metrics for every answer, the API key,
the number of requests in flight, and the size of a request body, each refused with a JSON error
before any work is done."""

from __future__ import annotations

import hmac
import json
import time

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import error_content
from .metrics import ServerMetrics
from .settings import OPEN_PATHS, ServeSettings


class BodyTooLargeError(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit (an HTTPException, so the
    framework's body parsing lets it through as a 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body passes the limit of {limit} bytes (--max-body-mb)")


async def _send_error(
    send: Send, status: int, message: str, param: str | None = None, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(error_content(status, message, param)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """See the module. Routes are labelled in metrics by their template (``/documents/{id}``),
    unknown paths as ``unmatched``, so a scan of random URLs cannot grow the label set."""

    def __init__(self, app: ASGIApp, settings: ServeSettings, metrics: ServerMetrics) -> None:
        self.app = app
        self.settings = settings
        self.metrics = metrics
        self.in_flight = 0
        self._key = settings.api_key.encode() if settings.api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_noting_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        self.in_flight += 1
        self.metrics.in_flight.set(self.in_flight)
        try:
            await self._admit(scope, receive, send_noting_status)
        finally:
            self.in_flight -= 1
            self.metrics.in_flight.set(self.in_flight)
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(route, str(status[0])).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if self._key is not None and path not in OPEN_PATHS and not self._authorised(scope):
            await _send_error(
                send,
                401,
                "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                "authorization",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        if self.in_flight > self.settings.max_concurrent and path != "/health":
            await _send_error(
                send,
                429,
                f"more than {self.settings.max_concurrent} requests in flight; retry after a moment",
                extra=[(b"retry-after", b"1")],
            )
            return
        limit = self.settings.max_body_bytes
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _send_error(
                send, 413, f"the request body is {int(length)} bytes; the limit is {limit} (--max-body-mb)"
            )
            return
        received = 0
        started = [False]

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLargeError(limit)
            return message

        async def noting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
            await send(message)

        try:
            await self.app(scope, counting_receive, noting_send)
        except BodyTooLargeError as exc:
            if not started[0]:
                await _send_error(send, 413, str(exc.detail))

    def _authorised(self, scope: Scope) -> bool:
        assert self._key is not None
        header = dict(scope.get("headers", [])).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key)
