"""The shipped model loads without peft, with exactly the weights peft's merge gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lmk_rag import LMKEncoder
from lmk_rag.errors import InvalidInputError, MissingDependencyError
from lmk_rag.folders.lora import merge_adapter_folder, merge_lora, plain_lora
from lmk_rag.folders.models import SHIPPED_ADAPTER, SHIPPED_ADAPTER_NAME, packaged_model_path

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["Spring tides come at new and full moon.", "String inverters last ten to fifteen years. " * 60]
# What indexes built by the shipped model record: loading it another way must not change this.
SHIPPED_FINGERPRINT = {
    "model": SHIPPED_ADAPTER_NAME,
    "adapter": "all-MiniLM-L6-v2-lmk-v4",
    "dimension": 384,
    "pooling": "lmk",
    "granularity": 32,
    "landmark_token_id": 102,
    "landmark_weights": "tokens",
    "max_length": 256,  # the window chosen on the dev domains (lmk_config.json)
    "window_overlap": 0,
}


def _base_model() -> torch.nn.Module:
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(packaged_model_path())).eval()


def test_the_torch_merge_equals_peft_merge_and_unload():
    import peft

    theirs = peft.PeftModel.from_pretrained(_base_model(), str(SHIPPED_ADAPTER / "adapter")).merge_and_unload()
    settings = json.loads((SHIPPED_ADAPTER / "adapter" / "adapter_config.json").read_text())
    assert plain_lora(settings)
    ours = merge_adapter_folder(_base_model(), SHIPPED_ADAPTER / "adapter", settings)
    theirs_state, ours_state = theirs.state_dict(), ours.state_dict()
    assert theirs_state.keys() == ours_state.keys()
    worst = max((theirs_state[k] - ours_state[k]).abs().max().item() for k in theirs_state)
    assert worst <= 1e-6


def test_the_default_encoder_keeps_its_fingerprint_and_vectors_within_1e_5_of_the_peft_path():
    import peft

    encoder = LMKEncoder(device="cpu")
    recorded = encoder.fingerprint.to_dict()
    assert {k: recorded[k] for k in SHIPPED_FINGERPRINT} == SHIPPED_FINGERPRINT
    mine = encoder.encode_multi(TEXTS)
    # The same pipeline over the model as peft merged it before this change.
    model = peft.PeftModel.from_pretrained(_base_model(), str(SHIPPED_ADAPTER / "adapter")).merge_and_unload()
    from safetensors.torch import load_file

    with torch.no_grad():
        model.get_input_embeddings().weight[102] += load_file(str(SHIPPED_ADAPTER / "landmark_delta.safetensors"))[
            "delta"
        ]
    original = encoder.model
    encoder.model = model
    try:
        before = encoder.encode_multi(TEXTS)
    finally:
        encoder.model = original
    for a, b in zip(mine, before, strict=True):
        assert a.spans == b.spans
        assert np.abs(a.vectors - b.vectors).max() <= 1e-5 and np.abs(a.pooled - b.pooled).max() <= 1e-5


@pytest.mark.slow
def test_the_packaged_model_loads_when_peft_cannot_be_imported():
    code = (
        "import sys; sys.modules['peft'] = None\n"  # any `import peft` now fails
        "from lmk_rag import LMKEncoder\n"
        "v = LMKEncoder(device='cpu').encode(['tides follow the moon'])\n"
        "assert v.shape == (1, 384) and 'peft' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('ok')"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_an_adapter_only_peft_can_merge_names_the_extra_when_peft_is_missing(tmp_path, monkeypatch):
    adapter = tmp_path / "adapter"
    shutil.copytree(SHIPPED_ADAPTER / "adapter", adapter)
    settings = json.loads((adapter / "adapter_config.json").read_text())
    settings["use_dora"] = True
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(MissingDependencyError, match=r"DoRA.*lmk-rag\[train\]"):
        merge_adapter_folder(_base_model(), adapter, settings)


def test_an_adapter_for_another_model_is_refused_with_what_does_not_fit():
    settings = {"peft_type": "LORA", "r": 2, "lora_alpha": 2}
    model = _base_model()
    wrong_shape = {
        "base_model.model.encoder.layer.0.attention.self.query.lora_A.weight": torch.zeros(2, 768),
        "base_model.model.encoder.layer.0.attention.self.query.lora_B.weight": torch.zeros(384, 2),
    }
    with pytest.raises(InvalidInputError, match="another base model"):
        merge_lora(model, wrong_shape, settings)
    missing = {
        "base_model.model.decoder.layer.0.q.lora_A.weight": torch.zeros(2, 384),
        "base_model.model.decoder.layer.0.q.lora_B.weight": torch.zeros(384, 2),
    }
    with pytest.raises(InvalidInputError, match="missing from the model"):
        merge_lora(model, missing, settings)
    with pytest.raises(InvalidInputError, match="not a LoRA A or B"):
        merge_lora(model, {"base_model.model.pooler.dense.weight": torch.zeros(384, 384)}, settings)


def test_the_merge_is_scaled_by_alpha_over_rank():
    model = _base_model()
    layer = model.encoder.layer[0].attention.self.query
    before = layer.weight.detach().clone()
    a, b = torch.randn(4, 384), torch.randn(384, 4)
    prefix = "base_model.model.encoder.layer.0.attention.self.query"
    merge_lora(
        model,
        {f"{prefix}.lora_A.weight": a, f"{prefix}.lora_B.weight": b},
        {"peft_type": "LORA", "r": 4, "lora_alpha": 8},
    )
    assert torch.allclose(layer.weight, before + 2.0 * (b @ a), atol=1e-5)
