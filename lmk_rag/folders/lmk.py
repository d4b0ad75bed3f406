"""LMK model folders: a trained adapter plus the landmark settings to use it with.

Layout of a folder written by ``lmk-rag train``::

    lmk_config.json               base model, pooling, granularity, landmark id, training record
    adapter/                      LoRA adapter as peft writes it (adapter_config.json, adapter_model.safetensors);
                                  merged into the base weights at load time without peft
    landmark_delta.safetensors    trained offset added to the landmark token's input embedding

or, after full fine-tuning or ``LMKEncoder.save(format="merged")``, the whole model (config.json,
model.safetensors, tokenizer) beside ``lmk_config.json`` with ``"base_model": "."``.
``LMKEncoder(model=folder)`` reads it all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

import torch

from ..encoding.settings import Granularity
from ..errors import InvalidInputError, ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from ..encoder import LMKEncoder

CONFIG_NAME = "lmk_config.json"
ADAPTER_DIR = "adapter"
ADAPTER_WEIGHTS = "adapter_model.safetensors"  # inside ADAPTER_DIR, as peft writes it
ADAPTER_CONFIG = "adapter_config.json"
DELTA_NAME = "landmark_delta.safetensors"


class FolderSettings(TypedDict, total=False):
    """The encoder settings a model folder records (an LMK folder's :class:`LMKFolderConfig`, or a
    sentence-transformers folder's keys); a setting left out is not recorded there."""

    pooling: str
    granularity: Granularity
    landmark_token_id: int | None
    query_prefix: str
    document_prefix: str
    layout: str
    max_length: int
    window_overlap: int | None
    landmark_weights: str


@dataclass
class LMKFolderConfig:
    """The settings ``lmk-rag train`` (or ``LMKEncoder.save``) records in a model folder's
    ``lmk_config.json``; the encoder takes them for settings left unset."""

    base_model: str | None  # None: the packaged default base; ".": the folder itself
    pooling: str = "lmk"
    granularity: Granularity = 32
    landmark_token_id: int | None = None
    # Recorded by LMKEncoder.save (None: not recorded, the encoder's defaults apply).
    query_prefix: str | None = None
    document_prefix: str | None = None
    layout: str | None = None
    max_length: int | None = None
    window_overlap: int | None = None
    landmark_weights: str | None = None
    training: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_encoder(
        cls, encoder: LMKEncoder, base_model: str | None, training: Mapping[str, object] | None = None
    ) -> LMKFolderConfig:
        """What a folder of ``encoder``'s model records, so that it loads with the same vectors."""
        return cls(
            base_model=base_model,
            pooling=encoder.pooling,
            granularity=encoder.granularity,
            landmark_token_id=encoder.special.landmark_id,
            query_prefix=encoder.query_prefix,
            document_prefix=encoder.document_prefix,
            layout=encoder.layout,
            max_length=encoder.max_length,
            window_overlap=encoder.window_overlap,
            landmark_weights=encoder.landmark_weights,
            training=dict(training or {}),
        )

    def recorded_settings(self) -> FolderSettings:
        """The encoder settings this folder records (those it leaves None are not recorded; its k
        always is, None meaning no landmarks)."""
        recorded = {
            "pooling": self.pooling,
            "granularity": self.granularity,
            "landmark_token_id": self.landmark_token_id,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
            "layout": self.layout,
            "max_length": self.max_length,
            "window_overlap": self.window_overlap,
            "landmark_weights": self.landmark_weights,
        }
        return cast(FolderSettings, {k: v for k, v in recorded.items() if v is not None or k == "granularity"})

    def save(self, folder: Path) -> None:
        """Write ``lmk_config.json`` into ``folder``."""
        (folder / CONFIG_NAME).write_text(json.dumps(asdict(self), indent=2), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> LMKFolderConfig:
        """Read ``folder``'s ``lmk_config.json`` (keys this version does not know are ignored)."""
        path = folder / CONFIG_NAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot read {str(path)!r} ({exc}); write the model folder again") from exc
        if not isinstance(data, dict) or not isinstance(data.get("base_model"), str):
            raise ModelLoadError(
                f"{str(path)!r} is not an lmk-rag model config (a JSON object naming its base_model); write the "
                "model folder again (lmk-rag export) or restore the file"
            )
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def is_lmk_folder(path: str | Path) -> bool:
    """Whether ``path`` is a model folder lmk-rag wrote (it holds ``lmk_config.json``)."""
    return (Path(path) / CONFIG_NAME).is_file()


def has_lora_adapter(folder: Path) -> bool:
    """The folder holds a LoRA adapter and a landmark offset (``lmk-rag train`` without
    ``--full-finetune``): what continuing a run or merging adapters reads."""
    return (folder / ADAPTER_DIR / ADAPTER_WEIGHTS).is_file() and (folder / DELTA_NAME).is_file()


def apply_adapter(model: PreTrainedModel, folder: Path, landmark_id: int) -> PreTrainedModel:
    """Merge the folder's LoRA adapter into ``model`` (plain torch, see :mod:`lmk_rag.folders.lora`) and add
    the landmark embedding delta."""
    adapter = folder / ADAPTER_DIR
    if adapter.is_dir():
        from .lora import merge_adapter_folder

        model = merge_adapter_folder(model, adapter, lora_settings(folder))
    delta_file = folder / DELTA_NAME
    if delta_file.is_file():
        from safetensors.torch import load_file

        delta = load_file(str(delta_file))["delta"]
        weight = model.get_input_embeddings().weight
        if not isinstance(weight, torch.Tensor):
            raise ModelLoadError(
                f"{folder}: the model's input embeddings have no weight matrix for the landmark offset"
            )
        with torch.no_grad():
            weight[landmark_id] += delta.to(weight.dtype).to(weight.device)
    torch.nn.Module.eval(model)
    return model


def lora_settings(folder: Path) -> dict[str, object]:
    """The LoRA adapter's settings (``adapter/adapter_config.json``: rank, alpha, target modules),
    as continuing a run and merging adapters check them."""
    path = folder / ADAPTER_DIR / ADAPTER_CONFIG
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InvalidInputError(
            f"{str(path)!r} is unreadable ({err}): write the folder again (`lmk-rag train`)"
        ) from err
    if not isinstance(settings, dict):
        raise InvalidInputError(f"{str(path)!r} holds no JSON object: write the folder again (`lmk-rag train`)")
    return {str(k): v for k, v in settings.items()}
