"""Every encoder setting, its default and its description, written once.

:class:`EncoderSettings` is the single source: :class:`~lmk_rag.encoder.LMKEncoder` takes its
fields as keyword arguments, the index fingerprint records the ones marked ``fingerprint``, the
pydantic fields of the LangChain and LlamaIndex classes are generated from the ones marked
``framework``, and the command line's encoder options from the ones marked ``cli``. A default
changed here changes everywhere.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from ..errors import InvalidTypeError
from .pooling import LANDMARK_WEIGHTS, POOLING_MODES

POOLINGS = POOLING_MODES
DTYPE_NAMES = ("fp32", "fp16", "bf16")
BACKEND_NAMES = ("torch", "onnx", "openvino")
QUANTIZE_NAMES = ("int8",)
#: What an int8 index records, per backend (the vectors differ with the recipe): ONNX Runtime's
#: dynamic per-channel int8 of the MatMuls only, the fused attention kept in float (the recipe
#: before, recorded "onnx-int8", quantized attention too and moved landmarks more); OpenVINO's
#: NNCF weight compression. Written by :func:`vectors_tag`, read by :func:`tag_settings`.
INT8_TAGS = {"onnx": "onnx-int8-matmul", "openvino": "openvino-int8"}
LAYOUTS = ("lmk", "sentence-transformers")
#: ``granularity`` default: the trained model folder's recorded k, else 32.
FROM_MODEL = "default"

Granularity = int | str | list[int] | None
# The allowed values as types, for the encoder's signature (a test keeps them equal to the tuples).
DType = Literal["fp32", "fp16", "bf16"]
Backend = Literal["torch", "onnx", "openvino"]
Quantize = Literal["int8"]
LayoutName = Literal["lmk", "sentence-transformers"]


T = TypeVar("T")


def setting(
    default: T,
    help: str,
    *,
    cli: bool = True,
    framework: bool = True,
    fingerprint: bool = False,
    choices: tuple[str, ...] | None = None,
) -> T:
    """A field of :class:`EncoderSettings` with where it is exposed."""
    meta = {"help": help, "cli": cli, "framework": framework, "fingerprint": fingerprint, "choices": choices}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class EncoderSettings:
    """The settings of one :class:`~lmk_rag.encoder.LMKEncoder` (as given; the encoder resolves
    ``None`` / ``"default"`` from the model folder)."""

    model: str | None = setting(
        None,
        "Local folder or hub id of the encoder; None is the packaged default (the shipped LMK adapter).",
        fingerprint=True,
    )
    pooling: str | None = setting(
        None,
        "'lmk' (mean of landmark states), 'mean' (all tokens), 'cls', or 'lmk+mean' (each chunk as its unit "
        "landmark state plus its unit token mean); None: the trained model folder's, else 'lmk'.",
        fingerprint=True,
        choices=POOLINGS,
    )
    granularity: Granularity = setting(  # noqa: RUF009 - setting() is field(), as for every field
        FROM_MODEL,
        "Tokens per landmark chunk (int), 'sentence', a list of k drawn per text (variable), or None "
        "(one landmark per window); 'default': the trained model folder's k, else 32.",
        fingerprint=True,
    )
    normalize: bool = setting(True, "L2-normalise the vectors.", fingerprint=True)
    device: str = setting("auto", "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'.")
    dtype: str = setting("fp32", "Precision of the model weights.", choices=DTYPE_NAMES)
    backend: str = setting(
        "torch",
        "Where the forward pass runs: 'torch', or, on CPU, 'onnx' (ONNX Runtime) or 'openvino' (the model is "
        "exported once and cached; pip install 'lmk-rag[onnx]' / 'lmk-rag[openvino]').",
        choices=BACKEND_NAMES,
    )
    quantize: str | None = setting(
        None,
        "'int8' quantizes an exported model (onnx: dynamic int8 of the MatMuls; openvino: NNCF weight "
        "compression); an index records it, since the vectors change.",
        choices=QUANTIZE_NAMES,
    )
    max_length: int | None = setting(
        None,
        "Window length in tokens (default: the model's trained limit); longer texts are encoded in "
        "overlapping windows.",
        fingerprint=True,
    )
    truncate_tokens: int | None = setting(
        None,
        "Optional cap on content tokens per text; longer texts are truncated with a logged warning.",
        fingerprint=True,
    )
    window_overlap: int | None = setting(
        None, "Chunks of context shared by neighbouring windows; None: about a quarter of a window.", fingerprint=True
    )
    batch_size: int = setting(32, "Rows per encoder forward pass.")
    max_batch_tokens: int = setting(16384, "Padded tokens per encoder forward pass (bounds memory).")
    query_prefix: str | None = setting(
        None,
        "Prepended to queries (e.g. 'query: ' for e5); None: the model folder's (a sentence-transformers "
        "'query' prompt, or what lmk-rag saved), else none.",
        fingerprint=True,
    )
    document_prefix: str | None = setting(
        None,
        "Prepended to documents (e.g. 'passage: '); None: the model folder's ('document', 'passage' or "
        "'corpus' prompt), else none.",
        fingerprint=True,
    )
    layout: str | None = setting(
        None,
        "'lmk' ([CLS] c1 [LMK] ... cn [LMK]) or 'sentence-transformers' (the layout of sentence-transformers "
        "PR #3642: the tokenizer's final [SEP] follows and is pooled as one more landmark); None: the model "
        "folder's recorded layout, else 'lmk'.",
        fingerprint=True,
        choices=LAYOUTS,
    )
    landmark_token_id: int | None = setting(
        None, "Landmark token id; None: the trained folder's, else the tokenizer's SEP, else EOS."
    )
    landmark_weights: str | None = setting(
        None,
        "How the single vector ('lmk', 'lmk+mean') weighs a text's landmarks: 'equal' (each the same, as the "
        "paper) or 'tokens' (by its chunk's content tokens, as mean pooling weighs tokens: short texts read "
        "whole); None: the model folder's, else 'equal'.",
        fingerprint=True,
        choices=LANDMARK_WEIGHTS,
    )
    sentence_max_tokens: int = setting(
        64, "With granularity='sentence', longer sentences are split every this many tokens.", fingerprint=True
    )
    sentence_language: str = setting("en", "Language of the sentence splitter (pysbd).", fingerprint=True)
    seed: int = setting(0, "Seed of the per-text k draw of a variable granularity.", cli=False, framework=False)
    show_progress: bool = setting(False, "Show a progress bar while encoding.", cli=False)
    trust_remote_code: bool = setting(False, "Run a model's own Python code (only for models you trust).")
    allow_pickle: bool = setting(False, "Load pickle (.bin) weights, which can run code (only ones you trust).")
    revision: str | None = setting(None, "Hub revision (branch, tag or commit) of the model.")

    @classmethod
    def names(cls, where: str) -> tuple[str, ...]:
        """Field names exposed in ``where``: 'cli', 'framework' or 'fingerprint'."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata[where])

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> EncoderSettings:
        """Settings from keyword arguments; an unknown name is an error that lists the known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        for name in unknown:
            if name in RENAMED_SETTINGS:
                raise InvalidTypeError(
                    f"the encoder setting {name} is now {RENAMED_SETTINGS[name]} (max_tokens names a context's "
                    "token budget only)"
                )
        if unknown:
            raise InvalidTypeError(
                f"unknown encoder setting(s) {', '.join(unknown)}; the settings are: {', '.join(sorted(known))}"
            )
        return cls(**cast("dict[str, Any]", options))  # names checked above; values by the encoder

    def changed(self) -> dict[str, object]:
        """The settings that differ from their defaults."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}


#: Settings renamed so that one name means one thing everywhere: the old name -> the new.
RENAMED_SETTINGS = {"max_tokens": "truncate_tokens"}


def setting_fields() -> list[tuple[dataclasses.Field[object], object]]:
    """Each field with its resolved type (for the framework fields and the CLI options)."""
    hints = typing.get_type_hints(EncoderSettings)
    return [(f, hints[f.name]) for f in dataclasses.fields(EncoderSettings)]


def vectors_tag(backend: str, quantize: str | None) -> str | None:
    """What an index records about the backend: only where it changes the vectors (int8), as
    ``BACKEND-QUANTIZE[-RECIPE]`` (:data:`INT8_TAGS`)."""
    return INT8_TAGS[backend] if quantize else None


def tag_settings(tag: str) -> dict[str, str]:
    """The encoder arguments a recorded :func:`vectors_tag` was written with: ``"onnx-int8-matmul"``
    -> ``backend="onnx", quantize="int8"``. A tag of an earlier recipe names the same two, so its
    index is reopened with today's recipe, and refused by the fingerprint's difference."""
    backend, quantize = tag.split("-")[:2]
    return {"backend": backend, "quantize": quantize}
