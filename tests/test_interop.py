"""sentence-transformers interoperability: reading its folders (plain and PR #3642's LMK format),
exporting to it (SentenceTransformer and MultiVectorEncoder folders) and merged weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from lmk_rag import LMKEncoder
from lmk_rag.errors import InvalidInputError, ModelLoadError
from lmk_rag.export.lmk_sentence_transformers import content_capacity

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
WORDS = ["the", "cat", "sat", "on", "mat", "and", "dog", "ran", "to", "park"]


def text_of(tokenizer, n: int) -> str:
    """A text of exactly ``n`` WordPiece tokens."""
    text = " ".join(WORDS[i % len(WORDS)] for i in range(n))
    assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) == n
    return text


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def copy_model(src: Path, dst: Path, sub: str = "") -> Path:
    """The packaged model's weights and tokenizer (no sentence-transformers files) in ``dst/sub``."""
    target = dst / sub
    target.mkdir(parents=True)
    names = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt")
    for name in (*names, "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy2(src / name, target / name)
    return dst


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


# ---------------------------------------------------------------- the PR's LMK format

PR_KEYS = {"landmark_interval": 16, "train_landmark_interval": [16, 32], "lmk_token_id": 102}


def pr_folder(tmp_path: Path, packaged_dir: Path, keys: dict, pooling: dict) -> Path:
    folder = copy_model(packaged_dir, tmp_path / "pr")
    write_json(
        folder / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.LandmarkTransformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    write_json(folder / "sentence_bert_config.json", {"max_seq_length": 256, "do_lower_case": False, **keys})
    write_json(folder / "1_Pooling" / "config.json", {"word_embedding_dimension": 384, **pooling})
    (folder / "2_Normalize").mkdir()
    return folder


def pr_reference(model_dir: Path, text: str, k: int) -> np.ndarray:
    """The PR's encoding, written out by hand: the tokenizer's own [CLS] text [SEP], a landmark
    inserted after every k content tokens, the final [SEP] kept, then the mean of the states at
    the landmark id, L2-normalised."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    ids = tok(text)["input_ids"]
    content = ids[1:-1]
    body = []
    for i in range(0, len(content), k):
        body += content[i : i + k] + [tok.sep_token_id]
    seq = [tok.cls_token_id] + body + [tok.sep_token_id]
    with torch.inference_mode():
        states = model(input_ids=torch.tensor([seq]), attention_mask=torch.ones(1, len(seq))).last_hidden_state[0]
    pooled = states[torch.tensor(seq) == tok.sep_token_id].mean(0)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


@pytest.mark.parametrize("pooling", [{"pooling_mode": "lmk"}, {"pooling_mode_lmk": True, "lmk_token_id": 102}])
def test_pr_format_folder_loads_with_its_settings_and_layout(tmp_path, packaged_dir, bert_tokenizer, pooling):
    folder = pr_folder(tmp_path, packaged_dir, PR_KEYS, pooling)
    ours = LMKEncoder(str(folder), device="cpu")
    assert (ours.pooling, ours.granularity, ours.max_length, ours.layout) == ("lmk", 16, 256, "lmk")
    assert ours.special.landmark_id == 102
    theirs = LMKEncoder(str(folder), device="cpu", layout="sentence-transformers")
    for n in (32, 37):  # a multiple of k and not
        text = text_of(bert_tokenizer, n)
        reference = pr_reference(folder, text, 16)
        assert cosines(theirs.encode([text]), reference)[0] >= 0.9999
        # Our layout differs from the PR's by its final [SEP] alone.
        assert cosines(ours.encode([text]), reference)[0] < 0.9999
        mv_ours, mv_theirs = ours.encode_multi([text])[0], theirs.encode_multi([text])[0]
        assert len(mv_theirs) == len(mv_ours) + 1
        # one more landmark, with an empty span at the end of the text
        assert mv_theirs.spans[-1] == (len(text), len(text))
        assert mv_theirs.spans[:-1] == mv_ours.spans


@pytest.mark.parametrize(
    "keys", [{"eval_splitter_granularity": 16}, {"splitter_type": "fixed", "splitter_granularity": 16}]
)
def test_a_folder_in_a_draft_of_the_pr_format_is_refused_with_the_key_to_write(tmp_path, packaged_dir, keys):
    folder = pr_folder(tmp_path, packaged_dir, keys, {"pooling_mode": "lmk"})
    with pytest.raises(ModelLoadError, match=r"draft of the sentence-transformers LMK format.*'landmark_interval'"):
        LMKEncoder(str(folder), device="cpu")


def test_plain_sentence_transformers_folder_prompts_and_max_seq_length(tmp_path, packaged_dir):
    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "plain"
    shutil.copytree(packaged_dir, folder)
    write_json(folder / "sentence_bert_config.json", {"max_seq_length": 128, "do_lower_case": False})
    write_json(
        folder / "config_sentence_transformers.json",
        {"prompts": {"query": "query: ", "document": "passage: "}, "default_prompt_name": None},
    )
    enc = LMKEncoder(str(folder), device="cpu")
    assert (enc.query_prefix, enc.document_prefix, enc.max_length) == ("query: ", "passage: ", 128)
    assert enc.pooling == "lmk" and enc.st_folder is not None and enc.st_folder.pooling == "mean"
    assert enc.fingerprint.document_prefix == "passage: "
    # Read as the folder's own pooling, the vectors are sentence-transformers' own.
    mean = LMKEncoder(str(folder), device="cpu", pooling="mean", granularity=None)
    st = SentenceTransformer(str(folder), device="cpu")
    texts = ["Landmarks summarise chunks.", "A second, slightly longer text about tides and the moon."]
    assert cosines(mean.encode(texts), st.encode(texts, prompt_name="document")).min() >= 0.9999
    assert cosines(mean.encode_query(texts), st.encode(texts, prompt_name="query")).min() >= 0.9999
    # An explicit setting wins over the folder's.
    assert LMKEncoder(str(folder), device="cpu", query_prefix="", max_length=64).query_prefix == ""


def test_sentence_transformers_folder_with_weights_in_a_subfolder(tmp_path, packaged_dir):
    folder = copy_model(packaged_dir, tmp_path / "old", sub="0_Transformer")
    write_json(
        folder / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ],
    )
    write_json(folder / "0_Transformer" / "sentence_bert_config.json", {"max_seq_length": 200})
    write_json(folder / "1_Pooling" / "config.json", {"pooling_mode_mean_tokens": True})
    enc = LMKEncoder(str(folder), device="cpu")
    assert enc.max_length == 200
    reference = LMKEncoder(str(folder / "0_Transformer"), device="cpu", max_length=200)
    assert cosines(enc.encode(["a text"]), reference.encode(["a text"]))[0] >= 0.9999
    saved = LMKEncoder(str(enc.save(tmp_path / "saved", format="lmk")), device="cpu")  # points at 0_Transformer
    assert saved.max_length == 200 and cosines(saved.encode(["a text"]), enc.encode(["a text"]))[0] >= 0.9999


def test_bad_sentence_transformers_folders_are_named(tmp_path, packaged_dir):
    folder = copy_model(packaged_dir, tmp_path / "lower")
    write_json(folder / "modules.json", [{"idx": 0, "name": "0", "path": "", "type": "x.Transformer"}])
    write_json(folder / "sentence_bert_config.json", {"do_lower_case": True})
    with pytest.raises(ModelLoadError, match="do_lower_case"):
        LMKEncoder(str(folder), device="cpu")
    escape = copy_model(packaged_dir, tmp_path / "escape")
    write_json(escape / "modules.json", [{"idx": 0, "name": "0", "path": "../lower", "type": "x.Transformer"}])
    with pytest.raises(ModelLoadError, match="leads out"):
        LMKEncoder(str(escape), device="cpu")
    nothing = copy_model(packaged_dir, tmp_path / "nothing")
    write_json(nothing / "modules.json", [{"idx": 0, "name": "0", "path": "", "type": "x.CLIPModel"}])
    with pytest.raises(ModelLoadError, match="no Transformer module"):
        LMKEncoder(str(nothing), device="cpu")
    bad_k = pr_folder(tmp_path / "k", packaged_dir, {"landmark_interval": 0}, {"pooling_mode": "lmk"})
    with pytest.raises(ModelLoadError, match="landmark_interval"):
        LMKEncoder(str(bad_k), device="cpu")
    with pytest.raises(InvalidInputError, match="layout"):
        LMKEncoder(device="cpu", layout="colbert")


# ---------------------------------------------------------------- exporting

EXPORT_CHECK = textwrap.dedent(
    """
    import json, logging, sys
    for name in ("lmk_rag", "langchain_lmk", "peft"):  # exported folders must not need them
        sys.modules[name] = None
    import numpy as np, torch
    from sentence_transformers import MultiVectorEncoder, SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    root, texts, long_text, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    warnings = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    logging.getLogger().addHandler(handler)

    st = SentenceTransformer(root + "/st", trust_remote_code=True, device="cpu")
    st_other = SentenceTransformer(root + "/st-other", trust_remote_code=True, device="cpu")
    mve = MultiVectorEncoder(root + "/mv", trust_remote_code=True, device="cpu")
    docs = mve.encode_document(texts)
    # merged: a plain Hugging Face folder; LMK by hand for one short text
    tok = AutoTokenizer.from_pretrained(root + "/merged")
    model = AutoModel.from_pretrained(root + "/merged").eval()
    ids = tok(texts[0], add_special_tokens=False)["input_ids"]
    seq = [tok.cls_token_id]
    for i in range(0, len(ids), 32):
        seq += ids[i : i + 32] + [tok.sep_token_id]
    with torch.inference_mode():
        states = model(input_ids=torch.tensor([seq])).last_hidden_state[0]
    merged = torch.nn.functional.normalize(states[torch.tensor(seq) == tok.sep_token_id].mean(0), dim=-1)
    np.savez(
        out,
        st=st.encode(texts),
        st_other=st_other.encode(texts),
        query=st.encode(["a question about tides"], prompt_name="query"),
        long=st.encode([long_text]),
        long_mv=mve.encode_document([long_text])[0].numpy(),
        mv_query=mve.encode_query(["a question about tides"])[0].numpy(),
        merged=merged.numpy(),
        **{f"doc{i}": d.numpy() for i, d in enumerate(docs)},
    )
    loaded = any(m.startswith("lmk_rag") and sys.modules[m] for m in sys.modules)
    print(json.dumps({"warnings": warnings, "lmk_rag_loaded": loaded}))
    """
)


@pytest.mark.slow
def test_exports_load_without_lmk_rag_and_give_the_same_vectors(tmp_path, encoder, bert_tokenizer):
    texts = [
        text_of(bert_tokenizer, 64),  # a multiple of k
        text_of(bert_tokenizer, 45),
        "Literal [SEP] and </s> in user text are text, not landmarks.",
        "",
        "Tides rise and fall twice a day because the moon pulls the oceans. " * 12,  # > 100 tokens
    ]
    long_text = "Sourdough needs a lively starter and patience. " * 80  # ~800 tokens > one window
    for fmt, sub in (("sentence-transformers", "st"), ("multi-vector", "mv"), ("merged", "merged")):
        encoder.save(tmp_path / sub, format=fmt)
    # The other single-vector weighting of the landmarks than the default's travels too.
    other = "equal" if encoder.landmark_weights == "tokens" else "tokens"
    other_encoder = LMKEncoder(encoder.model_name, device="cpu", landmark_weights=other)
    other_encoder.save(tmp_path / "st-other", format="sentence-transformers")
    assert not (tmp_path / "merged" / "adapter").exists()  # merged: no peft adapter left to apply
    out = tmp_path / "vectors.npz"
    proc = subprocess.run(
        [sys.executable, "-c", EXPORT_CHECK, str(tmp_path), json.dumps(texts), long_text, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not report["lmk_rag_loaded"]
    got = np.load(out)

    assert cosines(got["st"], encoder.encode(texts)).min() >= 0.9999
    assert cosines(got["st_other"], other_encoder.encode(texts)).min() >= 0.9999
    assert cosines(got["st_other"][1], got["st"][1])[0] < 0.99999  # 45 tokens (32 + 13): the weightings differ
    assert cosines(got["query"], encoder.encode_query(["a question about tides"])).min() >= 0.9999
    multi = encoder.encode_multi(texts)
    for i, mv in enumerate(multi):  # document vectors = the landmark vectors, in order
        doc = got[f"doc{i}"]
        assert doc.shape == mv.vectors.shape
        assert cosines(doc, mv.vectors).min() >= 0.9999
    assert got["mv_query"].shape == (1, encoder.dimension)
    assert cosines(got["merged"], encoder.encode(texts[:1]))[0] >= 0.9999
    # Longer than one window: the pooled export encodes it whole in lmk-rag's windows (#46 item 9) ...
    assert cosines(got["long"], encoder.encode([long_text]))[0] >= 0.9999
    # ... while the multi-vector export keeps one row per text: the content that fits the model's
    # whole length, and says so.
    assert any("dropped" in w for w in report["warnings"])
    whole = max(encoder.max_length, encoder.trained_max_length)
    keep = content_capacity(whole, 32, 1, 0)
    truncated = LMKEncoder(device="cpu", truncate_tokens=keep, max_length=whole).encode_multi([long_text])[0]
    assert got["long_mv"].shape == truncated.vectors.shape
    assert cosines(got["long_mv"], truncated.vectors).min() >= 0.9999


def test_merged_and_lmk_folders_load_back_with_the_same_vectors(tmp_path, encoder):
    texts = ["Landmarks summarise chunks in context.", "A second text. " * 40]
    reference = encoder.encode(texts)
    for fmt in ("lmk", "merged", "sentence-transformers"):
        folder = encoder.save(tmp_path / fmt, format=fmt)
        again = LMKEncoder(str(folder), device="cpu")
        assert (again.pooling, again.granularity, again.max_length) == ("lmk", 32, encoder.max_length)
        assert again.landmark_weights == encoder.landmark_weights
        assert cosines(again.encode(texts), reference).min() >= 0.9999, fmt
    assert (tmp_path / "lmk" / "adapter").is_dir() and not (tmp_path / "lmk" / "model.safetensors").exists()
    assert (tmp_path / "merged" / "model.safetensors").is_file() and not (tmp_path / "merged" / "adapter").exists()
    assert not list(tmp_path.rglob("*.bin"))  # safetensors only


def test_prefixes_and_layout_travel_with_every_format(tmp_path, packaged_dir):
    enc = LMKEncoder(str(packaged_dir), device="cpu", query_prefix="q: ", document_prefix="d: ", granularity=16)
    for fmt in ("lmk", "merged", "sentence-transformers"):
        again = LMKEncoder(str(enc.save(tmp_path / fmt, format=fmt)), device="cpu")
        assert (again.query_prefix, again.document_prefix, again.granularity) == ("q: ", "d: ", 16), fmt
    prompts = json.loads((tmp_path / "sentence-transformers" / "config_sentence_transformers.json").read_text())
    assert prompts["prompts"] == {"query": "q: ", "document": "d: "} and prompts["default_prompt_name"] == "document"
    st_layout = LMKEncoder(str(packaged_dir), device="cpu", layout="sentence-transformers")
    folder = st_layout.save(tmp_path / "st-layout", format="sentence-transformers")
    assert json.loads((folder / "sentence_bert_config.json").read_text())["layout"] == "sentence-transformers"
    assert LMKEncoder(str(folder), device="cpu").layout == "sentence-transformers"


def test_save_refuses_what_it_cannot_write(tmp_path, encoder):
    with pytest.raises(InvalidInputError, match="format must be one of"):
        encoder.save(tmp_path / "x", format="onnx")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    with pytest.raises(InvalidInputError, match="overwrite=True"):
        encoder.save(tmp_path / "busy", format="lmk")
    assert (tmp_path / "busy" / "keep.txt").read_text() == "mine"
    variable = LMKEncoder(device="cpu", granularity=[32, 64])
    with pytest.raises(InvalidInputError, match="fixed k"):
        variable.save(tmp_path / "v", format="sentence-transformers")
    mixed = LMKEncoder(device="cpu", pooling="lmk+mean")
    with pytest.raises(InvalidInputError, match="lmk\\+mean"):
        mixed.save(tmp_path / "m", format="multi-vector")
    assert not (tmp_path / "v").exists() and not (tmp_path / "m").exists()
    # A refused export with overwrite=True leaves the existing folder as it was.
    with pytest.raises(InvalidInputError, match="fixed k"):
        variable.save(tmp_path / "busy", format="sentence-transformers", overwrite=True)
    assert (tmp_path / "busy" / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]  # no staging folder left behind


def test_save_never_overwrites_the_encoders_own_folder(tmp_path, encoder):
    folder = encoder.save(tmp_path / "mine", format="lmk")
    loaded = LMKEncoder(str(folder), device="cpu")
    with pytest.raises(InvalidInputError, match="own model"):
        loaded.save(folder, format="merged", overwrite=True)
    assert (folder / "adapter").is_dir()  # the adapter being copied is still there
    replaced = loaded.save(tmp_path / "merged", format="merged")
    again = loaded.save(replaced, format="lmk", overwrite=True)  # a folder it was not loaded from
    assert (again / "adapter").is_dir() and not (again / "model.safetensors").exists()
    assert cosines(LMKEncoder(str(again), device="cpu").encode(["x y"]), encoder.encode(["x y"]))[0] >= 0.9999


def test_token_weighted_export_with_the_pr_layout_gives_the_same_vectors(tmp_path, bert_tokenizer):
    """The PR layout's extra final landmark covers no tokens: both sides give it weight 1."""
    from sentence_transformers import SentenceTransformer

    enc = LMKEncoder(device="cpu", layout="sentence-transformers", landmark_weights="tokens")
    folder = enc.save(tmp_path / "st", format="sentence-transformers")
    config = json.loads((folder / "1_LMKPooling" / "config.json").read_text())
    assert config["landmark_weights"] == "tokens"
    texts = [text_of(bert_tokenizer, 45), text_of(bert_tokenizer, 64), "", "Short."]
    st = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    assert cosines(st.encode(texts), enc.encode(texts)).min() >= 0.9999
    (folder / "lmk_config.json").unlink()  # read as a sentence-transformers folder: the pooling config says it
    assert LMKEncoder(str(folder), device="cpu").landmark_weights == "tokens"


def test_st_module_truncates_by_whole_chunks():
    # [CLS] + 3 chunks of 4 + 3 landmarks = 16 positions; one more would need a 4th landmark.
    assert content_capacity(16, 4, 1, 0) == 12
    assert content_capacity(17, 4, 1, 0) == 12
    assert content_capacity(18, 4, 1, 0) == 13
    assert content_capacity(18, 4, 1, 1) == 12


@pytest.mark.slow
def test_cli_export(tmp_path):
    from .cli_runner import run_cli

    run = lambda *a: run_cli("export", *a)
    ok = run("default", str(tmp_path / "merged"), "--format", "merged")
    assert ok.returncode == 0, ok.stderr
    assert "wrote merged folder" in ok.stdout and (tmp_path / "merged" / "model.safetensors").is_file()
    bad = run("default", str(tmp_path / "v"), "--format", "sentence-transformers", "--granularity", "32,64")
    assert bad.returncode == 2 and "fixed k" in bad.stderr and "Traceback" not in bad.stderr
    again = run("default", str(tmp_path / "merged"), "--format", "merged")
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_layout_is_recorded_and_a_fingerprint_without_it_does_not_match(encoder):
    from lmk_rag.types import Fingerprint

    recorded = encoder.fingerprint.to_dict()
    assert recorded["layout"] == "lmk"
    unrecorded = Fingerprint.from_dict({k: v for k, v in recorded.items() if k != "layout"})
    assert encoder.fingerprint.differences(unrecorded) == ["layout: 'lmk' != None"]
    st = LMKEncoder(device="cpu", layout="sentence-transformers")
    assert any("layout" in d for d in st.fingerprint.differences(encoder.fingerprint))


def test_the_sentence_transformers_export_reproduces_lmk_rags_windows(tmp_path, bert_tokenizer):
    """The packaged model encodes in 256-token windows; the export kept max_seq_length 512 and
    truncated, so texts between 256 and 512 tokens got other vectors (min cosine 0.991, #46 item 9)
    and longer ones lost their end. It now windows as lmk-rag does, at every length."""
    from sentence_transformers import SentenceTransformer

    enc = LMKEncoder(device="cpu")
    folder = enc.save(tmp_path / "st", format="sentence-transformers")
    st = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    texts = [text_of(bert_tokenizer, n) for n in (10, 300, 480, 2000)]
    got = cosines(st.encode(texts, batch_size=3), enc.encode(texts))
    assert got.min() >= 0.9999, got
    assert cosines(st.encode(texts[3:]), enc.encode(texts[3:])).min() >= 0.9999  # alone, not only in a batch
