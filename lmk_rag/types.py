"""Result and settings records returned by the encoder, and the page map of paged documents."""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .errors import InvalidInputError

#: A metadata value as every store keeps it: flat and JSON-serialisable.
MetadataValue = str | int | float | bool | None
#: A document's metadata (keys and values checked by the index: ``check_metadata``).
Metadata = dict[str, MetadataValue]


@dataclass(frozen=True)
class MultiVector:
    """One text's landmark vectors.

    ``pooled`` is the single vector (d,), ``vectors`` the per-landmark vectors (m, d), and
    ``spans[i] = (start, end)`` the characters of the original text landmark i covers; the
    spans partition the encoded text in order. ``n_tokens`` counts the content tokens
    encoded, ``dropped_tokens`` those cut by a user-set ``truncate_tokens`` (0 otherwise).
    """

    pooled: np.ndarray
    vectors: np.ndarray
    spans: list[tuple[int, int]]
    n_tokens: int
    dropped_tokens: int = 0
    n_windows: int = 1

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or len(self.vectors) != len(self.spans):
            raise InvalidInputError("vectors must be (m, d) with one span per landmark")

    def __len__(self) -> int:
        return len(self.spans)

    def passage(self, text: str, index: int, neighbours: int = 0) -> str:
        """The text landmark ``index`` covers, widened by ``neighbours`` landmarks each side."""
        lo = max(0, index - neighbours)
        hi = min(len(self.spans) - 1, index + neighbours)
        return text[self.spans[lo][0] : self.spans[hi][1]]


@dataclass(frozen=True)
class Fingerprint:
    """The encoder settings an index must match to stay meaningful; JSON-serialisable. Its
    setting fields are those :class:`~lmk_rag.encoding.settings.EncoderSettings` marks ``fingerprint``,
    with the values the encoder resolved (the model folder's k, the effective window, ...)."""

    model: str
    dimension: int
    pooling: str
    granularity: Any
    landmark_token_id: int
    normalize: bool
    query_prefix: str = ""
    document_prefix: str = ""
    adapter: str | None = None
    max_length: int | None = None
    truncate_tokens: int | None = None
    window_overlap: int | None = None
    sentence_max_tokens: int | None = None
    sentence_language: str | None = None
    layout: str | None = None
    landmark_weights: str = "equal"
    # A digest of a local model folder's weight files (models.weights_digest); None for hub ids.
    weights: str | None = None
    # The backend, where it changes the vectors ("onnx-int8-matmul"); None for PyTorch and fp32 exports.
    backend: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The fingerprint as a plain dict (what an index stores)."""
        return asdict(self)

    def to_json(self) -> str:
        """The fingerprint as JSON with sorted keys."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Fingerprint:
        """A fingerprint from a stored dict; keys this version does not know are ignored."""
        known: dict[str, Any] = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if isinstance(known.get("granularity"), list):
            known["granularity"] = list(known["granularity"])
        return cls(**known)

    def differences(self, other: Fingerprint) -> list[str]:
        """Human-readable list of settings that differ, empty when compatible."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [
            f"{key}: {mine[key]!r} != {theirs[key]!r}"
            for key in mine
            if key != "extra" and _norm(mine[key]) != _norm(theirs[key])
        ]

    def encoder_settings(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~lmk_rag.LMKEncoder` that rebuild an encoder matching
        this fingerprint."""
        from .encoding.settings import EncoderSettings, tag_settings

        names = set(EncoderSettings.names("fingerprint")) | {"landmark_token_id"}
        settings = {k: v for k, v in self.to_dict().items() if k in names and (v is not None or k == "granularity")}
        if self.backend:  # queries must be encoded as the documents were
            settings.update(tag_settings(self.backend))
        return settings


def _norm(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


#: The metadata key holding a paged document's :class:`PageMap` (JSON text: metadata values are flat).
PAGE_MAP_KEY = "page_map"


@dataclass(frozen=True)
class PageMap:
    """Where each page of a paged document (a PDF) begins in its text: page ``i + 1`` starts at
    character ``starts[i]`` and is printed as ``labels[i]`` (roman front matter, "A-3", ...).
    Stored in a document's metadata under :data:`PAGE_MAP_KEY`, so every store keeps it and every
    hit and passage can name its pages."""

    starts: tuple[int, ...]
    labels: tuple[str, ...]

    def to_metadata(self) -> str:
        """The map as the flat metadata value stored with the document."""
        return json.dumps([[s, label] for s, label in zip(self.starts, self.labels)], separators=(",", ":"))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, object]) -> PageMap | None:
        """The map a document's metadata holds; None for documents without pages (or a value
        that is not a page map, e.g. a user's own ``page_map`` key)."""
        value = metadata.get(PAGE_MAP_KEY)
        if not isinstance(value, str):
            return None
        try:
            pairs = json.loads(value)
            starts = tuple(int(s) for s, _ in pairs)
            labels = tuple(str(label) for _, label in pairs)
        except (ValueError, TypeError):
            return None
        return cls(starts, labels) if starts else None

    def pages(self, span: tuple[int, int]) -> tuple[int, ...]:
        """The page numbers (from 1) that the characters ``span[0]:span[1]`` lie on."""
        first = max(bisect.bisect_right(self.starts, span[0]) - 1, 0)
        last = max(bisect.bisect_right(self.starts, max(span[1] - 1, span[0])) - 1, first)
        return tuple(range(first + 1, last + 2))

    def label(self, page: int) -> str:
        """The printed label of page ``page`` (counted from 1)."""
        return self.labels[page - 1]


def pages_of(metadata: Mapping[str, object], span: tuple[int, int]) -> tuple[int, ...]:
    """The pages (from 1) a span of a document lies on; () when the document has no page map."""
    page_map = PageMap.from_metadata(metadata)
    return page_map.pages(span) if page_map is not None else ()


def page_labels_of(metadata: Mapping[str, object], span: tuple[int, int]) -> tuple[str, ...]:
    """The printed labels of the pages a span lies on; () when the document has no page map."""
    page_map = PageMap.from_metadata(metadata)
    return tuple(page_map.label(p) for p in page_map.pages(span)) if page_map is not None else ()


class PagedSpan:
    """The pages of a span of a document: :attr:`pages` and :attr:`page_labels` for whatever
    carries the document's ``metadata`` and a character ``span`` of it (a hit, a context passage)."""

    metadata: Metadata
    span: tuple[int, int]

    @property
    def pages(self) -> tuple[int, ...]:
        """The pages (counted from 1) the span lies on, for documents read with a page map (PDFs);
        () otherwise."""
        return pages_of(self.metadata, self.span)

    @property
    def page_labels(self) -> tuple[str, ...]:
        """The printed labels of :attr:`pages` ("iv", "12"); () for documents without pages."""
        return page_labels_of(self.metadata, self.span)


def page_fields(metadata: Mapping[str, object], span: tuple[int, int]) -> dict[str, int | str]:
    """The page of a span in the frameworks' words: ``page`` counted from 0 (LangChain's PDF
    loaders), ``page_label`` as printed (LlamaIndex's PDF reader); empty for documents without pages."""
    page_map = PageMap.from_metadata(metadata)
    if page_map is None:
        return {}
    first = page_map.pages(span)[0]
    return {"page": first - 1, "page_label": page_map.label(first)}
