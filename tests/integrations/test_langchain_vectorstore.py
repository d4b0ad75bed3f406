"""LMKVectorStore and LMKRetriever against LangChain's standard suites, on both backends."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests

from langchain_lmk import LMKRetriever, LMKVectorStore
from lmk_rag import LMKEncoder

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "sample_corpus"
_names = itertools.count()


def _encoder() -> LMKEncoder:
    return LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")


def _qdrant():
    from lmk_rag.index import QdrantIndex

    return QdrantIndex(location=":memory:", encoder=_encoder(), collection=f"lc{next(_names)}")


def _chroma(tmp_path):
    from lmk_rag.index import ChromaIndex

    return ChromaIndex(tmp_path / "chroma", encoder=_encoder(), collection=f"lc{next(_names)}")


class TestLMKVectorStoreQdrant(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self):
        yield LMKVectorStore(index=_qdrant())


class TestLMKVectorStoreChroma(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path):
        yield LMKVectorStore(index=_chroma(tmp_path))


def _sample_index():
    idx = _qdrant()
    paths = sorted(CORPUS.glob("*.md"))
    idx.add([p.read_text() for p in paths], ids=[p.name for p in paths], metadatas=[{"source": p.name} for p in paths])
    return idx


class TestLMKRetrieverDocuments(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[LMKRetriever]:
        return LMKRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"index": _sample_index(), "k": 3, "mode": "document"}

    @property
    def retriever_query_example(self) -> str:
        return "How long do solar inverters last?"


class TestLMKRetrieverPassages(TestLMKRetrieverDocuments):
    @property
    def retriever_constructor_params(self) -> dict:
        return {"index": _sample_index(), "k": 3, "mode": "passage"}


class TestLMKRetrieverContext(TestLMKRetrieverDocuments):
    """The default: the token-budgeted context, at most k passages. The builder covers several
    landmarks before it widens any, so a 512-token context holds k passages here and LangChain's
    whole retriever suite runs unmodified (two of its tests ask for exactly k)."""

    @property
    def retriever_constructor_params(self) -> dict:
        return {"index": _sample_index(), "k": 3}


def test_the_context_retriever_returns_at_most_k_passages_within_the_budget():
    retriever = LMKRetriever(index=_sample_index(), k=2, max_tokens=300)
    docs = retriever.invoke("How long do solar inverters last?")
    assert 1 <= len(docs) <= 2 and sum(d.metadata["tokens"] for d in docs) <= 300
    assert len(retriever.invoke("tides", k=1)) == 1


def test_passage_mode_returns_the_matched_passage_with_parent_and_span():
    idx = _sample_index()
    # A factoid in one landmark of a short document: the single best landmark (``peak``) names it.
    retriever = LMKRetriever(index=idx, k=2, mode="passage", passage="peak")
    docs = retriever.invoke("How many copies of the Gutenberg Bible were printed?")
    top = docs[0]
    assert top.metadata["parent_id"] == "printing_press.md" and "180 copies" in top.page_content
    full = idx.get(["printing_press.md"])[0].text
    assert full[top.metadata["span_start"] : top.metadata["span_end"]] == top.page_content
    assert top.metadata["source"] == "printing_press.md" and top.metadata["score"] > docs[1].metadata["score"]


def test_the_store_retriever_hands_the_llm_passages_and_whole_documents_on_request():
    idx = _sample_index()
    store = LMKVectorStore(index=idx)
    texts = {p.name: p.read_text() for p in CORPUS.glob("*.md")}
    context = store.as_retriever(search_kwargs={"max_tokens": 256}).invoke("How long do solar inverters last?")
    assert context and sum(d.metadata["tokens"] for d in context) <= 256
    assert context[0].metadata["parent_id"] == "home_solar.md" and context[0].metadata["source"] == "home_solar.md"
    for doc in context:
        m = doc.metadata
        assert texts[m["parent_id"]][m["span_start"] : m["span_end"]] == doc.page_content
    docs = store.as_retriever(search_type="similarity", search_kwargs={"k": 4}).invoke("sourdough starter")
    assert docs[0].id == "sourdough.md" and docs[0].page_content == texts["sourdough.md"]
    assert docs[0].metadata == {"source": "sourdough.md"}
    scored = store.similarity_search_with_relevance_scores("sourdough starter", k=2)
    assert 0.0 <= scored[1][1] <= scored[0][1] <= 1.0
    assert store.search_passages("sourdough starter", k=1)[0].metadata["parent_id"] == "sourdough.md"
    with pytest.raises(ValueError, match="search_kwargs"):
        store.as_retriever(search_kwargs={"fetch_k": 3})


def test_the_compressor_cuts_any_stores_documents_to_landmark_passages():
    """Documents from a store that is not lmk-rag's (LangChain's own in-memory store over plain
    embeddings) come back as passages of at most max_tokens, spans into their documents."""
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_lmk import LMKContextCompressor

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    paths = sorted(CORPUS.glob("*.md"))
    store.add_documents([Document(id=p.name, page_content=p.read_text(), metadata={"source": p.name}) for p in paths])
    found = store.similarity_search("anything", k=5)  # the fake store's order: the compressor ranks them itself
    compressor = LMKContextCompressor(encoder=LMKEncoder(device="cpu"), max_tokens=200)
    passages = compressor.compress_documents(found, "How long do solar inverters last?")
    assert passages and sum(p.metadata["tokens"] for p in passages) <= 200
    assert passages[0].metadata["parent_id"] == "home_solar.md" and passages[0].metadata["source"] == "home_solar.md"
    texts = {p.name: p.read_text() for p in paths}
    for p in passages:
        assert texts[p.metadata["parent_id"]][p.metadata["span_start"] : p.metadata["span_end"]] == p.page_content
    assert compressor.compress_documents([], "x") == []
    with pytest.raises(ValueError):
        LMKContextCompressor(max_tokens=0)


def test_from_texts_and_bad_index():
    from langchain_lmk import LMKEmbeddings

    store = LMKVectorStore.from_texts(
        ["alpha text", "beta text"],
        LMKEmbeddings(model="sentence-transformers/all-MiniLM-L6-v2", device="cpu"),
        ids=["a", "b"],
    )
    assert store.similarity_search("alpha", k=1) == [Document(id="a", page_content="alpha text", metadata={})]
    with pytest.raises(TypeError, match="index must be"):
        LMKVectorStore(index="not an index")


def test_from_texts_at_a_path_reopens_with_from_existing_collection_and_searches_by_vector(tmp_path):
    from lmk_rag.errors import IndexNotFoundError

    folder = str(tmp_path / "idx")
    store = LMKVectorStore.from_texts(
        ["Spring tides come at new and full moon.", "Feed a sourdough starter daily."],
        metadatas=[{"topic": "tides"}, {"topic": "bread"}],
        ids=["tides", "bread"],
        path=folder,
        collection_name="notes",
    )
    q = store.index.encoder.encode_query("when are spring tides?")
    assert [d.id for d in store.similarity_search_by_vector(q.tolist(), k=1)] == ["tides"]
    store.index.close()
    again = LMKVectorStore.from_existing_collection("notes", path=folder)
    assert again.index.encoder.model_name == "lmk-rag/all-MiniLM-L6-v2-lmk-v4"
    assert again.similarity_search("sourdough", k=1)[0].metadata == {"topic": "bread"}
    again.index.close()
    with pytest.raises(IndexNotFoundError, match="no lmk-rag collection 'other'"):
        LMKVectorStore.from_existing_collection("other", path=folder)
    with pytest.raises(ValueError, match="one of path="):
        LMKVectorStore.from_existing_collection("notes")


def test_mmr_picks_relevant_and_diverse_documents_and_checks_its_arguments():
    idx = _sample_index()
    idx.add(
        ["Spring tides come at new and full moon, when the Sun and Moon pull together."],
        ids=["tides-copy"],
        metadatas=[{"source": "copy"}],
    )
    store = LMKVectorStore(index=idx)
    plain = [d.id for d in store.similarity_search("spring tides and the moon", k=2)]
    diverse = [d.id for d in store.max_marginal_relevance_search("spring tides and the moon", k=2, lambda_mult=0.1)]
    assert set(plain) == {"tides.md", "tides-copy"} and len(diverse) == 2 and not set(diverse) <= set(plain)
    via_retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 5}).invoke("tides")
    assert len(via_retriever) == 2 and via_retriever[0].page_content
    q = idx.encoder.encode_query("sourdough").tolist()
    assert store.max_marginal_relevance_search_by_vector(q, k=1)[0].id == "sourdough.md"
    with pytest.raises(ValueError, match=r"fetch_k \(2\) must be at least k \(3\)"):
        store.max_marginal_relevance_search("tides", k=3, fetch_k=2)
    with pytest.raises(ValueError, match="lambda_mult"):
        store.max_marginal_relevance_search("tides", lambda_mult=2)


@pytest.mark.parametrize("backend", ["qdrant", "chroma"])
def test_filters_speak_the_operators_langchain_users_write(backend, tmp_path):
    """``$in``/``$nin``/ranges/``$or`` on every path of the store and the retrievers; a Qdrant
    ``models.Filter`` where the backend is Qdrant, refused with a clear message elsewhere."""
    from qdrant_client import models

    idx = _qdrant() if backend == "qdrant" else _chroma(tmp_path)
    names = sorted(p.name for p in CORPUS.glob("*.md"))
    store = LMKVectorStore(index=idx)
    wanted = {"tides.md", "sourdough.md"}
    chosen = {"source": {"$in": sorted(wanted)}}
    idx.add([(CORPUS / n).read_text() for n in names], ids=names, metadatas=[{"source": n} for n in names])
    assert {d.id for d in store.similarity_search("how things work", k=5, filter=chosen)} == wanted
    rest = store.similarity_search("how things work", k=5, filter={"source": {"$nin": sorted(wanted)}})
    assert {d.id for d in rest} == set(names) - wanted
    q = idx.encoder.encode_query("moon").tolist()
    assert {d.id for d in store.similarity_search_by_vector(q, k=5, filter=chosen)} == wanted
    assert {d.id for d in store.max_marginal_relevance_search("moon", k=2, fetch_k=4, filter=chosen)} == wanted
    context = store.as_retriever(search_kwargs={"filter": {"$or": [{"source": "tides.md"}]}}).invoke("moon")
    assert context and {d.metadata["parent_id"] for d in context} == {"tides.md"}
    for mode in ("context", "passage", "document"):
        found = LMKRetriever(index=idx, mode=mode, k=5, filter=chosen).invoke("bread and the sea")
        assert {d.metadata.get("parent_id", d.id) for d in found} <= wanted and found
    native = models.Filter(
        must=[models.FieldCondition(key="metadata.source", match=models.MatchValue(value="tides.md"))]
    )
    if backend == "qdrant":
        assert [d.id for d in store.similarity_search("bread", k=3, filter=native)] == ["tides.md"]
    else:
        with pytest.raises(TypeError, match="runs on a qdrant index only"):
            store.similarity_search("bread", k=3, filter=native)
    with pytest.raises(ValueError, match=r"unknown operator '\$regex'"):
        store.similarity_search("bread", filter={"source": {"$regex": "t.*"}})


# ---------------------------------------------------------------- a new user's rough edges (#46 items 1, 4)
async def test_an_async_rag_chain_runs_on_the_default_retriever():
    """``chain.ainvoke`` on ``store.as_retriever()`` (search_type "context") raised "search_type of
    context not allowed": the async twin was LangChain's, which knows only its own search types."""
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_core.prompts import PromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    store = LMKVectorStore(index=_sample_index())
    retriever = store.as_retriever(search_kwargs={"max_tokens": 128})
    seen = []

    def join(docs: list[Document]) -> str:
        seen.extend(docs)
        return "\n\n".join(d.page_content for d in docs)

    prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    chain = {"context": retriever | join, "question": RunnablePassthrough()} | prompt | FakeListLLM(responses=["10-15"])
    assert await chain.ainvoke("How long do solar inverters last?") == "10-15"
    assert seen and seen[0].metadata["parent_id"] == "home_solar.md"
    assert [d.page_content for d in await retriever.ainvoke("tides")] == [
        d.page_content for d in retriever.invoke("tides")
    ]
    similar = store.as_retriever(search_type="similarity", search_kwargs={"k": 2})
    assert [d.id for d in await similar.ainvoke("sourdough")] == [d.id for d in similar.invoke("sourdough")]


