"""Weight interpolation of LMK adapters: exact, loadable, and refused with a clear error when it cannot be."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from lmk_rag import LMKEncoder
from lmk_rag.train import TrainConfig, Trainer, merge_lmk_folders
from tests.cli_runner import run_cli

ROOT = Path(__file__).resolve().parents[1]

SOURCES = {
    "bread.txt": "A sourdough starter is fed daily with flour and water. Grey liquid on top means it is hungry. "
    "Bulk fermentation takes four to six hours at room temperature. Bake at 250 degrees.",
    "bike.txt": "Check tyre pressure every week because tubes lose air slowly. Oil each chain roller once. "
    "Replace a chain stretched by three quarters of a percent. Adjust the barrel a quarter turn.",
    "tides.txt": "Spring tides come at new and full moon when the Sun and Moon line up. Neap tides come at the "
    "quarter moons. The Bay of Fundy has a tidal range of sixteen metres. Storm surges raise the sea.",
}
TEXTS = ["Spring tides come at new and full moon when the Sun and Moon line up. " * 4, "neap tides"]


@pytest.fixture(scope="module")
def two_adapters(tmp_path_factory, tiny_bert_dir):
    """Two LoRA adapters of the tiny model, trained apart (different seeds and ranks)."""
    root = tmp_path_factory.mktemp("adapters")
    texts = root / "texts"
    texts.mkdir()
    for name, text in SOURCES.items():
        (texts / name).write_text(text * 4)
    folders = []
    for seed, rank in ((0, 4), (1, 8)):
        config = TrainConfig(
            output=str(root / f"run{seed}"),
            base_model=str(tiny_bert_dir),
            texts=[str(texts)],
            granularities=[8],
            steps=2,
            batch_size=2,
            lr=5e-2,
            lora_r=rank,
            window_min_tokens=24,
            window_max_tokens=48,
            show_progress=False,
            seed=seed,
        )
        folders.append(Trainer(config).train())
    return folders


def merged_weights(model) -> dict[str, torch.Tensor]:
    return {k: v.float() for k, v in LMKEncoder(model=str(model), device="cpu").model.state_dict().items()}


def test_the_merge_is_the_weighted_sum_of_the_merged_models(tmp_path, two_adapters):
    a, b = two_adapters
    out = merge_lmk_folders([a, b], [0.3, 0.7], tmp_path / "soup")
    wa, wb, ws = merged_weights(a), merged_weights(b), merged_weights(out)
    assert max((0.3 * wa[k] + 0.7 * wb[k] - ws[k]).abs().max().item() for k in ws) < 1e-5
    assert any((wa[k] - wb[k]).abs().max() > 1e-3 for k in ws)  # the two adapters do differ
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter["r"] == 12 and adapter["lora_alpha"] == 12  # ranks add up; scaling folded into B
    record = json.loads((out / "lmk_config.json").read_text())
    assert record["granularity"] == 8
    assert record["training"]["merged_from"] == [{"model": str(a), "weight": 0.3}, {"model": str(b), "weight": 0.7}]


def test_the_merge_records_every_setting_of_its_first_model(tmp_path, two_adapters):
    """The merged folder records the first model's settings, all of them (the window overlap was
    dropped when the merge listed them by hand), with its own training record."""
    import shutil

    a, b = (shutil.copytree(f, tmp_path / f.name) for f in two_adapters)
    config = json.loads((a / "lmk_config.json").read_text())
    config.update(window_overlap=7, max_length=96, query_prefix="q: ", layout="lmk")
    (a / "lmk_config.json").write_text(json.dumps(config))
    record = json.loads((merge_lmk_folders([a, b], [0.5, 0.5], tmp_path / "soup") / "lmk_config.json").read_text())
    for name in ("window_overlap", "max_length", "query_prefix", "layout", "granularity", "landmark_token_id"):
        assert record[name] == config[name], name
    assert record["training"]["merged_from"][0]["model"] == str(a)


def test_a_weight_of_one_gives_that_adapters_vectors(tmp_path, two_adapters):
    a, b = two_adapters
    out = merge_lmk_folders([a, b], [1.0, 0.0], tmp_path / "only-a")
    np.testing.assert_allclose(
        LMKEncoder(model=str(out), device="cpu").encode(TEXTS),
        LMKEncoder(model=str(a), device="cpu").encode(TEXTS),
        atol=1e-6,
    )


def test_a_share_of_the_base_scales_an_adapters_change(tmp_path, two_adapters, tiny_bert_dir):
    # WiSE-FT: W_base + a * delta, the landmark offset scaled alike (it lives in the merged embeddings).
    a, _ = two_adapters
    out = merge_lmk_folders([a], [0.6], tmp_path / "wise", base_weight=0.4)
    w0, wa, ws = merged_weights(tiny_bert_dir), merged_weights(a), merged_weights(out)
    assert set(ws) == set(w0)
    assert max((w0[k] + 0.6 * (wa[k] - w0[k]) - ws[k]).abs().max().item() for k in ws) < 1e-5
    assert any((wa[k] - w0[k]).abs().max() > 1e-3 for k in ws)  # the adapter did change the base
    record = json.loads((out / "lmk_config.json").read_text())
    assert record["training"] == {"merged_from": [{"model": str(a), "weight": 0.6}], "base_weight": 0.4}
    assert json.loads((out / "adapter" / "adapter_config.json").read_text())["r"] == 4
    np.testing.assert_allclose(  # all of the base: the untrained model, read out at its landmarks
        LMKEncoder(model=str(merge_lmk_folders([a], [0.0], tmp_path / "base", base_weight=1.0)), device="cpu").encode(
            TEXTS
        ),
        LMKEncoder(model=str(tiny_bert_dir), device="cpu", pooling="lmk", granularity=8).encode(TEXTS),
        atol=1e-5,
    )


@pytest.mark.parametrize(
    ("weights", "base_weight", "error", "match"),
    [
        ([0.6], 0.6, ValueError, r"weights and base_weight must sum to 1.*plus base_weight 0.6"),
        ([0.6, 0.6], -0.2, ValueError, "base_weight must be a finite number >= 0"),
        ([0.5], float("inf"), ValueError, "base_weight must be a finite number >= 0"),
        ([0.5], "0.5", TypeError, "base_weight must be a number"),
    ],
)
def test_bad_base_weights_are_refused(tmp_path, two_adapters, weights, base_weight, error, match):
    with pytest.raises(error, match=match):
        merge_lmk_folders(list(two_adapters)[: len(weights)], weights, tmp_path / "x", base_weight=base_weight)
    assert not (tmp_path / "x").exists()


def modes(folder: Path) -> set[tuple[bool, int]]:
    return {(p.is_dir(), stat.S_IMODE(p.stat().st_mode)) for p in (folder, *folder.rglob("*"))}


def test_written_folders_have_the_modes_of_plain_files_under_the_umask(tmp_path, two_adapters):
    # safetensors writes 0600 and mkdtemp 0700: a model folder written by one user (a build job)
    # could not be loaded by another (a server). Trainer and merge output follow the umask instead.
    previous = os.umask(0o022)
    try:
        shared = merge_lmk_folders(two_adapters, [0.5, 0.5], tmp_path / "shared")
        os.umask(0o077)
        private = merge_lmk_folders(two_adapters, [0.5, 0.5], tmp_path / "private")
    finally:
        os.umask(previous)
    assert modes(shared) == {(True, 0o755), (False, 0o644)}
    assert modes(private) == {(True, 0o700), (False, 0o600)}
    trained = modes(two_adapters[0])  # the Trainer's own output, under the test process's umask
    assert trained == {(True, 0o777 & ~previous), (False, 0o666 & ~previous)}


def test_the_shipped_model_is_exactly_the_merge_of_its_two_parents(tmp_path):
    """The packaged model is F and T2 merged half and half (its model card says so): redoing the
    merge from their folders (research/models) gives the same weights, and the shipped name merges."""
    from safetensors.torch import load_file

    from lmk_rag.folders.models import SHIPPED_ADAPTER, SHIPPED_ADAPTER_NAME

    parents = ROOT / "research" / "models"
    out = merge_lmk_folders(
        [parents / "all-MiniLM-L6-v2-lmk-v3", parents / "all-MiniLM-L6-v2-lmk"], [0.5, 0.5], tmp_path / "s"
    )
    for name in ("adapter/adapter_model.safetensors", "landmark_delta.safetensors"):
        redone, shipped = load_file(str(out / name)), load_file(str(SHIPPED_ADAPTER / name))
        assert redone.keys() == shipped.keys()
        assert all(torch.allclose(redone[k], shipped[k], atol=1e-7) for k in shipped)
    softer = merge_lmk_folders([SHIPPED_ADAPTER_NAME], [0.75], tmp_path / "w", base_weight=0.25)
    vectors = LMKEncoder(model=str(softer), device="cpu").encode(TEXTS)
    assert np.isfinite(vectors).all() and not np.allclose(vectors, LMKEncoder(device="cpu").encode(TEXTS), atol=1e-4)


@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        ([0.5, 0.6], ValueError, "sum to 1"),
        ([1.5, -0.5], ValueError, r"weights\[1\].*>= 0"),
        ([float("nan"), 1.0], ValueError, r"weights\[0\].*finite"),
        ([1.0], ValueError, "one per model"),
        (["0.5", 0.5], TypeError, r"weights\[0\] must be a number"),
        (0.5, TypeError, "weights must be a list"),
    ],
)
def test_bad_weights_are_refused(tmp_path, two_adapters, weights, error, match):
    with pytest.raises(error, match=match):
        merge_lmk_folders(list(two_adapters), weights, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_models_that_cannot_merge_are_refused(tmp_path, two_adapters, tiny_bert_dir):
    a, b = two_adapters
    with pytest.raises(ValueError, match="two or more"):
        merge_lmk_folders([a], [1.0], tmp_path / "x")
    with pytest.raises(TypeError, match="models must be a list"):
        merge_lmk_folders(str(a), [1.0], tmp_path / "x")
    with pytest.raises(ValueError, match="not an LMK folder"):
        merge_lmk_folders([a, tiny_bert_dir], [0.5, 0.5], tmp_path / "x")
    other = tmp_path / "other-base"
    shutil.copytree(b, other)
    cfg = json.loads((other / "lmk_config.json").read_text())
    (other / "lmk_config.json").write_text(json.dumps({**cfg, "base_model": "some/other-model"}))
    with pytest.raises(ValueError, match="differ in base model"):
        merge_lmk_folders([a, other], [0.5, 0.5], tmp_path / "x")
    full = tmp_path / "full"
    shutil.copytree(b, full)
    shutil.rmtree(full / "adapter")
    with pytest.raises(ValueError, match="fully fine-tuned folders are not supported"):
        merge_lmk_folders([a, full], [0.5, 0.5], tmp_path / "x")
    broken = tmp_path / "broken"
    shutil.copytree(b, broken)
    (broken / "adapter" / "adapter_config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"adapter_config.json' is unreadable .*write the folder again"):
        merge_lmk_folders([a, broken], [0.5, 0.5], tmp_path / "x")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty folder"):
        merge_lmk_folders([a, b], [0.5, 0.5], taken)
    assert (taken / "keep.txt").read_text() == "mine"
    with pytest.raises(ValueError, match=r"is not a model folder .*--overwrite will not replace it"):
        merge_lmk_folders([a, b], [0.5, 0.5], taken, overwrite=True)  # a folder of one's own files is kept
    assert (taken / "keep.txt").read_text() == "mine"
    blend = merge_lmk_folders([a, b], [0.5, 0.5], tmp_path / "blend")
    assert merge_lmk_folders([a, b], [0.7, 0.3], blend, overwrite=True) == blend  # a model folder is replaced
    cwd = os.getcwd()
    try:
        os.chdir(blend)
        with pytest.raises(ValueError, match="working directory or a folder above it"):
            merge_lmk_folders([a, b], [0.5, 0.5], Path("."), overwrite=True)
        with pytest.raises(ValueError, match="working directory or a folder above it"):
            merge_lmk_folders([a, b], [0.5, 0.5], blend.parent, overwrite=True)
    finally:
        os.chdir(cwd)
    assert (blend / "lmk_config.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staging left
    with pytest.raises(ValueError, match="holds a model being merged"):
        merge_lmk_folders([a, b], [0.5, 0.5], a, overwrite=True)
    assert (a / "adapter" / "adapter_model.safetensors").is_file()


def test_merge_command_line(tmp_path, two_adapters):
    a, b = two_adapters
    out = tmp_path / "cli-soup"
    done = run_cli("merge", str(a), str(b), "--weights", "0.25,0.75", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert str(out) in done.stdout
    assert np.isfinite(LMKEncoder(model=str(out), device="cpu").encode(TEXTS)).all()
    bad = run_cli("merge", str(a), str(b), "--weights", "0.5", "--output", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "one per model" in bad.stderr
    wise = tmp_path / "cli-wise"
    done = run_cli("merge", str(a), "--weights", "0.75", "--base-weight", "0.25", "--output", str(wise))
    assert done.returncode == 0, done.stderr
    assert json.loads((wise / "lmk_config.json").read_text())["training"]["base_weight"] == 0.25
