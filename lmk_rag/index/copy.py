"""Move an index between stores without re-encoding: embedded Qdrant Edge to a Qdrant server,
Chroma to Qdrant, and back.

Documents are read in batches with their vectors and written with their ids, so a copy that
stops half-way is finished by running it again (ids are idempotent: nothing is duplicated).
"""

from __future__ import annotations

from tqdm.auto import tqdm

from ..errors import IncompatibleIndexError, InvalidInputError
from .base import MultiVectorIndex


def copy_index(
    source: MultiVectorIndex, destination: MultiVectorIndex, *, batch_size: int = 256, show_progress: bool = False
) -> int:
    """Copy every document of ``source`` (text, metadata, spans, pooled and landmark vectors) into
    ``destination``; returns how many. Both must hold vectors of the same encoder."""
    if source is destination:
        raise InvalidInputError("source and destination are the same index; give another destination")
    if source.folder is not None and destination.folder is not None:
        same_folder = source.folder.resolve() == destination.folder.resolve()
        if same_folder and getattr(source, "collection", None) == getattr(destination, "collection", None):
            raise InvalidInputError(f"source and destination are the same folder {str(source.folder)!r}")
    diffs = source.encoder.fingerprint.differences(destination.encoder.fingerprint)
    if diffs:
        raise IncompatibleIndexError(
            "the destination's encoder differs from the source's (" + "; ".join(diffs) + "); open the "
            "destination with the source's encoder (destination = QdrantIndex(..., encoder=source.encoder))"
        )
    copied = 0
    with tqdm(total=len(source), unit="doc", desc="copy", disable=not show_progress) as bar:
        for batch in source.scan(batch_size):
            docs = [doc for doc, _ in batch]
            destination.add_encoded(
                [multi for _, multi in batch],
                [d.text for d in docs],
                ids=[d.id for d in docs],
                metadatas=[d.metadata for d in docs],
            )
            copied += len(batch)
            bar.update(len(batch))
    return copied
