"""Credentials never printed: the one function every message, log line and recorded command line
passes URIs through."""

from __future__ import annotations

import re

_CREDENTIALS = re.compile(r"(://)\S*@")


def redact_uri(text: str) -> str:
    """``text`` (a URI, or a message holding URIs) with every URI's ``user:password@`` removed, for
    printing. A password may hold ``@``, ``:``, ``%`` or ``/``: everything from ``://`` to the last
    ``@`` before the next blank goes, so a credential is never shown, even in part."""
    return _CREDENTIALS.sub(r"\1", text)
