"""Pure layout functions: reference equality, properties, windows. No model needed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmk_rag.encoding.landmarks import (
    TokenizedBatch,
    assign_landmarks,
    boundary_chunk_ends,
    build_layout,
    fixed_chunk_ends,
    plan_windows,
    ranges,
    split_long_chunks,
)

TEXTS = [
    "",
    "   ",
    "one",
    "A short sentence.",
    "Literal [SEP] and </s> and [CLS] strings are just text [SEP][SEP].",
    "word " * 97,
    "Ünïcödé — 日本語のテキスト, emoji 🚀🔥 and Ελληνικά mixed together. " * 5,
]


def tokenize(tokenizer, texts):
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, split_special_tokens=True)
    ids = [np.asarray(x, dtype=np.int64) for x in enc["input_ids"]]
    offs = [np.asarray(o, dtype=np.int64).reshape(-1, 2) for o in enc["offset_mapping"]]
    counts = np.array([len(x) for x in ids])
    return TokenizedBatch(
        ids=np.concatenate(ids) if ids else np.zeros(0, np.int64),
        starts=np.concatenate([o[:, 0] for o in offs]),
        ends=np.concatenate([o[:, 1] for o in offs]),
        offsets=np.concatenate([[0], np.cumsum(counts)]),
        text_lengths=np.array([len(t) for t in texts]),
    )


def reference_layout(ids: list[int], k: int, cls: int | None, lmk: int) -> list[int]:
    """The paper's reference: CLS, then each chunk of k tokens followed by one landmark."""
    out = [] if cls is None else [cls]
    if not ids:
        return out + [lmk]
    for i in range(0, len(ids), k):
        out += list(ids[i : i + k]) + [lmk]
    return out


def layout_for(tokenizer, texts, k, cls, lmk):
    batch = tokenize(tokenizer, texts)
    ends, offsets = fixed_chunk_ends(batch.n_tokens, k)
    return batch, build_layout(batch, ends, offsets, lmk, cls)


@pytest.mark.parametrize("k", [1, 3, 32, 64])
def test_fixed_layout_matches_reference_wordpiece(bert_tokenizer, k):
    tok = bert_tokenizer
    _, layout = layout_for(tok, TEXTS, k, tok.cls_token_id, tok.sep_token_id)
    for i, text in enumerate(TEXTS):
        content = tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        assert layout.sequence(i).tolist() == reference_layout(content, k, tok.cls_token_id, tok.sep_token_id)


@pytest.mark.parametrize("k", [2, 16, 32])
def test_fixed_layout_matches_reference_bpe_without_cls(bpe_tokenizer, k):
    tok = bpe_tokenizer
    eos = tok.eos_token_id
    _, layout = layout_for(tok, TEXTS, k, None, eos)
    for i, text in enumerate(TEXTS):
        content = tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        assert layout.sequence(i).tolist() == reference_layout(content, k, None, eos)
        assert eos not in content  # the literal "</s>" in text stays text


def test_empty_text_is_cls_then_landmark(bert_tokenizer):
    tok = bert_tokenizer
    _, layout = layout_for(tok, [""], 32, tok.cls_token_id, tok.sep_token_id)
    assert layout.sequence(0).tolist() == [tok.cls_token_id, tok.sep_token_id]
    assert layout.landmark_positions(0).tolist() == [1]
    assert layout.text_spans(0) == [(0, 0)]


def test_landmarks_are_positions_not_ids(bert_tokenizer):
    tok = bert_tokenizer
    text = "[SEP] " * 40
    batch, layout = layout_for(tok, [text], 32, tok.cls_token_id, tok.sep_token_id)
    n = int(batch.n_tokens[0])
    assert len(layout.landmark_positions(0)) == math.ceil(n / 32)
    seq = layout.sequence(0)
    content = np.delete(seq, np.concatenate([[0], layout.landmark_positions(0)]))
    assert tok.sep_token_id not in content.tolist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.text(max_size=300), min_size=1, max_size=6),
    k=st.integers(min_value=1, max_value=48),
)
def test_layout_properties(bert_tokenizer, texts, k):
    tok = bert_tokenizer
    specials = ["[SEP]", "[CLS]", "[PAD]", "</s>"]
    texts = [t + specials[i % 4] * (i % 3) for i, t in enumerate(texts)]
    batch, layout = layout_for(tok, texts, k, tok.cls_token_id, tok.sep_token_id)
    for i, text in enumerate(texts):
        n = int(batch.n_tokens[i])
        positions = layout.landmark_positions(i)
        assert len(positions) == max(1, math.ceil(n / k))
        seq = layout.sequence(i)
        assert (seq[positions] == tok.sep_token_id).all()
        assert int((seq == tok.sep_token_id).sum()) == len(positions)  # no extra landmark from text
        spans = layout.text_spans(i)
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        assert all(a <= b for a, b in spans)
        assert all(spans[j][1] == spans[j + 1][0] for j in range(len(spans) - 1))
        assert "".join(text[a:b] for a, b in spans) == text


