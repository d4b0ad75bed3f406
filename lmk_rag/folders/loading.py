"""Loading a model for the encoder: the settings a model folder records, where an LMK folder's base
weights live, and the process-wide cache that lets encoders of the same settings share one model."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from .._version import __version__
from ..encoding.settings import FROM_MODEL, EncoderSettings
from .lmk import FolderSettings, LMKFolderConfig, apply_adapter, is_lmk_folder
from .models import load_model, load_tokenizer, resolve_model_path, special_tokens
from .st import STFolder
from .write import verify_written_folder

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

# Loaded models shared by encoders of the same settings, least recently used dropped first.
MODEL_CACHE_SIZE = 4
_MODEL_CACHE: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
_MODEL_CACHE_LOCK = threading.Lock()
_WARNED_UNTRAINED: set[str] = set()


def lmk_version() -> str:
    """lmk-rag's version (part of an exported model's cache key)."""
    return __version__


def warn_untrained(model_name: str) -> None:
    """Say once per model that it pools landmarks without having been trained to."""
    if model_name in _WARNED_UNTRAINED:
        return
    _WARNED_UNTRAINED.add(model_name)
    logger.warning(
        "model %s has no LMK training, so pooling='lmk' reads landmark states it never learned to fill "
        "(all-MiniLM-L6-v2 as it comes ranks long pages far below the trained one: docs/results.md); "
        "leave model unset for the "
        "packaged LMK model, use pooling='mean', or train one with `lmk-rag train`",
        model_name,
    )


def load_folder_config(path: str) -> LMKFolderConfig | None:
    """The LMK settings of a folder written by ``lmk-rag train``, or None for a plain model. A folder
    lmk-rag wrote is first checked against its manifest (:func:`~.write.verify_written_folder`)."""
    if Path(path).is_dir():
        verify_written_folder(Path(path))
    return LMKFolderConfig.load(Path(path)) if is_lmk_folder(path) else None


def folder_defaults(folder: LMKFolderConfig | None, st: STFolder | None) -> FolderSettings:
    """Settings a model folder records (an LMK folder, else a sentence-transformers folder's
    LMK keys, prompts and max_seq_length); the encoder takes them for settings left unset."""
    if folder is not None:
        return folder.recorded_settings()
    if st is None:
        return FolderSettings()
    recorded: dict[str, object] = {
        "query_prefix": st.query_prefix,
        "document_prefix": st.document_prefix,
        "max_length": st.window_length or st.max_seq_length,
        "window_overlap": st.window_overlap,
    }
    if st.is_lmk:
        recorded.update(pooling="lmk", landmark_token_id=st.landmark_token_id, landmark_weights=st.landmark_weights)
        recorded["granularity"] = st.granularity if st.granularity is not None else 32
    return cast(FolderSettings, {k: v for k, v in recorded.items() if v is not None})


# Settings a model folder may record, and the built-in value where neither the user nor the folder sets one.
_BUILT_IN = {
    "pooling": "lmk",
    "landmark_weights": "equal",
    "layout": "lmk",
    "landmark_token_id": None,
    "query_prefix": "",
    "document_prefix": "",
    "window_overlap": None,  # None: about a quarter of a window (windows.default_overlap)
}


def fill_from_folder(given: EncoderSettings, recorded: FolderSettings) -> FolderSettings:
    """The folder-recorded settings as the encoder uses them: each given value, else the model
    folder's (:func:`folder_defaults`), else the built-in default; ``granularity="default"`` is the
    folder's k, else 32. Unchecked: the encoder validates them."""
    out: dict[str, object] = {}
    for name, built_in in _BUILT_IN.items():
        value = getattr(given, name)
        if value is None:
            value = recorded.get(name)
        out[name] = built_in if value is None else value
    granularity = given.granularity
    is_default = isinstance(granularity, str) and granularity == FROM_MODEL
    out["granularity"] = recorded.get("granularity", 32) if is_default else granularity
    return cast(FolderSettings, out)


def resolve_base(path: str, folder: LMKFolderConfig) -> str:
    """Where the base weights of an LMK folder live."""
    if folder.base_model == ".":
        return path
    return resolve_model_path(folder.base_model)[0]


def load_shared(
    path: str,
    device: torch.device,
    dtype: torch.dtype,
    trust_remote_code: bool,
    allow_pickle: bool,
    revision: str | None,
    adapter: str | None = None,
    landmark_id: int | None = None,
) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Load (tokenizer, model) once per settings; encoders with the same settings share them.
    The landmark id is part of the key: an adapter's offset is added to that token's embedding."""
    key = (path, str(device), str(dtype), trust_remote_code, allow_pickle, revision, adapter, landmark_id)
    with _MODEL_CACHE_LOCK:
        if key in _MODEL_CACHE:
            _MODEL_CACHE.move_to_end(key)
            return _MODEL_CACHE[key]
        tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code, revision=revision)
        model = load_model(
            path,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_pickle=allow_pickle,
            revision=revision,
        )
        if adapter is not None:
            lmk = special_tokens(tokenizer, landmark_id).landmark_id
            model = apply_adapter(model, Path(adapter), lmk)
        _MODEL_CACHE[key] = (tokenizer, model)
        while len(_MODEL_CACHE) > MODEL_CACHE_SIZE:
            _MODEL_CACHE.popitem(last=False)  # encoders still holding it keep it alive
        return _MODEL_CACHE[key]


def clear_model_cache() -> None:
    """Forget every cached model: memory is freed once no LMKEncoder holds it any more."""
    with _MODEL_CACHE_LOCK:
        _MODEL_CACHE.clear()
