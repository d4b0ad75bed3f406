"""Issue #49 item 2: int8 encoders that keep their quality, measured against PyTorch fp32.

Variants (on the ONNX graph lmk-rag exports, fused unless said): ONNX Runtime fp32; its dynamic
per-channel int8 (lmk-rag's ``quantize="int8"`` before), with the FFN output MatMuls and/or the
fused attention kept in float (the "sensitive layers"); static int8 (QDQ on the unfused graph,
per-channel s8 weights, u8 activations calibrated with MinMax on train-domain windows, attention's
activation x activation MatMuls kept in float, the FFN outputs too in one variant); OpenVINO fp32,
NNCF weight compression (lmk-rag's OpenVINO int8) and NNCF post-training quantization with the same
calibration windows (``model_type=TRANSFORMER``: softmax and layer norms stay float, SmoothQuant
and bias correction applied). For each: encode speed vs PyTorch fp32 (fp32 rerun beside each
variant) and the mean / 0.1 % / min cosine of every landmark to its fp32 twin on dev-domain
sections; calibration uses train-domain sections only.

    LMK_DOCS_ROOT=... python research/scripts/int8_static.py --docs 200 --calibration 96
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
import torch

from lmk_rag import LMKEncoder
from lmk_rag.corpora.domains import domains_of, read_domain_pages
from lmk_rag.corpora.rst import query_sections
from lmk_rag.encoding import backends

#: Train domains whose documentation is on this machine (never dev or test).
CALIBRATION_DOMAINS = "cmake,sphinx,zsh,flask,sqlalchemy"


def sections(split: str, n: int, seed: int) -> list[str]:
    pages = [p for d in domains_of(split) for p in read_domain_pages(d)]
    bodies = [page.text[s.start : s.end].strip() for page, s in query_sections(pages, min_body_chars=150)]
    return random.Random(seed).sample(bodies, min(n, len(bodies)))


def captured_batches(enc: LMKEncoder, texts: list[str]) -> list[dict[str, np.ndarray]]:
    """The (input_ids, attention_mask) batches the encoder feeds its model for ``texts``."""
    seen: list[dict[str, np.ndarray]] = []

    def run(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        seen.append(backends._feed(ids, mask))
        return enc.model(input_ids=ids, attention_mask=mask).last_hidden_state

    enc._runner = run
    enc.encode_multi(texts)
    enc._runner = None
    return seen


def ort_runner(path: Path):
    return backends._onnx_runner(path, torch.get_num_threads())  # lmk-rag's own ONNX Runtime session


def ort_static(
    source: Path, target: Path, batches: list[dict[str, np.ndarray]], method: str, keep_float: str = ""
) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(batches)

        def get_next(self):
            return next(self.items, None)

    from onnxruntime.quantization.shape_inference import quant_pre_process

    # Types and shapes of every tensor (the fused graph's contrib ops included), without which the
    # quantizer skips most MatMuls.
    inferred = target.with_suffix(".pre.onnx")
    quant_pre_process(str(source), str(inferred), skip_optimization=True, skip_symbolic_shape=True)
    quantize_static(
        str(inferred),
        str(target),
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,  # u8 activations, s8 weights: what x86 int8 kernels take
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul"],
        # Attention's QK^T and AV, and nodes matching ``keep_float``: kept in float.
        nodes_to_exclude=activation_matmuls(inferred) + matching(inferred, keep_float),
        calibrate_method={"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile}[method],
        extra_options={"CalibPercentile": 99.99},
    )


def activation_matmuls(path: Path) -> list[str]:
    """MatMul nodes with no weight input (attention scores and their mix): the sensitive ones."""
    import onnx

    graph = onnx.load(str(path)).graph
    weights = {t.name for t in graph.initializer}
    return [n.name for n in graph.node if n.op_type == "MatMul" and not any(i in weights for i in n.input)]


def matching(path: Path, pattern: str) -> list[str]:
    """MatMul nodes whose name matches the regular expression ``pattern`` (none for "")."""
    import re

    import onnx

    if not pattern:
        return []
    return [n.name for n in onnx.load(str(path)).graph.node if n.op_type == "MatMul" and re.search(pattern, n.name)]


def ort_dynamic(source: Path, target: Path, keep_float: str, ops: list[str] | None) -> None:
    """lmk-rag's dynamic per-channel int8, with MatMuls matching ``keep_float`` left in float and,
    where ``ops`` is given, only those op types quantized (["MatMul"]: fused Attention stays float)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    excluded = matching(source, keep_float)
    print(f"  kept in float: {len(excluded)} MatMuls by name", flush=True)
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=ops,
        nodes_to_exclude=excluded,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def ov_runner(model, precision: str = "f32"):
    import openvino as ov

    compiled = ov.Core().compile_model(
        model, "CPU", {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": torch.get_num_threads()}
    )
    return lambda ids, mask: torch.from_numpy(np.asarray(compiled(backends._feed(ids, mask))[0], dtype=np.float32))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--calibration", type=int, default=128)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    import nncf
    import openvino as ov

    enc = LMKEncoder(device="cpu")
    texts = sections("dev", args.docs, 0)
    calib = captured_batches(enc, sections(CALIBRATION_DOMAINS, args.calibration, 1))
    print(f"{len(texts)} dev sections; calibration: {len(calib)} batches of train-domain windows", flush=True)
    work = Path(tempfile.mkdtemp(prefix="int8-"))
    fp32_onnx = backends.exported_onnx(enc.model, "int8-probe", None)
    # Static quantization needs every tensor's type: the unfused graph (standard ops only).
    unfused_onnx = work / "unfused.onnx"
    fusions, backends._FUSIONS = backends._FUSIONS, {}
    backends._export(enc.model, unfused_onnx)
    backends._FUSIONS = fusions
    dyn_onnx = work / "dynamic.onnx"
    backends._quantize(fp32_onnx, dyn_onnx)

    def variants():
        yield "onnx fp32", lambda: ort_runner(fp32_onnx)
        yield "onnx dynamic int8", lambda: ort_runner(dyn_onnx)
        for label, keep, ops in [
            ("FFN out in float", r"layer\.\d+/output/dense", None),
            ("attention in float", "", ["MatMul"]),
            ("FFN out and attention in float", r"layer\.\d+/output/dense", ["MatMul"]),
        ]:
            target = work / f"dynamic-{len(keep)}-{ops is None}.onnx"

            def make_dynamic(target=target, keep=keep, ops=ops):
                ort_dynamic(fp32_onnx, target, keep, ops)
                return ort_runner(target)

            yield f"onnx dynamic int8 ({label})", make_dynamic
        # Percentile calibration kept every activation in memory and was killed at 24 GB with 18
        # batches; on a 1-batch trial it was no better than minmax (research/results/int8).
        for method, keep in [("minmax", ""), ("minmax", r"layer\.\d+/output/dense")]:
            target = work / f"static-{method}-{len(keep)}.onnx"

            def make(target=target, method=method, keep=keep):
                ort_static(unfused_onnx, target, calib, method, keep)
                return ort_runner(target)

            yield f"onnx static int8 ({method}{', FFN out in float' if keep else ''})", make
        yield "openvino fp32", lambda: ov_runner(ov.Core().read_model(str(fp32_onnx)))
        yield "openvino weights int8", lambda: ov_runner(nncf.compress_weights(ov.Core().read_model(str(fp32_onnx))))

        def ptq(**kw):
            data = nncf.Dataset(calib)
            return ov_runner(
                nncf.quantize(
                    ov.Core().read_model(str(fp32_onnx)),
                    data,
                    model_type=nncf.ModelType.TRANSFORMER,
                    subset_size=len(calib),
                    **kw,
                )
            )

        yield "openvino nncf int8", ptq
        yield "openvino nncf int8 (mixed)", lambda: ptq(preset=nncf.QuantizationPreset.MIXED)

    def timed_encode(runner) -> tuple[list, float]:
        enc._runner = runner
        enc.encode_multi(texts[:8])  # warm
        t0 = time.perf_counter()
        out = enc.encode_multi(texts)
        seconds = time.perf_counter() - t0
        enc._runner = None
        return out, seconds

    base, base_s = timed_encode(None)
    tokens = sum(m.n_tokens for m in base)
    print(f"torch fp32: {tokens / base_s:.0f} tok/s", flush=True)
    for name, make in variants():
        if args.only and args.only not in name:
            continue
        runner = make()
        out, seconds = timed_encode(runner)
        _, again = timed_encode(None)  # fp32 beside each variant: ratios measured in one stretch
        lm = np.concatenate([np.sum(a.vectors * b.vectors, axis=1) for a, b in zip(base, out)])
        print(
            f"{name:28s} speed x{again / seconds:.2f} fp32  landmark cosine mean {lm.mean():.5f} "
            f"0.1% {np.quantile(lm, 0.001):.5f} min {lm.min():.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
