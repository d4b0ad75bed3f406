"""LMKEmbedding end to end in LlamaIndex: index + query engine, ingestion pipeline, Settings."""

from __future__ import annotations

import pytest
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.embeddings.lmk import LMKEmbedding
from pydantic import ValidationError

DOCS = [
    Document(text="Sourdough starter is fed with flour and water every day.", id_="bread"),
    Document(text="Spring tides happen at new and full moon, when Sun and Moon line up.", id_="tides"),
    Document(text="A bicycle chain needs one drop of oil per roller, then wipe the excess.", id_="bike"),
]


@pytest.fixture(scope="module")
def embed_model() -> LMKEmbedding:
    return LMKEmbedding(device="cpu")


def test_methods_and_class_name(embed_model):
    assert LMKEmbedding.class_name() == "LMKEmbedding"
    q = embed_model.get_query_embedding("when are spring tides?")
    t = embed_model.get_text_embedding("tides")
    batch = embed_model.get_text_embedding_batch(["a", "b", "c"])
    assert len(q) == len(t) == 384 and len(batch) == 3
    assert batch[0] == pytest.approx(embed_model.get_text_embedding("a"), abs=1e-5)


async def test_async_methods(embed_model):
    assert await embed_model.aget_query_embedding("q") == pytest.approx(embed_model.get_query_embedding("q"), abs=1e-6)
    assert len(await embed_model.aget_text_embedding_batch(["a", "b"])) == 2
    assert len(await embed_model.aget_text_embedding("a")) == 384


def test_validation():
    with pytest.raises(ValidationError):
        LMKEmbedding(embed_batch_size=0)
    with pytest.raises(ValidationError):
        LMKEmbedding(granularity="paragraph")


def test_query_engine_answers_from_the_right_document(embed_model):
    index = VectorStoreIndex.from_documents(DOCS, embed_model=embed_model)
    response = index.as_query_engine(llm=MockLLM(), similarity_top_k=1).query("When are spring tides?")
    assert response.source_nodes[0].node.ref_doc_id == "tides"


def test_ingestion_pipeline_with_splitter(embed_model):
    pipeline = IngestionPipeline(transformations=[SentenceSplitter(chunk_size=32, chunk_overlap=0), embed_model])
    nodes = pipeline.run(documents=DOCS)
    assert len(nodes) >= 3 and all(len(n.embedding) == 384 for n in nodes)


def test_settings_embed_model(embed_model):
    previous = Settings._embed_model
    try:
        Settings.embed_model = embed_model
        index = VectorStoreIndex.from_documents(DOCS)
        nodes = index.as_retriever(similarity_top_k=1).retrieve("oil for the bike chain")
        assert nodes[0].node.ref_doc_id == "bike"
    finally:
        Settings._embed_model = previous


def test_shares_encoder_with_langchain():
    from langchain_lmk import LMKEmbeddings

    assert LMKEmbedding(device="cpu").encoder is LMKEmbeddings(device="cpu").encoder


def test_model_name_loads_that_model_or_is_refused_never_ignored(tiny_bert_dir):
    import pytest
    from llama_index.embeddings.lmk import LMKEmbedding

    from lmk_rag.errors import ModelLoadError

    tiny = LMKEmbedding(model_name=str(tiny_bert_dir), device="cpu")
    assert tiny.encoder.dimension == 32 and tiny.model_name == tiny.encoder.model_name
    assert len(tiny.get_text_embedding("a text")) == 32
    with pytest.raises(ModelLoadError):
        LMKEmbedding(model_name="BAAI/bge-small-en-v1.5", device="cpu")  # not loadable offline: said, not ignored
    with pytest.raises(ValueError, match="two different models"):
        LMKEmbedding(model_name=str(tiny_bert_dir), model="sentence-transformers/all-MiniLM-L6-v2")
    assert LMKEmbedding(device="cpu").model_name == "lmk-rag/all-MiniLM-L6-v2-lmk-v4"
