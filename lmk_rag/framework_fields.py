"""Pydantic fields shared by the LangChain and LlamaIndex classes (imported only by them).

Both frameworks describe components as pydantic models; :class:`LMKEncoderFields` declares one
documented field per :class:`~lmk_rag.encoding.settings.EncoderSettings` setting marked ``framework``
(generated from it, so defaults and descriptions are written once), validates them through the
encoder, and hands out one shared :class:`LMKEncoder` per distinct set of settings, so two
framework objects configured alike use one loaded model. Settings left unset (``pooling``,
``granularity``, ``landmark_token_id``) take a trained model folder's recorded values.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model, model_validator

from .encoder import LMKEncoder
from .encoding.settings import RENAMED_SETTINGS, EncoderSettings, setting_fields

# Shared encoders, least recently used dropped first (one holding a model keeps it alive).
ENCODER_CACHE_SIZE = 8
_ENCODERS: OrderedDict[str, LMKEncoder] = OrderedDict()
_LOCK = threading.Lock()


def shared_encoder(settings: dict[str, Any]) -> LMKEncoder:
    """One LMKEncoder per distinct settings (the loaded model itself is shared by the core)."""
    key = repr(sorted(settings.items()))
    with _LOCK:
        if key in _ENCODERS:
            _ENCODERS.move_to_end(key)
            return _ENCODERS[key]
        encoder = LMKEncoder(**settings)
        _ENCODERS[key] = encoder
        while len(_ENCODERS) > ENCODER_CACHE_SIZE:
            _ENCODERS.popitem(last=False)
        return encoder


def token_counter_field() -> Any:
    """The ``token_counter`` field of every framework class that builds a context."""
    return Field(
        default=None,
        description="Counts the budget's tokens: a callable str -> int, or the folder of a tokenizer.json "
        "(your LLM's); None: the encoder's tokenizer.",
    )


def min_score_field() -> Any:
    """The ``min_score`` field (relevance floor) of every framework class that builds a context."""
    return Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Relevance floor: a passage starts only at a landmark whose cosine similarity to the query "
        "is at least this (the scale of hit.similarity; see lmk_rag.context.OFF_TOPIC_MIN_SCORE); None: no floor.",
    )


def clear_encoder_cache() -> None:
    """Forget the shared encoders (their models are freed once nothing else holds them)."""
    with _LOCK:
        _ENCODERS.clear()


class _EncoderFieldsBase(BaseModel):
    """Validation and the shared encoder; the fields themselves are generated below."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    _encoder: LMKEncoder = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _refuse_renamed(cls, data: object) -> object:
        """An encoder setting given by its old name is refused with its new one (before pydantic's
        generic "extra inputs" error; a class whose own field has that name keeps it)."""
        if isinstance(data, dict):
            for old, new in RENAMED_SETTINGS.items():
                if old in data and old not in cls.model_fields:
                    raise ValueError(f"{old} is now {new} (max_tokens names a context's token budget only)")
        return data

    @model_validator(mode="after")
    def _load_encoder(self) -> _EncoderFieldsBase:
        self._encoder = shared_encoder(self.encoder_settings())
        return self

    def encoder_settings(self) -> dict[str, Any]:
        """The settings this object was given (left-out ones stay the encoder's defaults)."""
        return {name: getattr(self, name) for name in EncoderSettings.names("framework")}

    @property
    def encoder(self) -> LMKEncoder:
        """The shared LMKEncoder behind this object."""
        return self._encoder


def _pydantic_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for f, hint in setting_fields():
        if not f.metadata["framework"]:
            continue
        choices = f.metadata["choices"]
        if choices:
            literal = Literal[choices]  # type: ignore[valid-type]
            hint = literal | None if f.default is None else literal
        fields[f.name] = (hint, Field(default=f.default, description=f.metadata["help"]))
    return fields


if TYPE_CHECKING:
    LMKEncoderFields = _EncoderFieldsBase
else:
    LMKEncoderFields = create_model(
        "LMKEncoderFields", __base__=_EncoderFieldsBase, __module__=__name__, **_pydantic_fields()
    )
    LMKEncoderFields.__doc__ = "Encoder settings as documented pydantic fields (see EncoderSettings)."
