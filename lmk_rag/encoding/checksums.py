"""File checksums, as runtime caches and written model folders record them in their manifests."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_checksum(path: Path) -> dict[str, int | str]:
    """A file's size and SHA-256, as the manifests of written folders and caches record them."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}
