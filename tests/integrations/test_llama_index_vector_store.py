"""LlamaIndex LMKVectorStore, tested the way LlamaIndex's own vector stores are: add through
VectorStoreIndex, query, filters, delete by ref_doc_id, persistence; on Qdrant and Chroma."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document, MetadataMode, NodeRelationship, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from llama_index.vector_stores.lmk import LMKVectorStore

from lmk_rag import LMKEncoder

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "sample_corpus"
_names = itertools.count()


@pytest.fixture(scope="module")
def encoder():
    return LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")


@pytest.fixture(params=["qdrant", "chroma"])
def make_store(request, tmp_path, encoder):
    """make_store(): a store over a fresh index (a folder, so it can be reopened)."""
    from lmk_rag.index import ChromaIndex, QdrantIndex

    opened = []
    collection = f"li{next(_names)}"

    def factory(**kwargs):
        for old in opened:
            old.close()
        if request.param == "qdrant":
            index = QdrantIndex(tmp_path / "qdrant", encoder=encoder, collection=collection)
        else:
            index = ChromaIndex(tmp_path / "chroma", encoder=encoder, collection=collection)
        opened.append(index)
        return LMKVectorStore(index, **kwargs)

    yield factory
    for old in opened:
        old.close()


def _build(store, documents, **kwargs):
    context = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(documents, storage_context=context, embed_model=store.embed_model, **kwargs)


def test_documents_go_in_whole_through_the_default_splitter_and_passages_come_out(make_store):
    store = make_store()
    docs = SimpleDirectoryReader(str(CORPUS)).load_data()  # random ids, as most users read files
    # Small chunks and batches: every document is cut in several chunks, some across two add() calls.
    index = _build(store, docs, transformations=[SentenceSplitter(chunk_size=64, chunk_overlap=8)], insert_batch_size=7)
    stored = {d.id: d for d in store.index.get(store.index.ids())}
    originals = {d.metadata["file_path"]: d.text for d in docs}
    assert set(stored) == set(originals)  # one document per file, named by its path
    for doc_id, doc in stored.items():
        original = originals[doc_id].rstrip()  # the splitter drops trailing whitespace
        # The whole text, put back together at the chunks' own offsets (a gap between chunks, which
        # the splitter stripped, is whitespace of the same length).
        assert len(doc.text) == len(original)
        assert all(a == b or (a.isspace() and b.isspace()) for a, b in zip(doc.text, original))

    nodes = index.as_retriever(similarity_top_k=3).retrieve("How long do solar inverters last?")
    assert 0 < len(nodes) <= 3
    top = nodes[0].node
    parent = top.relationships[NodeRelationship.SOURCE].node_id
    assert parent.endswith("home_solar.md") and "inverter" in top.get_content().lower()
    assert stored[parent].text[top.start_char_idx : top.end_char_idx] == top.get_content()
    assert top.metadata["file_name"] == "home_solar.md"
    llm_text = top.get_content(metadata_mode=MetadataMode.LLM)
    assert "file_path: " in llm_text  # as SimpleDirectoryReader shows it, so the LLM can cite the file
    assert "ref_doc_id" not in llm_text and "file_size" not in llm_text and "file_name" not in llm_text

    again = SimpleDirectoryReader(str(CORPUS)).load_data()  # new random ids for the same files
    _build(store, again)
    assert len(store.index) == len(docs)  # replaced, not doubled

    response = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=2).query(
        "What does grey liquid on a sourdough starter mean?"
    )
    assert response.source_nodes[0].node.metadata["file_name"] == "sourdough.md"


def test_delete_by_ref_doc_id_filters_and_persistence(make_store):
    store = make_store()
    docs = [
        Document(text=(CORPUS / "tides.md").read_text(), id_="tides", metadata={"lang": "en", "year": 2021}),
        Document(text=(CORPUS / "sourdough.md").read_text(), id_="bread", metadata={"lang": "de", "year": 2023}),
        Document(text=(CORPUS / "home_solar.md").read_text(), id_="solar", metadata={"lang": "fr", "year": 2025}),
    ]
    index = _build(store, docs)
    assert sorted(store.index.ids()) == ["bread", "solar", "tides"]

    def found(filters, query="how does it work"):
        result = store.query(VectorStoreQuery(query_str=query, similarity_top_k=10, filters=filters))
        return {n.relationships[NodeRelationship.SOURCE].node_id for n in result.nodes}

    f = MetadataFilter
    assert found(MetadataFilters(filters=[f(key="lang", value="en")])) == {"tides"}
    assert found(MetadataFilters(filters=[f(key="lang", value="en", operator=FilterOperator.NE)])) == {"bread", "solar"}
    assert found(MetadataFilters(filters=[f(key="lang", value=["en", "fr"], operator=FilterOperator.IN)])) == {
        "tides",
        "solar",
    }
    assert found(MetadataFilters(filters=[f(key="lang", value=["en"], operator=FilterOperator.NIN)])) == {
        "bread",
        "solar",
    }
    assert found(MetadataFilters(filters=[f(key="year", value=2023, operator=FilterOperator.GTE)])) == {
        "bread",
        "solar",
    }
    between = MetadataFilters(
        filters=[
            f(key="year", value=2021, operator=FilterOperator.GT),
            f(key="year", value=2025, operator=FilterOperator.LT),
        ]
    )
    assert found(between) == {"bread"}
    either = MetadataFilters(
        filters=[f(key="lang", value="en"), MetadataFilters(filters=[f(key="year", value=2025)])],
        condition=FilterCondition.OR,
    )
    assert found(either) == {"tides", "solar"}
    retriever = index.as_retriever(filters=MetadataFilters(filters=[f(key="lang", value="de")]))
    assert {n.node.ref_doc_id for n in retriever.retrieve("tides and the moon")} == {"bread"}
    with pytest.raises(ValueError, match=r"filter operator TEXT_MATCH .* allowed: EQ, NE, GT, GTE, LT, LTE, IN, NIN"):
        found(MetadataFilters(filters=[f(key="lang", value="e", operator=FilterOperator.TEXT_MATCH)]))
    with pytest.raises(ValueError, match=r"filter condition .* use AND or OR"):
        found(MetadataFilters(filters=[f(key="lang", value="en")], condition=FilterCondition.NOT))

    index.delete_ref_doc("bread")
    assert sorted(store.index.ids()) == ["solar", "tides"]
    assert [n.node_id for n in store.get_nodes(node_ids=["tides"])] == ["tides"]
    store.delete_nodes(filters=MetadataFilters(filters=[f(key="lang", value="fr")]))
    assert store.index.ids() == ["tides"]

    reopened = make_store(mode="passage")  # closes the first index, opens the same folder again
    again = VectorStoreIndex.from_vector_store(reopened, embed_model=reopened.embed_model)
    nodes = again.as_retriever(similarity_top_k=1).retrieve("What causes spring tides?")
    assert [n.node.ref_doc_id for n in nodes] == ["tides"] and "#" in nodes[0].node.node_id
    reopened.clear()
    assert len(reopened.index) == 0


def test_bad_input_is_refused_with_what_to_do(make_store):
    from lmk_rag.index import QdrantIndex

    store = make_store()
    with pytest.raises(TypeError, match="index must be a QdrantIndex or ChromaIndex"):
        LMKVectorStore("qdrant:./x")
    with pytest.raises(ValueError, match="searches by the query's text"):
        store.query(VectorStoreQuery(query_embedding=[0.0] * 384, similarity_top_k=1))
    with pytest.raises(ValueError, match="does not restrict a query to doc_ids"):
        store.query(VectorStoreQuery(query_str="x", doc_ids=["a"]))
    with pytest.raises(TypeError, match=r"metadata\['tags'\] is a list; LMKVectorStore keeps flat metadata"):
        store.add([Document(text="x", metadata={"tags": ["a"]})])
    with pytest.raises(ValueError, match="does not embed queries"):
        store.embed_model.get_query_embedding("x")
    raw = QdrantIndex(location=":memory:", encoder=store.index.encoder)
    assert StorageContext.from_defaults(vector_store=raw).vector_store is raw  # an empty index is not dropped
    with pytest.raises(TypeError, match=r"wrap it: .*LMKVectorStore"):
        VectorStoreIndex.from_documents(
            [Document(text="x")],
            storage_context=StorageContext.from_defaults(vector_store=raw),
            embed_model=store.embed_model,
        )


# ---------------------------------------------------------------- documents never mixed or lost (#51 item 5)
def _chunks(doc: Document, size: int = 60) -> list:
    from llama_index.core.schema import RelatedNodeInfo, TextNode

    out = []
    for start in range(0, len(doc.text), size):
        piece = doc.text[start : start + size]
        node = TextNode(text=piece, start_char_idx=start, end_char_idx=start + len(piece))
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc.doc_id, hash=doc.hash)
        out.append(node)
    return out


def test_a_chunk_of_another_document_under_the_same_ref_doc_id_is_refused_not_stored_inside_it(make_store):
    store = make_store()
    alpha = Document(text="Alpha document. " * 10, id_="A")
    payroll = Document(text="Bravo has secret text about payroll. " * 5, id_="B")
    stolen = _chunks(payroll)[1]
    stolen.relationships[NodeRelationship.SOURCE].node_id = "A"  # B's chunk naming A as its source
    with pytest.raises(ValueError, match="two different documents"):
        store.add([*_chunks(alpha), stolen])
    assert store.index.ids() == []  # nothing of either was stored
    store.add(_chunks(alpha))
    assert "payroll" not in store.index.get(["A"])[0].text


def test_one_documents_chunks_in_two_adds_with_another_between_are_stored_whole(make_store):
    store = make_store()
    first = Document(text="The first document talks about tides and the Moon. " * 8, id_="first")
    other = Document(text="Another document, about bread and sourdough starters. " * 4, id_="other")
    chunks = _chunks(first)
    store.add(chunks[:3])
    store.add(_chunks(other))
    store.add(chunks[3:])
    stored = {d.id: d.text for d in store.index.get(["first", "other"])}
    assert stored == {"first": first.text, "other": other.text}  # no chunk lost, no leading spaces


def test_pages_of_one_pdf_never_replace_one_another_added_together_or_one_by_one(make_store):
    store = make_store()
    pages = [
        Document(
            text=f"Page {i} of the manual explains step {i}.",
            metadata={"file_path": "/d/manual.pdf", "page_label": str(i)},
        )
        for i in range(1, 5)
    ]
    for page in pages:  # as VectorStoreIndex.insert does: one document at a time
        _build(store, [page])
    one_by_one = sorted(store.index.ids())
    store.clear()
    _build(store, pages)
    assert one_by_one == sorted(store.index.ids()) == [f"/d/manual.pdf#page={i}" for i in range(1, 5)]


# ---------------------------------------------------------------- LlamaIndex habits (#46 item 5)
def test_mmr_mode_returns_relevant_and_diverse_documents(make_store):
    store = make_store()
    docs = SimpleDirectoryReader(str(CORPUS)).load_data()
    index = _build(store, docs, transformations=[])  # documents go in whole: no splitter needed
    retriever = index.as_retriever(
        similarity_top_k=3, vector_store_query_mode="mmr", vector_store_kwargs={"mmr_threshold": 0.5}
    )
    nodes = retriever.retrieve("How long do solar inverters last?")
    parents = [n.node.relationships[NodeRelationship.SOURCE].node_id for n in nodes]
    assert len(nodes) == 3 and len(set(parents)) == 3 and parents[0].endswith("home_solar.md")
    with pytest.raises(ValueError, match="mmr_threshold must be a number in"):
        index.as_retriever(vector_store_query_mode="mmr", vector_store_kwargs={"mmr_threshold": 2}).retrieve("x")


def test_settings_embed_model_works_and_says_once_that_the_chunk_encoding_was_for_nothing(make_store, caplog):
    from llama_index.core import Settings
    from llama_index.embeddings.lmk import LMKEmbedding

    store = make_store()
    before = Settings._embed_model
    Settings.embed_model = LMKEmbedding(model="sentence-transformers/all-MiniLM-L6-v2")
    try:
        context = StorageContext.from_defaults(vector_store=store)
        index = VectorStoreIndex.from_documents(SimpleDirectoryReader(str(CORPUS)).load_data(), storage_context=context)
    finally:
        Settings._embed_model = before
    assert caplog.text.count("embedded every chunk before LMKVectorStore saw it") == 1
    assert "embed_model=store.embed_model" in caplog.text
    top = index.as_retriever(similarity_top_k=1).retrieve("How long do solar inverters last?")[0]
    assert top.node.metadata["file_name"] == "home_solar.md"


async def test_async_queries_and_writes_leave_the_event_loop_free(make_store, monkeypatch):
    """LlamaIndex's default async store methods call the sync ones on the event loop; ours run
    them in a thread, so other coroutines go on while a document is encoded or a query searched."""
    import time

    from llama_index.core.vector_stores.types import VectorStoreQuery

    from tests.loop_ticks import loop_ticks

    store = make_store()

    def slowly(method):
        def wrapper(*args, **kwargs):
            time.sleep(0.3)  # a slow store or a long document
            return method(*args, **kwargs)

        return wrapper

    index = store.index
    for name in ("add", "context"):
        monkeypatch.setattr(index, name, slowly(getattr(index, name)))
    async with loop_ticks() as ticks:
        node = TextNode(id_="tides", text="Spring tides come at new and full moon, neap tides at the quarters.")
        assert await store.async_add([node]) == ["tides"]
        after_add = ticks[0]
        result = await store.aquery(VectorStoreQuery(query_str="When are spring tides?", similarity_top_k=1))
    assert after_add >= 10 and ticks[0] - after_add >= 10  # the loop ran during each
    assert result.nodes and "Spring tides" in result.nodes[0].get_content()
    await store.adelete("tides")
    assert await store.aget_nodes(node_ids=["tides"]) == []
