"""Saving an LMKEncoder in formats other tools load.

- ``"lmk"``: lmk-rag's own folder (``lmk_config.json`` + the LoRA adapter and landmark offset
  when the encoder has them; small, needs lmk-rag, peft and the base model to load);
- ``"merged"``: a plain Hugging Face folder (``config.json``, ``model.safetensors``, tokenizer)
  with the adapter and the landmark offset merged into the weights, plus ``lmk_config.json``:
  no peft needed, ``AutoModel.from_pretrained`` loads it, ``LMKEncoder(folder)`` gives the same
  vectors;
- ``"sentence-transformers"``: the merged weights as a ``SentenceTransformer`` folder whose
  modules (``lmk_sentence_transformers.py``, copied in) need no lmk-rag:
  ``SentenceTransformer(folder, trust_remote_code=True).encode(texts)`` equals
  ``LMKEncoder.encode(texts)`` for texts within one window;
- ``"multi-vector"``: the same as a ``MultiVectorEncoder`` folder whose document vectors are the
  landmark vectors (``encode_document``), and whose query vectors are the query's landmarks.

Every format records the prefixes, pooling, landmark weights, k, landmark id, layout and window length, and every
weight file is safetensors.
"""

from __future__ import annotations

import json
import shutil
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidInputError, InvalidTypeError
from ..folders.lmk import ADAPTER_DIR, DELTA_NAME, LMKFolderConfig
from ..folders.st import MODULES_JSON, ST_CONFIG, TRANSFORMER_CONFIG
from ..folders.write import write_folder

if TYPE_CHECKING:
    from ..encoder import LMKEncoder

SaveFormat = Literal["lmk", "merged", "sentence-transformers", "multi-vector"]
SAVE_FORMATS: tuple[SaveFormat, ...] = typing.get_args(SaveFormat)
ST_MODULE_FILE = "lmk_sentence_transformers.py"
_ST_MODULE_SOURCE = Path(__file__).with_name(ST_MODULE_FILE)


def save_encoder(encoder: LMKEncoder, path: str | Path, format: SaveFormat = "lmk", overwrite: bool = False) -> Path:
    """Write ``encoder`` to the folder ``path`` in ``format`` (see the module docstring).

    The folder is written beside its destination and moved into place only when complete, so a
    failed export leaves an existing folder as it was; the encoder's own model folders are never
    overwritten (they may be what is being copied)."""
    if format not in SAVE_FORMATS:
        raise InvalidInputError(f"format must be one of {SAVE_FORMATS}, got {format!r}")
    if not isinstance(path, (str, Path)):
        raise InvalidTypeError(f"path must be a folder path (str), got {type(path).__name__}")
    if format in ("sentence-transformers", "multi-vector"):
        _check_exportable(encoder)
    folder = Path(path).expanduser()

    def write(staging: Path) -> None:
        if format == "lmk":
            _save_lmk(encoder, staging)
        elif format == "merged":
            _save_merged(encoder, staging)
        else:
            _save_sentence_transformers(encoder, staging, multi_vector=format == "multi-vector")

    return write_folder(
        folder, write, overwrite=overwrite, protected=_source_folders(encoder), what="this encoder's own model"
    )


def _source_folders(encoder: LMKEncoder) -> list[Path]:
    """Local folders the encoder's weights and settings were read from."""
    found = [encoder.adapter, encoder.st_folder.model_path if encoder.st_folder else None, encoder.model_name]
    return [Path(p).resolve() for p in found if p and Path(p).is_dir()]


def _save_lmk(encoder: LMKEncoder, folder: Path) -> None:
    """Settings plus the adapter files; a plain model is recorded by its weights' folder or name,
    a fully fine-tuned one ("base_model": ".") carries its (merged) weights."""
    if encoder.adapter is None:  # a sentence-transformers folder may keep its weights in a subfolder
        base = encoder.st_folder.model_path if encoder.st_folder is not None else encoder.model_name
        LMKFolderConfig.from_encoder(encoder, base).save(folder)
        return
    source = Path(encoder.adapter)
    recorded = LMKFolderConfig.load(source)
    if recorded.base_model == ".":
        _save_merged(encoder, folder)
        return
    for name in (ADAPTER_DIR, DELTA_NAME):
        item = source / name
        if item.is_dir():
            shutil.copytree(item, folder / name)
        elif item.is_file():
            shutil.copy2(item, folder / name)
    LMKFolderConfig.from_encoder(encoder, recorded.base_model, recorded.training).save(folder)


