"""LlamaIndex LMKRetriever: passages as nodes with spans and parent, inside a query engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import SimpleDirectoryReader
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeRelationship
from llama_index.retrievers.lmk import LMKRetriever, ingest_documents

from lmk_rag import LMKEncoder
from lmk_rag.index import QdrantIndex

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "sample_corpus"


@pytest.fixture(scope="module")
def index():
    idx = QdrantIndex(location=":memory:", encoder=LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu"))
    docs = SimpleDirectoryReader(str(CORPUS), filename_as_id=True).load_data()
    ids = ingest_documents(idx, docs)
    assert len(idx) == len(ids) == 5
    return idx


def test_nodes_carry_spans_and_parent(index):
    # A factoid in one landmark of a short document: the single best landmark (``peak``) names it.
    retriever = LMKRetriever(index, similarity_top_k=2, mode="passage", passage="peak")
    nodes = retriever.retrieve("How many copies of the Gutenberg Bible were printed?")
    top = nodes[0]
    parent_id = top.node.relationships[NodeRelationship.SOURCE].node_id
    parent = index.get([parent_id])[0]
    assert parent.metadata["file_name"] == "printing_press.md"
    assert parent.text[top.node.start_char_idx : top.node.end_char_idx] == top.node.text
    assert "180 copies" in top.node.text and top.score >= nodes[1].score


def test_a_passage_rule_outside_region_and_peak_is_refused(index):
    with pytest.raises(ValueError, match="passage must be one of"):
        LMKRetriever(index, passage="best")


def test_retriever_query_engine(index):
    engine = RetrieverQueryEngine.from_args(LMKRetriever(index, similarity_top_k=1), llm=MockLLM(max_tokens=8))
    response = engine.query("What does grey liquid on a sourdough starter mean?")
    assert response.source_nodes[0].node.metadata["file_name"] == "sourdough.md"


def test_bad_arguments(index):
    with pytest.raises(ValueError, match="similarity_top_k"):
        LMKRetriever(index, similarity_top_k=0)
    with pytest.raises(TypeError, match="index must be"):
        LMKRetriever("nope")


def test_the_default_retriever_hands_the_llm_the_context(index):
    nodes = LMKRetriever(index, max_tokens=200).retrieve("How long do solar inverters last?")
    assert nodes and sum(index.encoder.count_tokens([n.node.get_content() for n in nodes])) <= 200
    for n in nodes:
        parent = index.get([n.node.relationships[NodeRelationship.SOURCE].node_id])[0]
        assert parent.text[n.node.start_char_idx : n.node.end_char_idx] == n.node.get_content()
    assert index.get([nodes[0].node.ref_doc_id])[0].metadata["file_name"] == "home_solar.md"
    with pytest.raises(ValueError, match="mode must be one of"):
        LMKRetriever(index, mode="documents")
    with pytest.raises(ValueError, match="max_tokens"):
        LMKRetriever(index, max_tokens=0)


def test_the_postprocessor_cuts_any_retrievers_nodes_to_landmark_passages():
    """A plain VectorStoreIndex (LlamaIndex's in-memory store, its own splitter) retrieves nodes;
    the postprocessor cuts them to passages within the budget, spans into the source documents."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.postprocessor.lmk import LMKContextPostprocessor

    docs = SimpleDirectoryReader(str(CORPUS), filename_as_id=True).load_data()
    plain = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    post = LMKContextPostprocessor(encoder=LMKEncoder(device="cpu"), max_tokens=160)
    engine = plain.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=5, node_postprocessors=[post])
    response = engine.query("How long do solar inverters last?")
    nodes = response.source_nodes
    assert nodes and sum(LMKEncoder(device="cpu").count_tokens([n.node.get_content() for n in nodes])) <= 160
    by_id = {d.doc_id: d.text for d in docs}
    for n in nodes:
        source = n.node.relationships[NodeRelationship.SOURCE].node_id
        assert by_id[source][n.node.start_char_idx : n.node.end_char_idx] == n.node.get_content()


def test_ingesting_the_same_files_again_replaces_them():
    """SimpleDirectoryReader without filename_as_id gives random ids; the index uses the file path
    (as filename_as_id would), so a second ingest of the same folder adds nothing."""
    idx = QdrantIndex(location=":memory:", encoder=LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu"))
    first = ingest_documents(idx, SimpleDirectoryReader(str(CORPUS)).load_data())
    again = ingest_documents(idx, SimpleDirectoryReader(str(CORPUS)).load_data())
    assert first == again and len(idx) == 5
    assert sorted(first) == sorted(str(p) for p in CORPUS.glob("*.md"))
    named = SimpleDirectoryReader(str(CORPUS), filename_as_id=True).load_data()
    assert ingest_documents(idx, named) == [d.doc_id for d in named] and len(idx) == 5


def test_parts_of_one_file_get_the_ids_filename_as_id_gives():
    from llama_index.core import Document
    from llama_index.retrievers.lmk.base import stable_ids

    pages = [Document(text=f"page {i}", metadata={"file_path": "/d/a.pdf"}) for i in range(2)]
    own = Document(text="x", id_="mine", metadata={"file_path": "/d/b.md"})
    assert stable_ids([*pages, own]) == ["/d/a.pdf_part_0", "/d/a.pdf_part_1", "mine"]


def test_the_retriever_takes_llama_index_metadata_filters_and_hides_file_metadata_from_the_llm(index):
    from llama_index.core.schema import MetadataMode
    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

    only = MetadataFilters(
        filters=[MetadataFilter(key="file_name", value=["tides.md", "sourdough.md"], operator=FilterOperator.IN)]
    )
    for mode in ("context", "passage"):
        nodes = LMKRetriever(index, similarity_top_k=5, mode=mode, filters=only).retrieve("how things work")
        assert nodes and {n.node.metadata["file_name"] for n in nodes} <= {"tides.md", "sourdough.md"}
        shown = nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)
        assert "file_path: " in shown and "last_modified_date" not in shown
    with pytest.raises(ValueError, match="filter operator CONTAINS"):
        LMKRetriever(index, filters=MetadataFilters(filters=[MetadataFilter(key="a", value="b", operator="contains")]))


async def test_aretrieve_leaves_the_event_loop_free(index, monkeypatch):
    """BaseRetriever's default ``_aretrieve`` runs the search on the event loop; ours runs it in a
    thread, so other coroutines (a server's other requests) go on meanwhile."""
    import time

    from tests.loop_ticks import loop_ticks

    retriever = LMKRetriever(index, similarity_top_k=2)
    real = index.context

    def slow_context(*args, **kwargs):
        time.sleep(0.3)  # a slow store or a remote server
        return real(*args, **kwargs)

    monkeypatch.setattr(index, "context", slow_context)
    async with loop_ticks() as ticks:
        nodes = await retriever.aretrieve("How long do solar inverters last?")
    assert nodes and ticks[0] >= 10  # the loop ran while the retrieval waited
