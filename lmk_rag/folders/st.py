"""Reading sentence-transformers model folders: the settings LMKEncoder takes from them.

Three kinds are understood, all from their JSON files alone (no code in the folder is run):

- plain folders (``Transformer`` + ``Pooling`` [+ ``Normalize``]): the weights' subfolder, the
  prompts of ``config_sentence_transformers.json`` (query / document prefixes) and
  ``max_seq_length`` (window length). Their ``Pooling`` mode is recorded but not imposed:
  LMKEncoder pools landmarks unless ``pooling=`` says otherwise;
- the LMK format of sentence-transformers PR #3642 (``LandmarkTransformer`` + ``Pooling`` with
  ``pooling_mode="lmk"``; ``landmark_interval`` / ``train_landmark_interval`` / ``lmk_token_id``);
- folders written by ``LMKEncoder.save(format="sentence-transformers")`` (``LMKTransformer`` +
  ``LMKPooling``, see :mod:`lmk_rag.export.lmk_sentence_transformers`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..encoding.inputs import is_int_in
from ..encoding.pooling import LANDMARK_WEIGHTS
from ..errors import ModelLoadError

MODULES_JSON = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"
TRANSFORMER_CONFIG = "sentence_bert_config.json"
# Prompt names read as the document prefix, in order of preference.
DOCUMENT_PROMPTS = ("document", "passage", "corpus", "doc")
# The PR's keys for the inference-time and training k; keys its unreleased drafts used instead are refused.
INTERVAL_KEY, TRAIN_INTERVAL_KEY = "landmark_interval", "train_landmark_interval"
DRAFT_KEYS = ("eval_splitter_granularity", "train_splitter_granularity", "splitter_type", "splitter_granularity")


@dataclass(frozen=True)
class STFolder:
    """What a sentence-transformers folder says about encoding with it."""

    model_path: str  # folder holding config.json and the weights
    kind: str  # "plain", "lmk-pr" (PR #3642's format) or "lmk-rag" (written by LMKEncoder.save)
    max_seq_length: int | None
    query_prefix: str | None
    document_prefix: str | None
    pooling: str | None  # "lmk" for the LMK formats; the plain Pooling's mode otherwise
    normalize: bool
    granularity: int | list[int] | None  # inference-time k (LMK formats only)
    train_granularity: int | list[int] | None
    landmark_token_id: int | None
    landmark_weights: str | None = None  # "tokens" when lmk-rag's LMKPooling weighs landmarks by tokens
    # lmk-rag's own window for long texts (its exports; sentence-transformers truncates at max_seq_length).
    window_length: int | None = None
    window_overlap: int | None = None

    @property
    def is_lmk(self) -> bool:
        """Whether the folder pools at landmarks (an lmk-rag export or an LMK pull request folder)."""
        return self.kind != "plain"


def is_st_folder(path: str | Path) -> bool:
    """Whether ``path`` is a sentence-transformers folder (it holds ``modules.json``)."""
    return (Path(path) / MODULES_JSON).is_file()


def read_st_folder(path: str | Path) -> STFolder:
    """Parse ``modules.json`` and the module configs of a sentence-transformers folder."""
    folder = Path(path)
    modules = _read_json(folder / MODULES_JSON)
    if not isinstance(modules, list) or not all(isinstance(m, dict) and "type" in m for m in modules):
        raise ModelLoadError(f"{folder / MODULES_JSON} is not a list of modules with a 'type'; is it a model folder?")
    input_module = next((m for m in modules if _class_name(m).endswith("Transformer")), None)
    if input_module is None:
        types = ", ".join(str(m["type"]) for m in modules)
        raise ModelLoadError(
            f"sentence-transformers folder {str(folder)!r} has no Transformer module (modules: {types}); "
            "LMKEncoder loads Hugging Face encoders only"
        )
    model_dir = _module_dir(folder, input_module)
    transformer = _read_json(model_dir / TRANSFORMER_CONFIG, default={})
    drafts = [key for key in DRAFT_KEYS if key in transformer]
    if drafts:
        raise ModelLoadError(
            f"{model_dir / TRANSFORMER_CONFIG} uses {drafts}, keys of a draft of the sentence-transformers LMK "
            f"format; write {INTERVAL_KEY!r} (and {TRAIN_INTERVAL_KEY!r}) instead"
        )
    if transformer.get("do_lower_case"):
        raise ModelLoadError(
            f"{model_dir / TRANSFORMER_CONFIG} sets do_lower_case=true: LMKEncoder keeps character offsets into the "
            "original text and does not lowercase it; lowercase your texts, or use a tokenizer that lowercases"
        )
    pooling_module = next((m for m in modules if _class_name(m).endswith("Pooling")), None)
    pooling_config = (
        _read_json(_module_dir(folder, pooling_module) / "config.json", default={}) if pooling_module else {}
    )
    pooling = _pooling_mode(pooling_config)
    input_class = _class_name(input_module)
    if input_class == "LMKTransformer":
        kind = "lmk-rag"
    elif input_class == "LandmarkTransformer" or pooling == "lmk":
        kind = "lmk-pr"
    else:
        kind = "plain"
    prompts = _read_json(folder / ST_CONFIG, default={}).get("prompts") or {}
    lmk_id = transformer.get("lmk_token_id", pooling_config.get("lmk_token_id"))
    weights = pooling_config.get("landmark_weights")
    return STFolder(
        model_path=str(model_dir),
        kind=kind,
        max_seq_length=_positive_int(transformer.get("max_seq_length")),
        query_prefix=prompts.get("query"),
        document_prefix=next((prompts[name] for name in DOCUMENT_PROMPTS if name in prompts), None),
        pooling="lmk" if kind != "plain" else pooling,
        normalize=pooling_config.get("normalize", any(_class_name(m) == "Normalize" for m in modules)),
        granularity=_interval(transformer, INTERVAL_KEY) if kind != "plain" else None,
        train_granularity=_interval(transformer, TRAIN_INTERVAL_KEY) if kind != "plain" else None,
        landmark_token_id=lmk_id if isinstance(lmk_id, int) else None,
        landmark_weights=weights if kind == "lmk-rag" and weights in LANDMARK_WEIGHTS else None,
        window_length=_positive_int(transformer.get("lmk_window_length")) if kind == "lmk-rag" else None,
        window_overlap=_non_negative_int(transformer.get("lmk_window_overlap")) if kind == "lmk-rag" else None,
    )


def _class_name(module: dict[str, Any]) -> str:
    return str(module["type"]).rsplit(".", 1)[-1]


def _module_dir(folder: Path, module: dict[str, Any]) -> Path:
    sub = str(module.get("path") or "")
    if "\0" in sub:
        raise ModelLoadError(f"module path {sub!r} in {folder / MODULES_JSON} holds a NUL byte; it is not a file path")
    target = (folder / sub).resolve()
    if folder.resolve() not in (target, *target.parents):
        raise ModelLoadError(f"module path {sub!r} in {folder / MODULES_JSON} leads out of the model folder")
    return target


def _pooling_mode(config: dict[str, Any]) -> str | None:
    """'lmk', 'mean', 'cls', ... from a Pooling config (``pooling_mode`` or the boolean flags)."""
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        return {"mean_tokens": "mean", "cls_token": "cls"}.get(mode, mode)
    flags = {"pooling_mode_lmk": "lmk", "pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
    return next((name for key, name in flags.items() if config.get(key)), None)


def _interval(config: dict[str, Any], key: str) -> int | list[int] | None:
    """``config[key]`` validated as a positive int or a non-empty list of them (None when unset)."""
    value = config.get(key)
    if value is None:
        return None
    ok_int = is_int_in(value, 1)
    ok_list = isinstance(value, list) and value and all(is_int_in(v, 1) for v in value)
    if not (ok_int or ok_list):
        raise ModelLoadError(f"{key}={value!r} in the model folder must be a positive int or a list of them")
    return list(value) if isinstance(value, list) else int(value)


def _positive_int(value: Any) -> int | None:
    return value if is_int_in(value, 1) else None


def _non_negative_int(value: Any) -> int | None:
    return value if is_int_in(value, 0) else None


def _read_json(path: Path, default: Any = None) -> Any:
    if not path.is_file():
        if default is not None:
            return default
        raise ModelLoadError(f"missing {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc
