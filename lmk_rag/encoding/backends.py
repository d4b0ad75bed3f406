"""Where the encoder's forward pass runs: PyTorch (the default), ONNX Runtime or OpenVINO.

The model lmk-rag loaded (LoRA merged, landmark token set) is exported once to ONNX with the
maintained exporter (``torch.onnx.export``, dynamic batch and length), optimised with ONNX
Runtime's transformer fusions where the architecture has them, and optionally quantized to int8
with ONNX Runtime's dynamic quantizer (``quantize="int8"``: the MatMuls, per channel; the fused
attention stays float), or for OpenVINO with NNCF's weight compression. The files are cached
under ``$LMK_RAG_CACHE`` (default ``~/.cache/lmk-rag``) by a key of the model, its weights and
the library versions, written to a temporary folder first and moved into place whole, so a
failed export leaves nothing half-written. Layout, windows and
pooling stay lmk-rag's: a backend only turns token ids into hidden states.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InvalidInputError, MissingDependencyError, ModelLoadError
from .checksums import file_checksum
from .settings import BACKEND_NAMES, QUANTIZE_NAMES

logger = logging.getLogger(__name__)

BACKENDS = BACKEND_NAMES
QUANTIZE = QUANTIZE_NAMES
# Transformer fusions ONNX Runtime knows, by Hugging Face model_type.
_FUSIONS = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "distilbert": "bert", "mpnet": "bert"}
_EXPORT_LOCK = threading.Lock()
# Part of every cache key: a change to how models are exported or quantized makes new files.
EXPORT_RECIPE = "opset17-eager-ortfused-int8-matmul-per-channel"

HiddenStates = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def check_backend(backend: object, quantize: object) -> tuple[str, str | None]:
    """The backend and quantization checked: a known backend, int8 only on an exported model."""
    if backend not in BACKENDS:
        raise InvalidInputError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if quantize is not None and quantize not in QUANTIZE:
        raise InvalidInputError(f"quantize must be None or one of {QUANTIZE}, got {quantize!r}")
    if quantize is not None and backend == "torch":
        raise InvalidInputError(
            "quantize='int8' runs on an exported model: give backend='onnx' or 'openvino' with it "
            "(pip install 'lmk-rag[onnx]' or 'lmk-rag[openvino]')"
        )
    return backend, quantize


def cache_root() -> Path:
    """Where exported models are cached: ``$LMK_RAG_CACHE``, else ``~/.cache/lmk-rag``."""
    return Path(os.environ.get("LMK_RAG_CACHE") or Path.home() / ".cache" / "lmk-rag").expanduser()


def model_key(*parts: object) -> str:
    """A cache key of the model and the versions that shape its export."""
    import transformers

    text = "|".join(str(p) for p in (*parts, torch.__version__, transformers.__version__))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def load_backend(
    model: torch.nn.Module, backend: str, quantize: str | None, dtype: torch.dtype, key: str
) -> HiddenStates | None:
    """The function that turns (input_ids, attention_mask) into hidden states on ``backend``;
    None for PyTorch (the encoder calls its model itself)."""
    if backend == "torch":
        return None
    _require(backend)
    onnx_path = exported_onnx(model, key, quantize if backend == "onnx" else None)
    threads = torch.get_num_threads()
    if backend == "onnx":
        return _onnx_runner(onnx_path, threads)
    return _openvino_runner(onnx_path, quantize, dtype, threads)


def _require(backend: str) -> None:
    needed = {"onnx": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx")}[backend]
    for module in needed:
        try:
            __import__(module)
        except ImportError as exc:
            raise MissingDependencyError(
                f"backend={backend!r} needs {module}: pip install 'lmk-rag[{backend}]'"
            ) from exc


def exported_onnx(model: torch.nn.Module, key: str, quantize: str | None) -> Path:
    """The model's ONNX file (optimised; int8 when asked), exported once and cached. A cached file
    is used only where its size and SHA-256 match what was recorded when it was written
    (``CHECKSUMS``); a truncated, emptied or overwritten one is exported again."""
    name = "model-int8.onnx" if quantize else "model.onnx"
    folder = _cache_folder(key)
    target = folder / name
    if _intact(folder, name):
        return target
    with _EXPORT_LOCK:
        if _intact(folder, name, warn=False):  # another thread exported it meanwhile
            return target
        _remove_dead_scratch(folder.parent)
        scratch = Path(tempfile.mkdtemp(prefix=f".{key}-{os.getpid()}-", dir=folder.parent))
        try:
            plain = scratch / "model.onnx"
            if _intact(folder, "model.onnx", warn=name != "model.onnx"):
                shutil.copy2(folder / "model.onnx", plain)
            else:
                _export(model, plain)
            if quantize:
                _quantize(plain, scratch / name)
            folder.mkdir(exist_ok=True)
            sums = _read_checksums(folder)
            for produced in sorted(scratch.iterdir()):
                sums[produced.name] = file_checksum(produced)
                os.replace(produced, folder / produced.name)  # each file appears whole or not at all
            _write_checksums(folder, sums)  # last: a file without its record is never trusted
        except MissingDependencyError:
            raise
        except Exception as exc:
            raise ModelLoadError(
                f"could not export the model to ONNX ({type(exc).__name__}: {exc}); use backend='torch' for it"
            ) from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target


CHECKSUMS = "checksums.json"


def _cache_folder(key: str) -> Path:
    """The cache folder of one model's exports, made if needed; a cache that cannot be written (read
    only, or ``$LMK_RAG_CACHE`` naming a file) is one error saying what to set."""
    root = cache_root()
    folder = root / "onnx" / f"{key}-{hashlib.sha256(EXPORT_RECIPE.encode()).hexdigest()[:8]}"
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=folder.parent, prefix=".probe-")  # noqa: SIM115 - closed below
        probe.close()
    except OSError as exc:
        raise ModelLoadError(
            f"the export cache {str(root)!r} cannot be written ({exc.strerror or exc}); set LMK_RAG_CACHE to a "
            "writable folder (exports of the model for backend='onnx' / 'openvino' are kept there)"
        ) from exc
    return folder


def _read_checksums(folder: Path) -> dict[str, Any]:
    try:
        sums = json.loads((folder / CHECKSUMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return sums if isinstance(sums, dict) else {}


def _write_checksums(folder: Path, sums: dict[str, Any]) -> None:
    tmp = folder / f".{CHECKSUMS}.tmp"
    tmp.write_text(json.dumps(sums, indent=1), encoding="utf-8")
    os.replace(tmp, folder / CHECKSUMS)


def _intact(folder: Path, name: str, warn: bool = True) -> bool:
    """Whether the cached ``name`` is the file that was written: recorded, same size, same SHA-256."""
    path = folder / name
    if not path.is_file():
        return False
    recorded = _read_checksums(folder).get(name)
    if isinstance(recorded, dict) and recorded.get("bytes") == path.stat().st_size and file_checksum(path) == recorded:
        return True
    if warn:
        logger.warning("the cached export %s is damaged or unrecorded; exporting the model again", path)
    return False


def _remove_dead_scratch(parent: Path) -> None:
    """Remove the scratch folders of exports whose process is gone (killed part-way)."""
    for scratch in parent.glob(".*-*-*"):
        parts = scratch.name[1:].split("-")
        if not scratch.is_dir() or len(parts) < 3 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(scratch, ignore_errors=True)
        except PermissionError:
            pass  # another user's live process


class _HiddenStates(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden: torch.Tensor = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return hidden


def _export(model: torch.nn.Module, path: Path) -> None:
    logger.info("exporting the encoder to ONNX once: %s", path.parent)
    config: Any = model.config
    previous = getattr(config, "_attn_implementation", None)
    setter = getattr(model, "set_attn_implementation", None)
    try:
        if callable(setter):
            setter("eager")  # a graph ONNX Runtime can fuse; SDPA exports as a slower pattern
        ids = torch.ones(2, 16, dtype=torch.long)
        # The TorchScript exporter's deprecation and tracer notes are nothing a user can act on.
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _HiddenStates(model).float().eval(),
                (ids, torch.ones_like(ids)),
                str(path),
                input_names=["input_ids", "attention_mask"],
                output_names=["hidden"],
                dynamic_axes={name: {0: "batch", 1: "length"} for name in ("input_ids", "attention_mask", "hidden")},
                opset_version=17,
                dynamo=False,
            )
    finally:
        if callable(setter) and previous:
            setter(previous)
    fusion = _FUSIONS.get(getattr(config, "model_type", ""))
    if fusion is not None:
        from onnxruntime.transformers.optimizer import optimize_model

        optimized = optimize_model(
            str(path), model_type=fusion, num_heads=config.num_attention_heads, hidden_size=config.hidden_size
        )
        optimized.save_model_to_file(str(path))


class _QuantizerAdvice(logging.Filter):
    """Drops ONNX Runtime's advice to pre-process a model before quantizing it: it is for static
    quantization (lmk-rag's int8 is dynamic) and nothing a user of lmk-rag can act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _quantize(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    advice, root = _QuantizerAdvice(), logging.getLogger()  # the quantizer logs to the root logger
    root.addFilter(advice)
    try:
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            # Per-tensor scales lose too much precision (docs/results.md, "Where the defaults come from").
            per_channel=True,
            # The fused Attention op stays float: quantizing it too was slower and moved landmarks more.
            op_types_to_quantize=["MatMul"],
            # Fused attention outputs have no inferred type.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        root.removeFilter(advice)


def _feed(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, np.ndarray]:
    return {"input_ids": input_ids.numpy().astype(np.int64), "attention_mask": attention_mask.numpy().astype(np.int64)}


def _onnx_runner(path: Path, threads: int) -> HiddenStates:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(session.run(None, _feed(input_ids, attention_mask))[0])

    return run


def _openvino_runner(path: Path, quantize: str | None, dtype: torch.dtype, threads: int) -> HiddenStates:
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(path))
    if quantize:
        try:
            import nncf
        except ImportError as exc:
            raise MissingDependencyError(
                "backend='openvino' with quantize='int8' compresses weights with NNCF: pip install 'lmk-rag[openvino]'"
            ) from exc
        model = nncf.compress_weights(model)
    precision = "bf16" if dtype == torch.bfloat16 else "f16" if dtype == torch.float16 else "f32"
    compiled = core.compile_model(
        model, "CPU", {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads}
    )
    lock = threading.Lock()  # one compiled model, one request at a time

    def run(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        feed = _feed(input_ids, attention_mask)
        with lock:
            out = compiled(feed)[0]
        return torch.from_numpy(np.asarray(out, dtype=np.float32))

    return run
