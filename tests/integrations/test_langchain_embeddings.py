"""LMKEmbeddings against LangChain's standard suites, and inside an LCEL chain."""

from __future__ import annotations

import asyncio
import logging

import pytest
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests
from pydantic import ValidationError

from langchain_lmk import LMKEmbeddings


class TestLMKEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[LMKEmbeddings]:
        return LMKEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"device": "cpu"}


class TestLMKEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[LMKEmbeddings]:
        return LMKEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"device": "cpu"}


def test_same_settings_share_one_encoder():
    from lmk_rag.framework_fields import clear_encoder_cache

    clear_encoder_cache()  # an encoder cached by an earlier test may hold a model since evicted
    a, b = LMKEmbeddings(device="cpu"), LMKEmbeddings(device="cpu")
    c = LMKEmbeddings(device="cpu", granularity=64)
    assert a.encoder is b.encoder and a.encoder is not c.encoder
    assert a.encoder.model is c.encoder.model  # one loaded model for both


def test_fields_validated_and_extra_forbidden():
    with pytest.raises(ValidationError):
        LMKEmbeddings(pooling="max")
    with pytest.raises(ValidationError):
        LMKEmbeddings(batch_size=0)
    with pytest.raises(ValidationError):
        LMKEmbeddings(not_a_field=1)
    with pytest.raises(TypeError):
        LMKEmbeddings(device="cpu").embed_query(None)


def test_long_input_is_kept_whole_and_caps_are_reported(caplog):
    emb = LMKEmbeddings(device="cpu")
    head = "The launch code is 7141. "
    long_doc = head + "Filler about unrelated gardening topics. " * 400
    capped = LMKEmbeddings(device="cpu", truncate_tokens=64)
    with caplog.at_level(logging.WARNING, logger="lmk_rag"):
        capped.embed_documents([long_doc])
    assert "truncated" in caplog.text
    # The whole text differs from its first 64 tokens: the windows saw the rest.
    assert emb.embed_documents([long_doc])[0] != capped.embed_documents([long_doc])[0]


async def test_async_methods_do_not_block_the_loop():
    emb = LMKEmbeddings(device="cpu")
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    vectors = await emb.aembed_documents(["a text " * 150] * 4)  # ~0.3 s of encoding: time for ticks
    task.cancel()
    assert len(vectors) == 4 and ticks > 5
    assert await emb.aembed_query("q") == emb.embed_query("q")


def test_in_memory_vector_store_in_an_lcel_chain():
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(LMKEmbeddings(device="cpu"))
    store.add_documents(
        [
            Document(page_content="Sourdough starter is fed with flour and water every day.", id="bread"),
            Document(page_content="Spring tides happen at new and full moon.", id="tides"),
            Document(page_content="A bicycle chain needs one drop of oil per roller.", id="bike"),
        ]
    )
    retriever = store.as_retriever(search_kwargs={"k": 1})
    seen: list[str] = []

    def format_docs(docs):
        seen.extend(d.id for d in docs)
        return "\n".join(d.page_content for d in docs)

    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    llm = FakeListChatModel(responses=["At new and full moon."])
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    assert chain.invoke("When are spring tides?") == "At new and full moon."
    assert seen == ["tides"]


def test_the_old_name_of_the_truncation_setting_says_the_new_one():
    """max_tokens means a context's token budget only; the encoder's truncation is truncate_tokens (#46 item 7)."""
    with pytest.raises(ValueError, match="max_tokens is now truncate_tokens"):
        LMKEmbeddings(device="cpu", max_tokens=64)