def _save_weights(encoder: LMKEncoder, folder: Path) -> None:
    """The in-memory model already has the adapter and landmark offset merged (see
    :func:`~lmk_rag.folders.lmk.apply_adapter`)."""
    from ..folders.models import quiet_loading

    with quiet_loading():
        encoder.model.save_pretrained(str(folder), safe_serialization=True)
    encoder.tokenizer.save_pretrained(str(folder))


def _save_merged(encoder: LMKEncoder, folder: Path) -> None:
    _save_weights(encoder, folder)
    training = LMKFolderConfig.load(Path(encoder.adapter)).training if encoder.adapter else {}
    LMKFolderConfig.from_encoder(encoder, ".", {"merged_from": encoder.model_name, **training}).save(folder)


def _check_exportable(encoder: LMKEncoder) -> None:
    if encoder.pooling not in ("lmk", "mean", "cls"):
        raise InvalidInputError(
            f"pooling={encoder.pooling!r} has no sentence-transformers module; export pooling 'lmk', 'mean' or 'cls'"
        )
    if not isinstance(encoder.granularity, int):
        raise InvalidInputError(
            f"granularity={encoder.granularity!r} cannot be exported to sentence-transformers: its modules "
            "use a fixed k; set granularity=<int>"
        )


def _save_sentence_transformers(encoder: LMKEncoder, folder: Path, multi_vector: bool) -> None:
    import torch

    from .._version import __version__

    _save_weights(encoder, folder)
    shutil.copy2(_ST_MODULE_SOURCE, folder / ST_MODULE_FILE)
    module = ST_MODULE_FILE.removesuffix(".py")
    _write_json(
        folder / TRANSFORMER_CONFIG,
        {
            # sentence-transformers truncates instead of windowing: the longest input the model reads.
            "max_seq_length": max(encoder.max_length, encoder.trained_max_length),
            "landmark_interval": encoder.granularity,
            "train_landmark_interval": None,
            "lmk_token_id": encoder.special.landmark_id,
            "layout": encoder.layout,
            # lmk-rag's windows (LMKEncoder reads them back, so the folder gives the same vectors).
            "lmk_window_length": encoder.max_length,
            "lmk_window_overlap": encoder.window_overlap,
            # The pooled format reproduces those windows itself; multi-vector rows stay one per text.
            "window_long_texts": not multi_vector and encoder.pooling == "lmk" and encoder.layout == "lmk",
        },
    )
    head: dict[str, Any]
    if multi_vector:
        head = {"path": "1_LMKMultiVectorMask", "type": f"{module}.LMKMultiVectorMask"}
        head_config: dict[str, Any] = {"normalize": encoder.normalize}
        model_type, similarity = "MultiVectorEncoder", "maxsim"
    else:
        head = {"path": "1_LMKPooling", "type": f"{module}.LMKPooling"}
        head_config = {
            "word_embedding_dimension": encoder.dimension,
            "pooling_mode": encoder.pooling,
            "normalize": encoder.normalize,
            "landmark_weights": encoder.landmark_weights,
        }
        model_type, similarity = "SentenceTransformer", "cosine"
    (folder / head["path"]).mkdir()
    _write_json(folder / head["path"] / "config.json", head_config)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": f"{module}.LMKTransformer"},
        {"idx": 1, "name": "1", **head},
    ]
    _write_json(folder / MODULES_JSON, modules)
    prompts = {
        name: prefix for name, prefix in (("query", encoder.query_prefix), ("document", encoder.document_prefix))
    }
    _write_json(
        folder / ST_CONFIG,
        {
            "__version__": {"lmk_rag": __version__, "pytorch": torch.__version__},
            "model_type": model_type,
            "prompts": prompts,
            "default_prompt_name": "document" if encoder.document_prefix else None,
            "similarity_fn_name": similarity,
        },
    )
    # lmk-rag reads the folder back natively (no code from it is run); the record says what made it.
    LMKFolderConfig.from_encoder(encoder, ".", {"exported_from": encoder.model_name}).save(folder)


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


__all__ = ["SAVE_FORMATS", "save_encoder"]
