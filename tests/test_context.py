"""The context builder: passages that map back to the text exactly, never repeat text, fit the
budget, come best first, and bad input gets a clear error."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmk_rag.context import ContextRule, build_context, user_counter
from lmk_rag.errors import InvalidInputError, InvalidTypeError

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"


@dataclass(frozen=True)
class Doc:
    id: str
    text: str
    landmark_scores: np.ndarray | None
    score: float = 1.0
    metadata: dict[str, Any] = field(default_factory=dict)
    landmark_spans: tuple[tuple[int, int], ...] = ()


def words(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def doc(doc_id: str, sentences: list[str], scores: list[float], score: float = 1.0) -> Doc:
    """One landmark per sentence."""
    text = " ".join(sentences)
    spans, pos = [], 0
    for i, s in enumerate(sentences):
        end = pos + len(s) + (1 if i < len(sentences) - 1 else 0)
        spans.append((pos, end))
        pos = end
    return Doc(doc_id, text, np.array(scores, dtype=np.float32), score, {"source": doc_id}, tuple(spans))


SENTENCES = [f"Sentence number {i} talks about topic {i}." for i in range(20)]


def test_passages_map_back_fit_the_budget_never_overlap_and_come_best_first():
    a = doc("a", SENTENCES, [0.1] * 5 + [0.9, 0.8] + [0.1] * 8 + [0.7] + [0.1] * 4)
    b = doc("b", SENTENCES, [0.2] * 10 + [0.85] + [0.2] * 9, score=0.9)
    passages = build_context("topic", [a, b], 40, words, ContextRule(width=2, lexical_weight=0))
    assert passages and sum(p.tokens for p in passages) <= 40
    texts = {"a": a.text, "b": b.text}
    for p in passages:
        assert p.text == texts[p.id][p.span[0] : p.span[1]] and p.tokens == len(p.text.split())
        assert p.metadata == {"source": p.id}
    assert [p.score for p in passages] == sorted((p.score for p in passages), reverse=True)
    for x in passages:
        for y in passages:
            if x is not y and x.id == y.id:
                assert x.span[1] <= y.span[0] or y.span[1] <= x.span[0]
    first = passages[0]
    assert first.id == "a" and "topic 5." in first.text and "topic 6." in first.text


def test_overlapping_and_touching_regions_merge_into_one_passage():
    a = doc("a", SENTENCES, [0.1] * 4 + [0.9, 0.1, 0.1, 0.85] + [0.1] * 12)
    passages = build_context("x", [a], 1000, words, ContextRule(width=4, lexical_weight=0, snap_chars=0))
    assert len({p.span for p in passages}) == len(passages)
    spans = sorted(p.span for p in passages)
    assert all(s[1] < t[0] for s, t in zip(spans, spans[1:]))  # touching ones were merged
    assert "topic 4." in passages[0].text and "topic 7." in passages[0].text


def test_a_budget_smaller_than_one_landmark_gives_one_clipped_passage():
    a = doc("a", SENTENCES, [0.5] * 20)
    (p,) = build_context("x", [a], 3, words, ContextRule(lexical_weight=0))
    assert 0 < p.tokens <= 3 and p.text == a.text[p.span[0] : p.span[1]]


def test_no_candidates_or_empty_texts_give_an_empty_context():
    assert build_context("x", [], 512, words) == []
    assert build_context("x", [Doc("e", "", None)], 512, words) == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "512", None])
def test_max_tokens_must_be_a_positive_int(bad):
    with pytest.raises(InvalidInputError, match="max_tokens must be an int >= 1"):
        build_context("x", [doc("a", SENTENCES, [0.5] * 20)], bad, words)


def test_a_counter_that_raises_or_lies_is_named():
    def broken(text: str) -> int:
        raise RuntimeError("tokenizer offline")

    with pytest.raises(InvalidInputError, match="token_counter raised RuntimeError: tokenizer offline"):
        build_context("x", [doc("a", SENTENCES, [0.5] * 20)], 50, user_counter(broken))
    with pytest.raises(InvalidInputError, match="token_counter must return an int >= 0"):
        build_context("x", [doc("a", SENTENCES, [0.5] * 20)], 50, user_counter(lambda t: -1))
    with pytest.raises(InvalidTypeError, match="token_counter must be a callable"):
        user_counter(512)


def test_the_query_words_pull_up_the_landmark_that_holds_them():
    flat = [0.5] * 20
    sentences = list(SENTENCES)
    sentences[13] = "The flux capacitor needs 1.21 gigawatts."
    a = doc("a", sentences, flat)
    dense_only = build_context("flux capacitor gigawatts", [a], 20, words, ContextRule(width=1, lexical_weight=0))
    fused = build_context("flux capacitor gigawatts", [a], 20, words, ContextRule(width=1, lexical_weight=0.5))
    assert "capacitor" not in dense_only[0].text
    assert "capacitor" in fused[0].text


def test_ends_snap_to_sentence_boundaries():
    filler = " ".join(f"word{i}" for i in range(30))
    text = f"{filler}. First part. Second one is here. Third sentence follows. Fourth. {filler}."
    cut_a, cut_b = text.index("one is"), text.index("sentence follows")  # inside sentences
    spans = ((0, cut_a), (cut_a, cut_b), (cut_b, len(text)))
    a = Doc("a", text, np.array([0.1, 0.9, 0.1], dtype=np.float32), landmark_spans=spans)
    (p,) = build_context("x", [a], 12, words, ContextRule(width=1, lexical_weight=0, snap_chars=40))
    assert p.text == "Second one is here. Third sentence follows."
    (raw,) = build_context("x", [a], 12, words, ContextRule(width=1, lexical_weight=0, snap_chars=0))
    assert raw.text == text[cut_a:cut_b]


@pytest.mark.parametrize(
    "field_, value", [("width", 0), ("lexical_weight", 1.5), ("rank_weight", -0.1), ("snap_chars", -1)]
)
def test_rules_are_checked(field_, value):
    with pytest.raises(InvalidInputError, match=field_):
        ContextRule(**{field_: value})


@pytest.mark.slow
def test_the_same_context_without_an_index(tmp_path):
    from lmk_rag import LMKEncoder
    from lmk_rag.context import context

    encoder = LMKEncoder(device="cpu")
    texts = [p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.md"))]
    names = [p.name for p in sorted(CORPUS.glob("*.md"))]
    encoded = encoder.encode_multi(texts)
    passages = context("How long do solar inverters last?", texts, encoded, encoder, 256, ids=names)
    assert passages[0].id == "home_solar.md" and any("ten to fifteen years" in p.text for p in passages)
    assert sum(p.tokens for p in passages) <= 256
    assert sum(encoder.count_tokens([p.text for p in passages])) <= 256
    by_name = dict(zip(names, texts))
    assert all(p.text == by_name[p.id][p.span[0] : p.span[1]] for p in passages)
    tiktoken_like = context("tides", texts, encoded, encoder, 64, token_counter=lambda s: len(s.split()))
    assert sum(len(p.text.split()) for p in tiktoken_like) <= 64


def test_a_word_the_tokenizer_cannot_read_is_not_a_cheap_passage(encoder):
    """A 100,000-character run is one unknown token to WordPiece; counted as such it became a
    "5-token" passage of 100k characters (#51 item 14). The budget counts it by its length."""
    from lmk_rag.index import QdrantIndex

    text = "Tides rise and fall twice a day. " + "QUJD" * 25_000 + " The Moon pulls the sea."
    assert encoder.count_tokens(["QUJD" * 25_000])[0] >= 100_000 // 32
    idx = QdrantIndex(location=":memory:", encoder=encoder)
    idx.add([text], ids=["t"])
    passages = idx.context("why do tides rise", max_tokens=128)
    assert sum(p.tokens for p in passages) <= 128
    assert all(len(p.text) <= 32 * p.tokens for p in passages)


# ------------------------------------------ the budget in the LLM's tokens on every path (#45 item 4)
@pytest.fixture(scope="module")
def word_index(encoder):
    from lmk_rag.index import QdrantIndex

    idx = QdrantIndex(location=":memory:", encoder=encoder)
    corpus = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"
    paths = sorted(corpus.glob("*.md"))
    idx.add([p.read_text() for p in paths], ids=[p.name for p in paths])
    return idx


def _words(text: str) -> int:
    return len(text.split())


def test_a_token_counter_is_a_callable_or_a_tokenizer_folder_and_bad_ones_are_one_error(word_index, packaged_dir):
    by_words = word_index.context("How long do solar inverters last?", 60, token_counter=_words)
    assert by_words and sum(_words(p.text) for p in by_words) <= 60
    by_folder = word_index.context("How long do solar inverters last?", 60, token_counter=str(packaged_dir))
    assert by_folder and sum(p.tokens for p in by_folder) <= 60
    with pytest.raises(InvalidInputError, match="names no tokenizer here"):
        word_index.context("tides", 60, token_counter="/no/such/tokenizer")
    with pytest.raises(InvalidInputError, match="token_counter raised ZeroDivisionError"):
        word_index.context("tides", 60, token_counter=lambda text: 1 // 0)
    with pytest.raises(InvalidInputError, match="must return an int >= 0"):
        word_index.context("tides", 60, token_counter=lambda text: -3)


def test_every_framework_path_takes_the_token_counter(word_index):
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.lmk import LMKContextPostprocessor
    from llama_index.retrievers.lmk import LMKRetriever as LlamaRetriever

    from langchain_lmk import LMKContextCompressor, LMKRetriever, LMKVectorStore

    question = "How long do solar inverters last?"
    docs = LMKRetriever(index=word_index, max_tokens=60, token_counter=_words).invoke(question)
    assert docs and sum(_words(d.page_content) for d in docs) <= 60
    store = LMKVectorStore(index=word_index)
    docs = store.as_retriever(search_kwargs={"max_tokens": 60, "token_counter": _words}).invoke(question)
    assert docs and sum(_words(d.page_content) for d in docs) <= 60
    texts = [d.text for d in word_index.get(word_index.ids())]
    cut = LMKContextCompressor(encoder=word_index.encoder, max_tokens=60, token_counter=_words).compress_documents(
        [Document(page_content=t) for t in texts], question
    )
    assert cut and sum(_words(d.page_content) for d in cut) <= 60
    nodes = LlamaRetriever(word_index, max_tokens=60, token_counter=_words).retrieve(question)
    assert nodes and sum(_words(n.node.get_content()) for n in nodes) <= 60
    post = LMKContextPostprocessor(encoder=word_index.encoder, max_tokens=60, token_counter=_words)
    kept = post.postprocess_nodes([NodeWithScore(node=TextNode(text=t)) for t in texts], QueryBundle(question))
    assert kept and sum(_words(n.node.get_content()) for n in kept) <= 60


def test_llama_index_similarity_top_k_does_not_cap_the_context(word_index):
    """LlamaIndex's default similarity_top_k is 2: it capped a context to 2 passages, however large
    the budget. The budget decides now; similarity_top_k only widens the documents searched."""
    from llama_index.core import VectorStoreIndex
    from llama_index.vector_stores.lmk import LMKVectorStore

    store = LMKVectorStore(word_index, max_tokens=1024)
    index = VectorStoreIndex.from_vector_store(store, embed_model=store.embed_model)
    nodes = index.as_retriever().retrieve("How do things work: tides, bread, bicycles, solar panels?")  # top_k 2
    assert len(nodes) > 2
    assert sum(word_index.encoder.count_tokens([n.node.get_content() for n in nodes])) <= 1024


# ---------------------------------------------------------------------- issue #45: cover, floor, no fragments
def test_the_seeds_cover_several_documents_before_any_passage_widens():
    """The ranking is unsure: the second document's one strong landmark must reach a small context
    before the first document's passage widens over its merely good neighbours."""
    a = doc("a", SENTENCES, [0.2] * 5 + [0.9, 0.7] + [0.2] * 13, score=1.0)
    b = doc("b", SENTENCES, [0.1] * 12 + [0.88] + [0.1] * 7, score=0.95)
    rule = ContextRule(lexical_weight=0, rank_weight=0, seeds=2, widen_bonus=5.0, snap_chars=0, min_passage_tokens=0)
    passages = build_context("x", [a, b], 40, words, rule)
    assert {p.id for p in passages} == {"a", "b"}
    assert any("topic 12." in p.text for p in passages if p.id == "b")
    greedy = build_context(
        "x", [a, b], 40, words, ContextRule(lexical_weight=0, rank_weight=0, seeds=0, widen_bonus=5.0)
    )
    assert {p.id for p in greedy} == {"a"}  # widening first spends the budget on the first document


def test_no_passage_is_a_fragment_unless_its_document_is_that_short():
    sentences = [f"Sentence number {i} talks about topic {i} in some detail." for i in range(12)] + ["See also."]
    a = doc("a", sentences, [0.1] * 12 + [0.95])  # the best landmark is a 2-word tail
    for budget in (40, 100):
        passages = build_context("x", [a], budget, words, ContextRule(lexical_weight=0, snap_chars=0, width=1))
        assert passages and all(p.tokens >= 16 for p in passages), [p.text for p in passages]
        assert sum(p.tokens for p in passages) <= budget
    (only,) = build_context("x", [a], 20, words, ContextRule(lexical_weight=0, snap_chars=0, width=1))
    assert "See also." in only.text and only.tokens <= 20  # a context's only passage may be shorter
    tiny = doc("t", ["Short note."], [0.9])
    (p,) = build_context("x", [tiny], 100, words)
    assert p.text == "Short note."  # the whole document is shorter than the minimum: kept


def test_a_budget_left_too_small_for_a_passage_is_not_filled_with_a_fragment():
    a = doc("a", SENTENCES, [0.9, 0.8] + [0.1] * 18)
    b = doc("b", SENTENCES, [0.1] * 10 + [0.85] + [0.1] * 9, score=0.9)
    passages = build_context("x", [a, b], 30, words, ContextRule(lexical_weight=0, snap_chars=0, width=3, seeds=1))
    assert all(p.tokens >= 16 for p in passages)


def test_min_score_keeps_an_off_topic_query_out_and_starts_passages_only_at_relevant_landmarks():
    a = doc("a", SENTENCES, [0.1] * 8 + [0.6] + [0.1] * 11)
    b = doc("b", SENTENCES, [0.15] * 20, score=0.5)
    assert build_context("x", [a, b], 200, words, min_score=0.7) == []
    passages = build_context("x", [a, b], 200, words, ContextRule(lexical_weight=0, snap_chars=0), min_score=0.5)
    assert passages and {p.id for p in passages} == {"a"} and "topic 8." in passages[0].text
    assert build_context("x", [a, b], 200, words, min_score=-1.0)  # the lowest floor keeps everything


@pytest.mark.parametrize("bad", [1.5, -1.01, float("nan"), float("inf"), "0.3", True, [0.3]])
def test_min_score_must_be_a_cosine(bad):
    with pytest.raises(InvalidInputError, match="min_score must be a number in \\[-1, 1\\]"):
        build_context("x", [doc("a", SENTENCES, [0.5] * 20)], 50, words, min_score=bad)


@pytest.mark.parametrize("field_, value", [("seeds", -1), ("min_passage_tokens", -1), ("widen_bonus", float("nan"))])
def test_the_new_rule_settings_are_checked(field_, value):
    with pytest.raises(InvalidInputError, match=field_):
        ContextRule(**{field_: value})


def test_every_path_takes_min_score_and_refuses_a_bad_one(word_index):
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.lmk import LMKContextPostprocessor
    from llama_index.retrievers.lmk import LMKRetriever as LlamaRetriever
    from pydantic import ValidationError

    from langchain_lmk import LMKContextCompressor, LMKRetriever, LMKVectorStore

    question, off_topic = "How long do solar inverters last?", "Who painted the Mona Lisa?"
    assert word_index.context(question, 200, min_score=0.3)
    assert word_index.context(off_topic, 200, min_score=0.99) == []
    assert LMKRetriever(index=word_index, max_tokens=200, min_score=0.3).invoke(question)
    assert LMKRetriever(index=word_index, max_tokens=200, min_score=0.99).invoke(off_topic) == []
    store = LMKVectorStore(index=word_index)
    assert store.as_retriever(search_kwargs={"min_score": 0.99}).invoke(off_topic) == []
    assert store.as_retriever(search_kwargs={"score_threshold": 0.99}).invoke(off_topic) == []
    # the async twins (ainvoke, aretrieve) take the same floor
    assert asyncio.run(store.as_retriever(search_kwargs={"min_score": 0.99}).ainvoke(off_topic)) == []
    assert asyncio.run(LMKRetriever(index=word_index, max_tokens=200, min_score=0.3).ainvoke(question))
    assert asyncio.run(LlamaRetriever(word_index, max_tokens=200, min_score=0.99).aretrieve(off_topic)) == []
    texts = [d.text for d in word_index.get(word_index.ids())]
    compressor = LMKContextCompressor(encoder=word_index.encoder, max_tokens=200, min_score=0.99)
    assert list(compressor.compress_documents([Document(page_content=t) for t in texts], off_topic)) == []
    assert LlamaRetriever(word_index, max_tokens=200, min_score=0.99).retrieve(off_topic) == []
    post = LMKContextPostprocessor(encoder=word_index.encoder, max_tokens=200, min_score=0.99)
    assert post.postprocess_nodes([NodeWithScore(node=TextNode(text=t)) for t in texts], QueryBundle(off_topic)) == []
    with pytest.raises(InvalidInputError, match="min_score"):
        word_index.context(question, 200, min_score=2)
    with pytest.raises(InvalidInputError, match="min_score"):
        LlamaRetriever(word_index, min_score=float("nan"))
    with pytest.raises(ValidationError, match="min_score"):
        LMKRetriever(index=word_index, min_score=1.5)
    with pytest.raises(ValidationError, match="min_score"):
        LMKContextPostprocessor(encoder=word_index.encoder, min_score="high")