def test_relevance_is_an_absolute_cosine_the_same_in_every_search_mode():
    """The hybrid score is relative (the best hit is 1.0): mapped as a cosine it gave an unrelated
    question relevances of 0.75. Relevance now is the best landmark's cosine in every mode."""
    store = LMKVectorStore(index=_sample_index())
    related = dict((d.id, r) for d, r in store.similarity_search_with_relevance_scores("sourdough starter hooch", k=5))
    for mode in ("prefetch", "maxsim"):
        again = dict(
            (d.id, r)
            for d, r in store.similarity_search_with_relevance_scores("sourdough starter hooch", k=5, search_mode=mode)
        )
        assert again == pytest.approx(related, abs=1e-5)
    unrelated = store.similarity_search_with_relevance_scores("What is the capital of France?", k=3)
    assert max(r for _, r in unrelated) < related["sourdough.md"] - 0.2
    assert max(r for _, r in unrelated) < 0.5
    kept = store.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.5, "k": 3}
    ).invoke("What is the capital of France?")
    assert kept == []


def test_a_non_lmk_embedding_is_refused_and_from_texts_without_a_location_needs_no_extra(tmp_path):
    """``from_texts(texts, DeterministicFakeEmbedding(16))`` built a 384-dimension index, silently
    ignoring the embedding; with no location it needed qdrant-client (#46 item 3)."""
    import builtins

    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_lmk import LMKEmbeddings

    with pytest.raises(TypeError, match="embedding must be an LMKEmbeddings"):
        LMKVectorStore.from_texts(["x"], DeterministicFakeEmbedding(size=16))
    real_import = builtins.__import__

    def no_qdrant_client(name, *args, **kwargs):
        if name.startswith("qdrant_client"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    builtins.__import__ = no_qdrant_client
    try:
        store = LMKVectorStore.from_texts(["Tides rise twice a day.", "Bread rises with yeast."], ids=["t", "b"])
        assert store.similarity_search("tides", k=1)[0].id == "t"
    finally:
        builtins.__import__ = real_import
    embeddings = LMKEmbeddings(model="sentence-transformers/all-MiniLM-L6-v2")
    made = LMKVectorStore.from_texts(["Tides rise twice a day."], embeddings, ids=["t"], path=str(tmp_path / "idx"))
    made.index.close()
    again = LMKVectorStore.from_existing_collection(
        "lmk", embeddings, path=str(tmp_path / "idx")
    )  # langchain-qdrant's shape
    assert again.similarity_search("tides", k=1)[0].id == "t"
    again.index.close()
    with pytest.raises(TypeError, match="embedding must be an LMKEmbeddings"):
        LMKVectorStore.from_existing_collection("lmk", DeterministicFakeEmbedding(size=16), path=str(tmp_path / "idx"))
