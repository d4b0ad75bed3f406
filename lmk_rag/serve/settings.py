"""What a server is allowed to take: the limits and switches of ``lmk-rag serve``, checked once."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..encoding.inputs import check_int, check_number
from ..errors import InvalidInputError

#: Paths any client may call without the API key: liveness probes and the API description.
OPEN_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


@dataclass(frozen=True)
class ServeSettings:
    """The limits of one server (the CLI's ``--max-*`` options; defaults follow TEI's where it has one).

    ``max_batch_tokens``: tokens of queued inputs encoded in one forward pass (an input longer than
    that runs alone, in windows). ``max_inputs``: inputs in one request (413 beyond).
    ``max_body_bytes``: request body size (413 beyond). ``max_concurrent``: requests in flight at
    once (429 beyond). ``api_key``: when set, every route but :data:`OPEN_PATHS` wants
    ``Authorization: Bearer KEY``. ``cors_origins``: origins allowed by CORS (none: CORS off).
    ``shutdown_timeout``: seconds in-flight requests get to finish on SIGTERM. ``batch_wait_ms``:
    under concurrent load, the longest the next batch waits for the clients just answered to send
    again (it stops once it is as full as the last), so passes stay full; a lone or sequential
    client never waits."""

    max_batch_tokens: int = 16384
    batch_wait_ms: float = 10.0
    max_inputs: int = 2048
    max_body_bytes: int = 8 * 1024 * 1024
    max_concurrent: int = 512
    api_key: str | None = field(default=None, repr=False)
    cors_origins: tuple[str, ...] = ()
    shutdown_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_batch_tokens", "max_inputs", "max_body_bytes", "max_concurrent"):
            check_int(name, getattr(self, name), 1)
        for name in ("shutdown_timeout", "batch_wait_ms"):
            check_number(name, getattr(self, name), 0)
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key.strip()):
            raise InvalidInputError("api_key must be a non-empty str (or None for no key)")
        if not isinstance(self.cors_origins, tuple) or not all(isinstance(o, str) and o for o in self.cors_origins):
            raise InvalidInputError(
                f"cors_origins must be a tuple of origins such as 'https://app.example', got {self.cors_origins!r}"
            )
