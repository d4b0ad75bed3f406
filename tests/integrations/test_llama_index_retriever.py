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
    retriever = LMKRetriever(index, similarity_top_k=2, passage="peak")
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
