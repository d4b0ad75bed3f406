"""ONNX Runtime and OpenVINO backends: the same vectors (or, for int8, recorded as different),
an export made once and cached whole, and clear errors."""

from __future__ import annotations

import builtins
import dataclasses
import importlib.util
import logging

import numpy as np
import pytest

from lmk_rag import LMKEncoder
from lmk_rag.errors import IncompatibleIndexError, InvalidInputError, MissingDependencyError, ModelLoadError

TEXTS = [
    "Spring tides come at new and full moon, when the Sun and the Moon pull together. " * 12,
    "Kettles descale best with citric acid and warm water.",
    "",
]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LMK_RAG_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _min_cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return float(((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)).min())


def _agreement(reference: LMKEncoder, other: LMKEncoder) -> tuple[float, float]:
    ref, got = reference.encode_multi(TEXTS[:2]), other.encode_multi(TEXTS[:2])
    for r, g in zip(ref, got):
        assert r.spans == g.spans  # layout, windows and pooling stay lmk-rag's
    pooled = min(_min_cos(r.pooled, g.pooled) for r, g in zip(ref, got))
    landmarks = min(_min_cos(r.vectors, g.vectors) for r, g in zip(ref, got))
    return pooled, landmarks


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="pip install 'lmk-rag[onnx]'")
def test_onnx_fp32_gives_the_torch_vectors_and_shares_its_indexes(tiny_bert_dir, cache):
    from lmk_rag.index import QdrantIndex

    torch_enc = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu")
    onnx_enc = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    assert min(_agreement(torch_enc, onnx_enc)) >= 0.9999
    assert onnx_enc.fingerprint.differences(torch_enc.fingerprint) == []  # same vectors: same index
    assert list(cache.glob("onnx/*/model.onnx")) and not list(cache.glob("onnx/.*"))  # whole files, no scratch
    idx = QdrantIndex(location=":memory:", encoder=torch_enc)
    idx.add(TEXTS[:2], ids=["tides", "kettle"])
    assert len(QdrantIndex(client=idx.store.client, encoder=onnx_enc)) == 2
    assert onnx_enc.encode_multi([""])[0].vectors.shape[0] == 1  # an empty text still has its landmark


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="pip install 'lmk-rag[onnx]'")
def test_int8_is_recorded_and_never_mixed_with_fp32_vectors(tiny_bert_dir, monkeypatch, caplog):
    from lmk_rag.encoding import backends
    from lmk_rag.index import QdrantIndex

    fp32 = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    with caplog.at_level(logging.WARNING):
        int8 = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx", quantize="int8")
    assert not [r for r in caplog.records if "quantization" in r.getMessage()]  # no advice meant for static int8
    assert int8.fingerprint.backend == "onnx-int8-matmul"
    assert int8.fingerprint.encoder_settings()["backend"] == "onnx"
    assert int8.fingerprint.encoder_settings()["quantize"] == "int8"
    earlier = dataclasses.replace(int8.fingerprint, backend="onnx-int8")  # an index of the recipe before
    assert earlier.encoder_settings()["quantize"] == "int8"  # reopened with today's int8 ...
    assert earlier.differences(int8.fingerprint) == ["backend: 'onnx-int8' != 'onnx-int8-matmul'"]  # ... refused
    assert min(_agreement(fp32, int8)) > 0.9  # a tiny random model; the shipped one's figures are in the docs
    idx = QdrantIndex(location=":memory:", encoder=fp32)
    idx.add(TEXTS[:2], ids=["tides", "kettle"])
    with pytest.raises(IncompatibleIndexError, match="backend: None != 'onnx-int8-matmul'"):
        QdrantIndex(client=idx.store.client, encoder=int8)

    def no_second_export(*args, **kwargs):
        raise AssertionError("the cached export was not reused")

    monkeypatch.setattr(backends, "_export", no_second_export)
    monkeypatch.setattr(backends, "_quantize", no_second_export)
    again = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx", quantize="int8")
    assert np.allclose(again.encode(TEXTS[:1]), int8.encode(TEXTS[:1]), atol=1e-6)


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="pip install 'lmk-rag[onnx]'")
def test_a_failed_export_leaves_no_half_written_cache(tiny_bert_dir, cache, monkeypatch):
    import torch

    def broken(*args, **kwargs):
        raise RuntimeError("exporter gave up halfway")

    monkeypatch.setattr(torch.onnx, "export", broken)
    with pytest.raises(ModelLoadError, match=r"could not export the model to ONNX .*exporter gave up halfway"):
        LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    assert not [p for p in cache.rglob("*") if p.is_file()]
    assert not list(cache.glob("onnx/.*"))


