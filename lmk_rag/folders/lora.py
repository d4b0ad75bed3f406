"""Folding a LoRA adapter into a model's weights with plain torch, so serving needs no ``peft``.

A LoRA adapter changes each target linear layer by ``scaling * B @ A``; merging adds that product
to the layer's weight once, after which the model is an ordinary one (what peft's
``merge_and_unload`` does, computed the same way: ``W + (B @ A) * scaling``). Training still uses
peft; loading a trained folder does not. Adapters with features this merge cannot reproduce
exactly (DoRA, per-module rank or alpha, trained biases, saved modules) are merged by peft when it
is installed, and refused with the extra to install when it is not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..encoding.inputs import is_int_in
from ..errors import InvalidInputError, MissingDependencyError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# Keys of adapter_config.json whose effect a plain ``W += s * B @ A`` does not reproduce.
_NEEDS_PEFT = {
    "use_dora": "DoRA",
    "alpha_pattern": "per-module alpha",
    "rank_pattern": "per-module rank",
    "modules_to_save": "saved modules",
    "fan_in_fan_out": "transposed (fan_in_fan_out) weights",
}
_PREFIX = "base_model.model."


def lora_rank(settings: Mapping[str, object]) -> int:
    """The adapter's rank ``r`` (``adapter_config.json``), checked."""
    r = settings.get("r")
    if not is_int_in(r, 1):
        raise InvalidInputError(f"adapter_config.json: r must be an int >= 1, got {r!r}; write the folder again")
    return r


def lora_scaling(settings: Mapping[str, object]) -> float:
    """The factor a LoRA's ``B @ A`` is multiplied by: ``alpha / r`` (``alpha / sqrt(r)`` with rsLoRA)."""
    r, alpha = lora_rank(settings), settings.get("lora_alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise InvalidInputError(f"adapter_config.json: lora_alpha must be a number, got {alpha!r}")
    return alpha / math.sqrt(r) if settings.get("use_rslora") else alpha / r


def plain_lora(settings: Mapping[str, object]) -> bool:
    """True when ``merge_lora`` reproduces this adapter exactly (no peft needed)."""
    if settings.get("peft_type") != "LORA" or settings.get("bias", "none") != "none":
        return False
    return not any(settings.get(key) for key in _NEEDS_PEFT)


def merge_lora(model: torch.nn.Module, weights: dict[str, torch.Tensor], settings: Mapping[str, object]) -> None:
    """Add ``scaling * B @ A`` of every adapted layer to ``model``'s weights, in place.

    ``weights`` is an ``adapter_model.safetensors`` as peft writes it (keys
    ``base_model.model.<module>.lora_A.weight`` / ``lora_B.weight``); ``settings`` its
    ``adapter_config.json``. Every key must name a linear layer of ``model`` of matching shape.
    """
    scaling = lora_scaling(settings)
    modules = dict(model.named_modules())
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in weights.items():
        name, _, part = key.rpartition(".lora_")
        if part not in ("A.weight", "B.weight") or not name.startswith(_PREFIX):
            raise InvalidInputError(f"adapter weight {key!r} is not a LoRA A or B matrix; only plain LoRA loads")
        pairs.setdefault(name[len(_PREFIX) :], {})[part[0]] = tensor
    for name, pair in pairs.items():
        layer = modules.get(name)
        weight = getattr(layer, "weight", None)
        if not isinstance(weight, torch.Tensor) or set(pair) != {"A", "B"}:
            raise InvalidInputError(
                f"adapter layer {name!r} is missing from the model, or lacks its A or B matrix: "
                "the adapter was trained on another base model"
            )
        a, b = pair["A"], pair["B"]
        if b.shape[0] != weight.shape[0] or a.shape[1] != weight.shape[1] or a.shape[0] != b.shape[1]:
            raise InvalidInputError(
                f"adapter layer {name!r} has shapes {tuple(b.shape)} @ {tuple(a.shape)} that do not fit the "
                f"model's weight {tuple(weight.shape)}: the adapter was trained on another base model"
            )
        with torch.no_grad():
            delta = (b.to(torch.float32) @ a.to(torch.float32)) * scaling
            weight.add_(delta.to(device=weight.device, dtype=weight.dtype))


def merge_adapter_folder(model: PreTrainedModel, adapter: Path, settings: Mapping[str, object]) -> PreTrainedModel:
    """Merge the peft adapter folder ``adapter`` into ``model``; plain torch where it is exact, else peft."""
    if plain_lora(settings):
        from safetensors.torch import load_file

        merge_lora(model, load_file(str(adapter / "adapter_model.safetensors")), settings)
        return model
    try:
        from peft import PeftModel
    except ImportError as exc:
        used = [what for key, what in _NEEDS_PEFT.items() if settings.get(key)] or [str(settings.get("peft_type"))]
        raise MissingDependencyError(
            f"the adapter in {str(adapter)!r} uses {', '.join(used)}, which only peft can merge: "
            "pip install 'lmk-rag[train]'"
        ) from exc
    from .models import quiet_loading

    with quiet_loading():
        merged: PreTrainedModel = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
        return merged
