"""Weight-space interpolation of LMK adapters trained on the same base ("model soup", WiSE-FT).

Two adapters trained for different document families (say one on your own documents, one for
documentation in general) often trade one family for the other. Interpolating their weights,
``W = W_base + sum_i w_i * delta_i``, gives a model between them at no training cost, and is often
better than either on a mix. Each LoRA delta is ``s_i * B_i @ A_i`` (``s_i`` the adapter's
scaling), so the weighted sum is itself *exactly* a LoRA of rank ``sum r_i``: ``A`` the stacked
``A_i`` and ``B`` the side-by-side ``w_i * s_i * B_i``, with scaling 1. The landmark offsets are
interpolated with the same weights. A share of the base model itself (``base_weight``: its delta is
zero) moves a fine-tuned adapter back toward the pretrained weights, WiSE-FT's robust interpolation
(Wortsman et al., 2022): ``W_base + a * delta``. The result is an ordinary LMK folder: ``LMKEncoder(model=out)``,
``lmk-rag eval``, ``LMKEncoder.save(format="sentence-transformers")`` all read it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import InvalidInputError, InvalidTypeError, PathNotFoundError
from ..folders.lmk import (
    ADAPTER_CONFIG,
    ADAPTER_DIR,
    ADAPTER_WEIGHTS,
    DELTA_NAME,
    LMKFolderConfig,
    has_lora_adapter,
    is_lmk_folder,
    lora_settings,
)
from ..folders.lora import lora_rank, lora_scaling
from ..folders.models import resolve_model_path
from ..folders.write import check_destination, write_folder

# Adapter settings whose effect the merge cannot reproduce exactly: refused rather than ignored.
_UNSUPPORTED = {"use_dora": "DoRA", "alpha_pattern": "per-module alpha", "rank_pattern": "per-module rank"}


@dataclass(frozen=True)
class _Adapter:
    name: str  # as the user gave it
    folder: Path
    config: LMKFolderConfig
    settings: dict[str, object]  # adapter_config.json
    weights: dict[str, torch.Tensor]
    delta: torch.Tensor

    @property
    def scaling(self) -> float:
        return lora_scaling(self.settings)


def merge_lmk_folders(
    models: Sequence[str | os.PathLike[str]],
    weights: Sequence[float],
    output: str | os.PathLike[str],
    *,
    base_weight: float = 0.0,
    overwrite: bool = False,
) -> Path:
    """Write to ``output`` the LMK folder whose weights are ``base_weight * base + sum_i weights[i] * models[i]``.

    ``models``: LMK folders written by ``lmk-rag train`` (LoRA), or names of shipped adapters, all on
    the same base model with the same landmark token; two or more, or one with ``base_weight > 0``.
    ``weights``: one per model, each >= 0; with ``base_weight`` (>= 0, the untrained base model's
    share) they sum to 1 (an interpolation; 0.5/0.5 is the midpoint; ``[0.8]`` with
    ``base_weight=0.2`` keeps 80% of one adapter's change). Granularity, prefixes, layout and
    readout are taken from the first model. Returns the folder written.
    """
    if isinstance(models, (str, os.PathLike)) or not isinstance(models, Sequence):
        raise InvalidTypeError("models must be a list of two or more LMK folders or shipped adapter names")
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise InvalidTypeError("weights must be a list of numbers, one per model")
    bw = _check_weight("base_weight", base_weight)
    if len(models) < (1 if bw > 0 else 2):
        raise InvalidInputError(
            f"models: merging needs two or more LMK folders, or one with base_weight > 0, got {len(models)}"
        )
    if len(weights) != len(models):
        raise InvalidInputError(f"weights: one per model is needed ({len(models)} models), got {len(weights)}")
    ws = _check_weights(weights, bw)
    out = Path(output).expanduser()
    # Before reading any weights: never over one of the models being merged.
    sources = [Path(m).expanduser() for m in models if isinstance(m, (str, os.PathLike))]
    check_destination(out, overwrite=overwrite, protected=sources, what="a model being merged")
    adapters = [_read(m) for m in models]
    _check_compatible(adapters)

    merged = _merged_lora(adapters, ws)
    delta = sum((w * a.delta for w, a in zip(ws, adapters, strict=True)), torch.zeros_like(adapters[0].delta))
    return write_folder(
        out,
        lambda staging: _write_folder(staging, adapters, ws, bw, merged, delta),
        overwrite=overwrite,
        protected=[a.folder for a in adapters],
        what="a model being merged",
    )


def _check_weight(name: str, w: object) -> float:
    if isinstance(w, bool) or not isinstance(w, (int, float)):
        raise InvalidTypeError(f"{name} must be a number, got {type(w).__name__}")
    if not math.isfinite(w) or w < 0:
        raise InvalidInputError(f"{name} must be a finite number >= 0, got {w!r}")
    return float(w)


def _check_weights(weights: Sequence[float], base_weight: float) -> list[float]:
    ws = [_check_weight(f"weights[{i}]", w) for i, w in enumerate(weights)]
    total = sum(ws) + base_weight
    if abs(total - 1.0) > 1e-6:
        what, given = (
            ("weights and base_weight", f"{ws} plus base_weight {base_weight:g}")
            if base_weight
            else ("weights", f"{ws}")
        )
        raise InvalidInputError(
            f"{what} must sum to 1 (they interpolate between the models), got {given} summing to {total:.6g}"
        )
    return ws


def _read(model: str | os.PathLike[str]) -> _Adapter:
    from safetensors.torch import load_file

    if not isinstance(model, (str, os.PathLike)):
        raise InvalidTypeError(
            f"each model must be a folder path or a shipped adapter name, got {type(model).__name__}"
        )
    path, _ = resolve_model_path(model)
    folder = Path(path)
    if not folder.is_dir():
        raise PathNotFoundError(
            f"model {str(model)!r}: no LMK folder there (hub models cannot be merged; download first)"
        )
    if not is_lmk_folder(folder):
        raise InvalidInputError(
            f"model {str(model)!r} is not an LMK folder (no lmk_config.json): only trained LMK adapters merge"
        )
    adapter = folder / ADAPTER_DIR
    if not has_lora_adapter(folder):
        raise InvalidInputError(
            f"model {str(model)!r} holds no LoRA adapter ({ADAPTER_DIR}/{ADAPTER_WEIGHTS} and {DELTA_NAME}): "
            "merging interpolates LoRA adapters; fully fine-tuned folders are not supported"
        )
    settings = lora_settings(folder)
    if settings.get("peft_type") != "LORA":
        raise InvalidInputError(f"model {str(model)!r}: adapter type {settings.get('peft_type')!r}, only LORA merges")
    for key, what in _UNSUPPORTED.items():
        if settings.get(key):
            raise InvalidInputError(f"model {str(model)!r}: its adapter uses {what}, which merging does not support")
    return _Adapter(
        name=str(model),
        folder=folder,
        config=LMKFolderConfig.load(folder),
        settings=settings,
        weights=load_file(str(adapter / ADAPTER_WEIGHTS)),
        delta=load_file(str(folder / DELTA_NAME))["delta"].float(),
    )


def _check_compatible(adapters: list[_Adapter]) -> None:
    first = adapters[0]
    for a in adapters[1:]:
        for what, mine, theirs in (
            ("base model", a.config.base_model, first.config.base_model),
            ("landmark token id", a.config.landmark_token_id, first.config.landmark_token_id),
            ("pooling", a.config.pooling, first.config.pooling),
        ):
            if mine != theirs:
                raise InvalidInputError(
                    f"models {first.name!r} and {a.name!r} differ in {what} ({theirs!r} vs {mine!r}): "
                    "only adapters of the same base and landmark token merge"
                )
        if set(a.weights) != set(first.weights):
            raise InvalidInputError(
                f"models {first.name!r} and {a.name!r} adapt different modules "
                f"({sorted(set(first.weights) ^ set(a.weights))[:3]}...): train them with the same target modules"
            )
        if a.delta.shape != first.delta.shape:
            raise InvalidInputError(f"models {first.name!r} and {a.name!r} have landmark offsets of different sizes")


def _merged_lora(adapters: list[_Adapter], ws: list[float]) -> dict[str, torch.Tensor]:
    """Exact sum of the weighted deltas as one LoRA of scaling 1: A stacked, B side by side."""
    out: dict[str, torch.Tensor] = {}
    for key, tensor in adapters[0].weights.items():
        if ".lora_A." in key:
            out[key] = torch.cat([a.weights[key].float() for a in adapters], dim=0).to(tensor.dtype)
        elif ".lora_B." in key:
            parts = [w * a.scaling * a.weights[key].float() for w, a in zip(ws, adapters, strict=True)]
            out[key] = torch.cat(parts, dim=1).to(tensor.dtype)
        else:
            raise InvalidInputError(
                f"model {adapters[0].name!r}: adapter weight {key!r} is neither lora_A nor lora_B; "
                "only plain LoRA adapters merge"
            )
    return out


def _write_folder(
    out: Path,
    adapters: list[_Adapter],
    ws: list[float],
    base_weight: float,
    lora: dict[str, torch.Tensor],
    delta: torch.Tensor,
) -> None:
    from safetensors.torch import save_file

    (out / ADAPTER_DIR).mkdir(parents=True)
    rank = sum(lora_rank(a.settings) for a in adapters)
    settings = dict(adapters[0].settings)
    settings.update(r=rank, lora_alpha=rank, use_rslora=False, inference_mode=True)
    (out / ADAPTER_DIR / ADAPTER_CONFIG).write_text(
        json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    save_file({k: v.contiguous() for k, v in lora.items()}, str(out / ADAPTER_DIR / ADAPTER_WEIGHTS))
    save_file({"delta": delta.to(adapters[0].delta.dtype).contiguous()}, str(out / DELTA_NAME))
    first = adapters[0].config
    dataclasses.replace(
        first,
        training={
            "merged_from": [{"model": a.name, "weight": w} for a, w in zip(adapters, ws, strict=True)],
            **({"base_weight": base_weight} if base_weight else {}),
        },
    ).save(out)
