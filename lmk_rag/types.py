"""Result and settings records returned by the encoder."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .errors import InvalidInputError


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
    setting fields are those :class:`~lmk_rag.settings.EncoderSettings` marks ``fingerprint``,
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
    # The backend, where it changes the vectors ("onnx-int8"); None for PyTorch and fp32 exports.
    backend: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fingerprint as a plain dict (what an index stores)."""
        return asdict(self)

    def to_json(self) -> str:
        """The fingerprint as JSON with sorted keys."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fingerprint:
        """A fingerprint from a stored dict; keys this version does not know are ignored."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
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
        """The encoder settings that rebuild an encoder matching this fingerprint."""
        from .settings import EncoderSettings

        names = set(EncoderSettings.names("fingerprint")) | {"landmark_token_id"}
        settings = {k: v for k, v in self.to_dict().items() if k in names and (v is not None or k == "granularity")}
        if self.backend:  # "onnx-int8": queries must be encoded as the documents were
            settings["backend"], settings["quantize"] = self.backend.split("-", 1)
        return settings


def _norm(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
