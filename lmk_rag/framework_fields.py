"""Pydantic fields shared by the LangChain and LlamaIndex classes (imported only by them).

Both frameworks describe components as pydantic models; this mixin declares every
encoder setting once, validates it, and hands out one shared :class:`LMKEncoder` per
distinct set of settings, so two framework objects configured alike use one loaded model.
"""

from __future__ import annotations

import threading
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from .encoder import LMKEncoder

_ENCODERS: dict[str, LMKEncoder] = {}
_LOCK = threading.Lock()


def shared_encoder(settings: dict[str, Any]) -> LMKEncoder:
    """One LMKEncoder per distinct settings (the loaded model itself is shared by the core)."""
    key = repr(sorted(settings.items()))
    with _LOCK:
        if key not in _ENCODERS:
            _ENCODERS[key] = LMKEncoder(**settings)
        return _ENCODERS[key]


class LMKEncoderFields(BaseModel):
    """Encoder settings as documented pydantic fields."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: Optional[str] = Field(
        default=None, description="Local folder or hub id of the encoder; None is the packaged default."
    )
    pooling: Literal["lmk", "mean", "cls"] = Field(default="lmk", description="How token states become one vector.")
    granularity: Union[int, Literal["sentence"], list[int], None] = Field(
        default=32, description="Tokens per landmark chunk, 'sentence', a list of k (variable), or None (native)."
    )
    normalize: bool = Field(default=True, description="L2-normalise the vectors.")
    batch_size: int = Field(default=32, gt=0, description="Rows per encoder forward pass.")
    device: str = Field(default="auto", description="'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'.")
    dtype: Literal["fp32", "fp16", "bf16"] = Field(default="fp32", description="Model weights' precision.")
    query_prefix: str = Field(default="", description="Prepended to queries (e.g. 'query: ' for e5).")
    document_prefix: str = Field(default="", description="Prepended to documents (e.g. 'passage: ').")
    max_length: Optional[int] = Field(
        default=None, gt=3, description="Window length in tokens; default the model's. Longer texts use windows."
    )
    max_tokens: Optional[int] = Field(
        default=None, gt=0, description="Optional cap on tokens per text; truncation is logged, never silent."
    )
    window_overlap: Optional[int] = Field(
        default=None, ge=0, description="Chunks of context shared by neighbouring windows; None = about a quarter."
    )
    encoder_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Further LMKEncoder arguments (trust_remote_code, revision, ...)."
    )

    _encoder: LMKEncoder = PrivateAttr()

    @model_validator(mode="after")
    def _load_encoder(self) -> "LMKEncoderFields":
        self._encoder = shared_encoder(self.encoder_settings())
        return self

    def encoder_settings(self) -> dict[str, Any]:
        names = (
            "model", "pooling", "granularity", "normalize", "batch_size", "device", "dtype",
            "query_prefix", "document_prefix", "max_length", "max_tokens", "window_overlap",
        )
        settings = {name: getattr(self, name) for name in names}
        return {**settings, **self.encoder_kwargs}

    @property
    def encoder(self) -> LMKEncoder:
        """The shared LMKEncoder behind this object."""
        return self._encoder