@pytest.mark.skipif(importlib.util.find_spec("nncf") is None, reason="pip install 'lmk-rag[openvino]'")
def test_openvino_int8_compresses_weights_with_the_extras_nncf_and_is_recorded(tiny_bert_dir):
    fp32 = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="openvino")
    int8 = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="openvino", quantize="int8")
    assert int8.fingerprint.backend == "openvino-int8"
    pooled, landmarks = _agreement(fp32, int8)
    assert min(pooled, landmarks) > 0.9  # a tiny random model; the shipped one's figures are in the docs
    assert not np.allclose(fp32.encode(TEXTS[:1]), int8.encode(TEXTS[:1]), atol=1e-7)  # int8 weights ran


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="pip install 'lmk-rag[openvino]'")
def test_openvino_gives_the_torch_vectors(tiny_bert_dir):
    torch_enc = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu")
    ov = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="openvino")
    assert min(_agreement(torch_enc, ov)) >= 0.9999 and ov.fingerprint.backend is None


def test_bad_backends_and_missing_packages_say_what_to_do(tiny_bert_dir, monkeypatch):
    with pytest.raises(InvalidInputError, match=r"backend must be one of \('torch', 'onnx', 'openvino'\)"):
        LMKEncoder(tiny_bert_dir, backend="tensorrt")
    with pytest.raises(InvalidInputError, match="quantize='int8' runs on an exported model"):
        LMKEncoder(tiny_bert_dir, quantize="int8")
    with pytest.raises(InvalidInputError, match="quantize must be None or one of"):
        LMKEncoder(tiny_bert_dir, backend="onnx", quantize="int4")
    real_import = builtins.__import__

    def without_runtimes(name, *args, **kwargs):
        if name.split(".")[0] in ("onnxruntime", "openvino"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_runtimes)
    with pytest.raises(MissingDependencyError, match=r"pip install 'lmk-rag\[onnx\]'"):
        LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    with pytest.raises(MissingDependencyError, match=r"pip install 'lmk-rag\[openvino\]'"):
        LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="openvino")


def _damage_middle(path) -> None:
    with open(path, "r+b") as handle:  # rows of the embedding matrix, overwritten: still a valid ONNX file
        handle.seek(path.stat().st_size // 2)
        handle.write(b"\x7f" * 4096)


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="pip install 'lmk-rag[onnx]'")
@pytest.mark.parametrize("damage", ["truncated", "empty", "overwritten"])
def test_a_damaged_cached_export_is_noticed_and_exported_again(tiny_bert_dir, cache, damage, caplog):
    import os

    from lmk_rag import clear_model_cache

    torch_enc = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu")
    LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    (cached,) = cache.glob("onnx/*/model.onnx")
    if damage == "truncated":
        os.truncate(cached, cached.stat().st_size // 3)
    elif damage == "empty":
        os.truncate(cached, 0)
    else:
        _damage_middle(cached)
    clear_model_cache()
    again = LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    assert "damaged or unrecorded; exporting the model again" in caplog.text
    assert min(_agreement(torch_enc, again)) >= 0.9999


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="pip install 'lmk-rag[onnx]'")
def test_a_cache_that_cannot_be_written_is_one_clear_error_and_dead_scratch_is_removed(
    tiny_bert_dir, cache, monkeypatch, tmp_path
):
    import subprocess
    import sys

    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    monkeypatch.setenv("LMK_RAG_CACHE", str(a_file))
    with pytest.raises(ModelLoadError, match="set LMK_RAG_CACHE to a writable folder"):
        LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    monkeypatch.setenv("LMK_RAG_CACHE", str(cache))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    scratch = cache / "onnx" / f".somekey-{dead.stdout.strip()}-abc123"  # a killed export's leftovers
    scratch.mkdir(parents=True)
    (scratch / "model.onnx").write_bytes(b"\0" * 1000)
    LMKEncoder(tiny_bert_dir, pooling="mean", device="cpu", backend="onnx")
    assert not scratch.exists()