def test_spans_contain_their_tokens(bert_tokenizer):
    tok = bert_tokenizer
    text = TEXTS[-1]
    batch, layout = layout_for(tok, [text], 8, tok.cls_token_id, tok.sep_token_id)
    spans = layout.text_spans(0)
    ends, _ = fixed_chunk_ends(batch.n_tokens, 8)
    prev = 0
    for (a, b), e in zip(spans, ends):
        assert a <= batch.starts[prev] and batch.ends[e - 1] <= b
        prev = e


def test_variable_k_per_text(bert_tokenizer):
    tok = bert_tokenizer
    batch = tokenize(tok, ["word " * 100, "word " * 100])
    _, offsets = fixed_chunk_ends(batch.n_tokens, np.array([10, 50]))
    assert np.diff(offsets).tolist() == [10, 2]


def test_split_long_chunks():
    ends = np.array([5, 30, 31, 0, 70])
    offsets = np.array([0, 3, 4, 5])
    new_ends, new_offsets = split_long_chunks(ends, offsets, 10)
    assert new_ends.tolist() == [5, 15, 25, 30, 31, 0, 10, 20, 30, 40, 50, 60, 70]
    assert new_offsets.tolist() == [0, 5, 6, 13]


def test_boundary_chunk_ends_tokens_follow_char_boundaries(bert_tokenizer):
    tok = bert_tokenizer
    text = "First sentence here. Second one! Third?"
    batch = tokenize(tok, [text])
    ends, offsets = boundary_chunk_ends(batch, [np.array([21, 33])])
    layout = build_layout(batch, ends, offsets, tok.sep_token_id, tok.cls_token_id)
    assert [text[a:b] for a, b in layout.text_spans(0)] == ["First sentence here. ", "Second one! ", "Third?"]


def test_truncate_reports_dropped_and_shortens_spans(bert_tokenizer):
    tok = bert_tokenizer
    texts = ["one two three four five six", "short"]
    batch = tokenize(tok, texts)
    cut, dropped = batch.truncate(3)
    assert dropped.tolist() == [3, 0]
    ends, offsets = fixed_chunk_ends(cut.n_tokens, 32)
    layout = build_layout(cut, ends, offsets, tok.sep_token_id, tok.cls_token_id)
    assert [texts[0][a:b] for a, b in layout.text_spans(0)] == ["one two three "]
    assert layout.text_spans(1) == [(0, 5)]


def test_ranges():
    assert ranges(np.array([5, 0, 2]), np.array([2, 0, 3])).tolist() == [5, 6, 2, 3, 4]
    assert ranges(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=80),
    capacity=st.integers(min_value=40, max_value=200),
    overlap=st.integers(min_value=0, max_value=5),
)
def test_windows_cover_every_chunk_once(lengths, capacity, overlap):
    chunk_len = np.array(lengths)
    windows = plan_windows(chunk_len, capacity, overlap)
    assert windows[0][0] == 0 and windows[-1][1] == len(lengths)
    for (a, b), (c, _) in zip(windows, windows[1:]):
        assert c > a and c <= b  # advances, and leaves no gap
        assert b - c <= max(overlap, 0) or c == a + 1
    for a, b in windows:
        assert chunk_len[a:b].sum() <= capacity
    owner = assign_landmarks(chunk_len, windows)
    for c, w in enumerate(owner):
        a, b = windows[w]
        assert a <= c < b  # each landmark goes to exactly one window that holds it


def test_owner_is_most_central_window():
    chunk_len = np.full(10, 10)
    windows = plan_windows(chunk_len, 50, 2)
    assert windows[:2] == [(0, 5), (3, 8)]
    owner = assign_landmarks(chunk_len, windows)
    # chunk 4 sits at the edge of window 0 and in the middle of window 1
    assert owner[4] == 1 and owner[0] == 0


def test_chunk_longer_than_window_is_an_error():
    with pytest.raises(ValueError, match="granularity"):
        plan_windows(np.array([10, 60]), 50, 1)


def _dense_assign(chunk_lengths, windows):
    """The former chunks x windows formulation, kept as the reference."""
    cum = np.concatenate([[0], np.cumsum(chunk_lengths)])
    c = np.arange(len(chunk_lengths))[:, None]
    a = np.array([w[0] for w in windows])[None, :]
    b = np.array([w[1] for w in windows])[None, :]
    inside = (c >= a) & (c < b)
    return np.argmax(np.where(inside, np.minimum(cum[c] - cum[a], cum[b] - cum[c + 1]), -1), axis=1)


def test_landmark_owners_match_the_dense_reference_and_scale_linearly():
    rng = np.random.default_rng(0)
    for _ in range(300):
        capacity = int(rng.integers(10, 200))
        lengths = rng.integers(1, max(2, capacity // 2), size=int(rng.integers(1, 80)))
        windows = plan_windows(lengths, capacity, int(rng.integers(0, 4)))
        np.testing.assert_array_equal(assign_landmarks(lengths, windows), _dense_assign(lengths, windows))
    # a 20 MB document's worth of chunks: the dense matrix would need ~50 GB
    lengths = np.full(150_000, 33)
    owners = assign_landmarks(lengths, plan_windows(lengths, 511, 3))
    assert len(owners) == 150_000 and (np.diff(owners) >= 0).all()
