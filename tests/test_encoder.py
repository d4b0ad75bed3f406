"""LMKEncoder on the packaged model and tiny models built from configs."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

from lmk_rag import Fingerprint, LMKEncoder
from lmk_rag.encoding.landmarks import assign_landmarks, plan_windows

from .conftest import SAMPLE_TEXT

DOCS = [
    "Qdrant stores vectors and payloads.",
    SAMPLE_TEXT * 3,
    "Short.",
    "Chroma keeps one row per landmark and groups them back per document. " * 4,
    "",
]


def unit_rows(x: np.ndarray) -> bool:
    return bool(np.isfinite(x).all() and np.allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-5))


def test_encode_shapes_dtype_and_norms(encoder):
    X = encoder.encode(DOCS)
    assert X.shape == (len(DOCS), 384) and X.dtype == np.float32
    assert unit_rows(X)
    q = encoder.encode_query("What stores vectors?")
    assert q.shape == (384,) and unit_rows(q[None])
    assert encoder.encode_query(["a", "b"]).shape == (2, 384)
    assert encoder.encode([]).shape == (0, 384)


def test_results_do_not_depend_on_batching_or_neighbours(encoder):
    together = encoder.encode(DOCS, batch_size=32)
    one_by_one = np.stack([encoder.encode([d])[0] for d in DOCS])
    reversed_ = encoder.encode(DOCS[::-1], batch_size=2)[::-1]
    np.testing.assert_allclose(together, one_by_one, atol=2e-5)
    np.testing.assert_allclose(together, reversed_, atol=2e-5)


def test_pooled_is_mean_of_landmark_vectors(encoder):
    encoder = LMKEncoder(encoder.model_name, device="cpu", landmark_weights="equal")
    raw = encoder.encode_multi(DOCS, normalize=False)
    for mv in raw:
        np.testing.assert_allclose(mv.pooled, mv.vectors.mean(axis=0), atol=1e-5)
    normed = encoder.encode_multi(DOCS)
    for mv, r in zip(normed, raw):
        expected = r.vectors.mean(axis=0)
        np.testing.assert_allclose(mv.pooled, expected / np.linalg.norm(expected), atol=1e-5)
        assert unit_rows(mv.vectors)


def test_token_weighted_single_vector_weighs_each_landmark_by_its_chunk(encoder):
    equal = LMKEncoder(encoder.model_name, device="cpu", landmark_weights="equal")
    tokens = LMKEncoder(encoder.model_name, device="cpu", landmark_weights="tokens")
    words = "tide moon ocean pull rise fall water coast"
    texts = [" ".join([words] * 5), " ".join([words] * 8), *DOCS]  # 40 tokens (32 + 8), 64 (32 + 32)
    _, layout, _ = equal.lay_out(texts)
    assert layout.chunk_sizes[:4].tolist() == [32, 8, 32, 32]
    plain, weighted = equal.encode_multi(texts, normalize=False), tokens.encode_multi(texts, normalize=False)
    for i, (a, b) in enumerate(zip(plain, weighted)):
        np.testing.assert_allclose(b.vectors, a.vectors, atol=1e-6)  # the landmarks themselves do not change
        sizes = np.maximum(layout.chunk_sizes[layout.chunk_offsets[i] : layout.chunk_offsets[i + 1]], 1)
        expected = (a.vectors * sizes[:, None]).sum(axis=0) / sizes.sum()
        np.testing.assert_allclose(b.pooled, expected, atol=1e-5)
    assert not np.allclose(weighted[0].pooled, plain[0].pooled, atol=1e-4)  # 32 + 8: the tail weighs 1/5, not 1/2
    np.testing.assert_allclose(weighted[1].pooled, plain[1].pooled, atol=1e-6)  # equal chunks: the same vector
    assert unit_rows(tokens.encode(texts))
    assert tokens.fingerprint.landmark_weights == "tokens"
    assert any("landmark_weights" in d for d in tokens.fingerprint.differences(equal.fingerprint))
    old_record = {k: v for k, v in equal.fingerprint.to_dict().items() if k != "landmark_weights"}
    assert equal.fingerprint.differences(Fingerprint.from_dict(old_record)) == []  # indexes from before: equal
    assert tokens.fingerprint.differences(Fingerprint.from_dict(old_record)) != []
    # What `lmk-rag search` rebuilds for such an index: the weighting it was built with.
    assert Fingerprint.from_dict(old_record).encoder_settings()["landmark_weights"] == "equal"


def test_lmk_plus_mean_readout_mixes_unit_landmark_and_unit_chunk_mean(encoder):
    mix = LMKEncoder(encoder.model_name, pooling="lmk+mean", device="cpu", landmark_weights="equal")
    lmk = encoder.encode_multi(DOCS, normalize=False)
    mean = LMKEncoder(encoder.model_name, pooling="mean", device="cpu").encode_multi(DOCS, normalize=False)
    raw = mix.encode_multi(DOCS, normalize=False)
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)
    for a, b, m in zip(lmk, mean, raw):
        np.testing.assert_allclose(m.vectors, unit(a.vectors) + unit(b.vectors), atol=1e-5)
        np.testing.assert_allclose(m.pooled, m.vectors.mean(axis=0), atol=1e-5)  # still a mean of landmarks
        assert m.spans == a.spans
    assert all(unit_rows(mv.vectors) for mv in mix.encode_multi(DOCS))
    assert mix.fingerprint.pooling == "lmk+mean"


def test_landmark_states_come_from_landmark_positions(encoder, bert_tokenizer):
    """Compute the landmark states by hand from the reference layout."""
    tok = bert_tokenizer
    text = SAMPLE_TEXT
    ids = tok(text, add_special_tokens=False)["input_ids"]
    seq = [tok.cls_token_id]
    positions = []
    for i in range(0, len(ids), 32):
        seq += ids[i : i + 32] + [tok.sep_token_id]
        positions.append(len(seq) - 1)
    with torch.inference_mode():
        hidden = encoder.model(input_ids=torch.tensor([seq])).last_hidden_state[0]
    mv = encoder.encode_multi([text], normalize=False)[0]
    np.testing.assert_allclose(mv.vectors, hidden[positions].numpy(), atol=1e-5)


def test_mean_native_layout_matches_sentence_transformers(packaged_dir):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(packaged_dir), device="cpu")
    enc = LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", pooling="mean", granularity=None, device="cpu")
    texts = DOCS[:4]
    np.testing.assert_allclose(enc.encode(texts), st.encode(texts), atol=1e-5)


def test_cls_pooling_reads_position_zero(encoder, bert_tokenizer):
    enc = LMKEncoder(pooling="cls", normalize=False, device="cpu")
    tok = bert_tokenizer
    ids = [tok.cls_token_id] + tok("Short.", add_special_tokens=False)["input_ids"] + [tok.sep_token_id]
    with torch.inference_mode():
        cls = enc.model(input_ids=torch.tensor([ids])).last_hidden_state[0, 0].numpy()
    np.testing.assert_allclose(enc.encode(["Short."])[0], cls, atol=1e-5)


def test_pooling_modes_differ(encoder):
    text = [SAMPLE_TEXT * 2]
    vecs = {p: LMKEncoder(pooling=p, device="cpu").encode(text)[0] for p in ("lmk", "mean", "cls")}
    assert not np.allclose(vecs["lmk"], vecs["mean"]) and not np.allclose(vecs["lmk"], vecs["cls"])


def test_long_document_windows_drop_no_token(encoder, bert_tokenizer):
    text = " ".join(f"token{i} is number {i}." for i in range(900))
    n = len(bert_tokenizer(text, add_special_tokens=False)["input_ids"])
    assert n > 5000
    mv = encoder.encode_multi([text])[0]
    assert mv.n_tokens == n and mv.dropped_tokens == 0
    assert len(mv) == math.ceil(n / 32) and mv.n_windows > 1
    assert mv.spans[0][0] == 0 and mv.spans[-1][1] == len(text)
    assert "".join(text[a:b] for a, b in mv.spans) == text
    assert unit_rows(mv.vectors) and unit_rows(mv.pooled[None])


def test_windowed_landmarks_equal_hand_built_windows(tiny_bert_dir, bert_tokenizer):
    """Each landmark vector equals its state in the most central window, built by hand."""
    tok = bert_tokenizer
    enc = LMKEncoder(tiny_bert_dir, granularity=8, window_overlap=2, normalize=False, device="cpu")
    text = " ".join(f"w{i}" for i in range(200))
    ids = tok(text, add_special_tokens=False)["input_ids"]
    chunks = [ids[i : i + 8] for i in range(0, len(ids), 8)]
    chunk_len = np.array([len(c) + 1 for c in chunks])
    windows = plan_windows(chunk_len, enc.max_length - 1, 2)
    owner = assign_landmarks(chunk_len, windows)
    assert len(windows) > 2
    mv = enc.encode_multi([text])[0]
    assert mv.n_windows == len(windows)
    for w, (a, b) in enumerate(windows):
        seq, pos = [tok.cls_token_id], []
        for c in range(a, b):
            seq += chunks[c] + [tok.sep_token_id]
            pos.append(len(seq) - 1)
        with torch.inference_mode():
            hidden = enc.model(input_ids=torch.tensor([seq])).last_hidden_state[0]
        for j, c in enumerate(range(a, b)):
            if owner[c] == w:
                np.testing.assert_allclose(mv.vectors[c], hidden[pos[j]].numpy(), atol=1e-5)


def test_max_tokens_truncates_and_says_so(tiny_bert_dir, caplog):
    enc = LMKEncoder(tiny_bert_dir, truncate_tokens=10, device="cpu")
    text = "alpha beta gamma delta " * 10
    with caplog.at_level(logging.WARNING, logger="lmk_rag"):
        mv = enc.encode_multi([text, "short"])
    assert mv[0].n_tokens == 10 and mv[0].dropped_tokens == 30 and mv[1].dropped_tokens == 0
    assert mv[0].spans[-1][1] < len(text)
    assert "truncated 1 of 2 texts" in caplog.text


def test_prefixes(tiny_bert_dir):
    plain = LMKEncoder(tiny_bert_dir, device="cpu")
    e5 = LMKEncoder(tiny_bert_dir, query_prefix="query: ", document_prefix="passage: ", device="cpu")
    assert not np.allclose(plain.encode_query("what"), e5.encode_query("what"))
    text = "the passage text"
    mv = e5.encode_multi([text])[0]
    assert mv.spans == [(0, len(text))]
    np.testing.assert_allclose(e5.encode_query("x"), plain.encode(["query: x"])[0], atol=1e-6)


def test_hostile_inputs_give_finite_unit_vectors(encoder):
    texts = [
        "   \n\t ",
        "\x00\x01\x07\x1b[31m control",
        "🚀🔥👩‍👩‍👧‍👦" * 30,
        "English, 中文, العربية, русский, हिन्दी",
        "[SEP]" * 50,
    ]
    X = encoder.encode(texts)
    assert unit_rows(X)
    for mv, text in zip(encoder.encode_multi(texts), texts):
        assert unit_rows(mv.vectors) and mv.spans[-1][1] == len(text)


@pytest.mark.slow
def test_one_megabyte_string(tiny_bert_dir):
    enc = LMKEncoder(tiny_bert_dir, device="cpu", max_batch_tokens=65536)
    text = ("Ein Satz, a sentence 🚀, 一句话. " * 40000)[: 1 << 20]
    mv = enc.encode_multi([text])[0]
    assert unit_rows(mv.pooled[None]) and unit_rows(mv.vectors)
    assert mv.spans[-1][1] == len(text) and mv.dropped_tokens == 0


def test_pad_eos_and_landmark_ids_coincide(tiny_bpe_dir, bpe_tokenizer):
    tok = bpe_tokenizer
    assert tok.pad_token_id == tok.eos_token_id
    enc = LMKEncoder(tiny_bpe_dir, granularity=4, normalize=False, device="cpu")
    assert enc.special.landmark_id == tok.eos_token_id and enc.special.cls_id is None
    texts = ["short text", SAMPLE_TEXT, "mid length text here </s> ok"]
    batched = enc.encode_multi(texts)
    for text, mv in zip(texts, batched):
        alone = enc.encode_multi([text])[0]
        np.testing.assert_allclose(mv.vectors, alone.vectors, atol=1e-5)
        ids = tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        assert len(mv) == max(1, math.ceil(len(ids) / 4))
    with pytest.raises(ValueError, match="cls"):
        LMKEncoder(tiny_bpe_dir, pooling="cls", device="cpu").encode(["x"])


def test_rotary_model_windows_and_extrapolation(tiny_modernbert_dir):
    enc = LMKEncoder(tiny_modernbert_dir, granularity=8, device="cpu")
    assert enc.rotary and enc.max_length == 64
    text = " ".join(f"w{i}" for i in range(150))
    windowed = enc.encode_multi([text])[0]
    assert windowed.n_windows > 1 and unit_rows(windowed.vectors)
    long = LMKEncoder(tiny_modernbert_dir, granularity=8, max_length=1024, device="cpu")
    whole = long.encode_multi([text])[0]
    assert whole.n_windows == 1 and len(whole) == len(windowed)
    assert not np.allclose(whole.vectors, windowed.vectors)  # full context differs from windows
    short = ["a short text"]
    np.testing.assert_allclose(enc.encode(short), long.encode(short), atol=1e-5)


def test_absolute_positions_cannot_extrapolate(tiny_bert_dir):
    with pytest.raises(ValueError, match="absolute"):
        LMKEncoder(tiny_bert_dir, max_length=4096, device="cpu")


def test_sentence_granularity(encoder):
    enc = LMKEncoder(granularity="sentence", sentence_max_tokens=8, device="cpu")
    text = "First sentence is here. Second one. This third sentence is much longer than eight tokens for sure."
    mv = enc.encode_multi([text])[0]
    pieces = [text[a:b] for a, b in mv.spans]
    assert pieces[0] == "First sentence is here. " and pieces[1] == "Second one. "
    assert len(pieces) > 3 and "".join(pieces) == text


def test_variable_granularity_is_seeded(tiny_bert_dir):
    texts = ["word " * 100] * 6
    a = LMKEncoder(tiny_bert_dir, granularity=[4, 16, 32], seed=3, device="cpu").encode_multi(texts)
    b = LMKEncoder(tiny_bert_dir, granularity=[4, 16, 32], seed=3, device="cpu").encode_multi(texts)
    counts = [len(m) for m in a]
    assert counts == [len(m) for m in b]
    assert set(counts) <= {25, 7, 4} and len(set(counts)) > 1


def test_fingerprint_roundtrip_and_differences(tiny_bert_dir):
    a = LMKEncoder(tiny_bert_dir, device="cpu").fingerprint
    b = LMKEncoder(tiny_bert_dir, granularity=64, pooling="mean", device="cpu").fingerprint
    assert Fingerprint.from_dict(__import__("json").loads(a.to_json())) == a
    diffs = a.differences(b)
    assert any(d.startswith("granularity") for d in diffs) and any(d.startswith("pooling") for d in diffs)
    assert a.differences(a) == [] and a.dimension == 32


def test_encoders_share_loaded_model(tiny_bert_dir):
    a = LMKEncoder(tiny_bert_dir, device="cpu")
    b = LMKEncoder(tiny_bert_dir, granularity=64, device="cpu")
    assert a.model is b.model


@pytest.mark.parametrize(
    "texts, error",
    [
        (None, TypeError),
        ("a bare string", TypeError),
        (["ok", 3], TypeError),
        (["ok", None], TypeError),
        (42, TypeError),
    ],
)
def test_bad_texts(encoder, texts, error):
    with pytest.raises(error, match="texts"):
        encoder.encode(texts)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"pooling": "max"}, "pooling must be one of"),
        ({"landmark_weights": "chunks"}, "landmark_weights must be one of"),
        ({"granularity": 0}, "granularity"),
        ({"granularity": "paragraph"}, "granularity"),
        ({"granularity": [32, -1]}, "granularity"),
        ({"granularity": 600}, "granularity=600 does not fit"),
        ({"device": "tpu"}, "device must be one of"),
        ({"dtype": "int8"}, "dtype must be one of"),
        ({"batch_size": 0}, "batch_size"),
        ({"truncate_tokens": -5}, "truncate_tokens"),
        ({"max_tokens": 512}, "the encoder setting max_tokens is now truncate_tokens"),
        ({"window_overlap": -1}, "window_overlap"),
        ({"landmark_token_id": 10**7}, "landmark_token_id"),
        ({"model": 3.5}, "model must be"),
    ],
)
def test_bad_settings(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        LMKEncoder(**{"device": "cpu", **kwargs})


def test_tokenizer_without_landmark_token(tmp_path, bpe_tokenizer, tiny_bpe_dir):
    from transformers import AutoModel, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=bpe_tokenizer.backend_tokenizer)
    folder = tmp_path / "nolmk"
    AutoModel.from_pretrained(tiny_bpe_dir).save_pretrained(folder)
    tok.save_pretrained(folder)
    with pytest.raises(ValueError, match="landmark_token_id"):
        LMKEncoder(folder, device="cpu")
    enc = LMKEncoder(folder, landmark_token_id=0, device="cpu")
    assert unit_rows(enc.encode(["works now"]))


def test_safetensors_only_unless_opted_out(tmp_path, tiny_bert_dir):
    from transformers import AutoModel, AutoTokenizer

    folder = tmp_path / "pickled"
    folder.mkdir()
    model = AutoModel.from_pretrained(tiny_bert_dir)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    model.config.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(folder)
    with pytest.raises(OSError, match="allow_pickle"):
        LMKEncoder(folder, device="cpu")
    assert unit_rows(LMKEncoder(folder, allow_pickle=True, device="cpu").encode(["ok"]))


def test_tokenize_matches_the_transformers_tokenizer(encoder):
    texts = ["Ünïcödé — 日本語 🚀🔥 Ελληνικά [SEP] x </s>", "", "plain words"]
    batch = encoder.tokenize(texts)
    ref = encoder.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, split_special_tokens=True)
    assert batch.ids.tolist() == [i for ids in ref["input_ids"] for i in ids]
    assert batch.starts.tolist() == [a for offs in ref["offset_mapping"] for a, _ in offs]
    assert batch.ends.tolist() == [b for offs in ref["offset_mapping"] for _, b in offs]
    assert encoder.tokenizer("[SEP]", add_special_tokens=False)["input_ids"] == [encoder.special.landmark_id]


def test_automatic_window_overlap_scales_with_granularity():
    base = "sentence-transformers/all-MiniLM-L6-v2"  # a plain model: no window recorded in its folder
    assert LMKEncoder(base, granularity=32, device="cpu").window_overlap == 3  # 511 // 4 // 33
    assert LMKEncoder(base, granularity=128, device="cpu").window_overlap == 1  # 3 chunks a window: share one
    assert LMKEncoder(base, granularity=256, device="cpu").window_overlap == 0
    assert LMKEncoder(base, granularity=None, device="cpu").window_overlap == 0
    assert LMKEncoder(base, granularity=128, window_overlap=2, device="cpu").window_overlap == 2


def test_the_packaged_model_encodes_in_the_window_chosen_on_the_dev_domains():
    """256-token windows without overlap (dev nDCG@10 within 0.001 of 512 tokens with 3 chunks of
    overlap, at 1.3x instead of 1.8x the time of chunk-then-embed); set either to override."""
    enc = LMKEncoder(device="cpu")
    assert (enc.max_length, enc.window_overlap) == (256, 0)
    assert enc.fingerprint.max_length == 256 and enc.fingerprint.window_overlap == 0
    wider = LMKEncoder(device="cpu", max_length=512, window_overlap=3)
    assert (wider.max_length, wider.window_overlap) == (512, 3)
