"""A real ``lmk-rag serve`` on loopback, used by clients that already exist: the ``openai``
client, LangChain's ``OpenAIEmbeddings``, LlamaIndex's ``OpenAIEmbedding`` (sync and async), and
lmk-rag's own retrievers by ``url=``; after ``kill -9`` during writes every acknowledged document is
there once and whole, and SIGTERM finishes the write in flight."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import numpy as np
import pytest

from tests.serve.conftest import DOCUMENTS
from tests.serve.server import STOPPED_BY_SIGTERM, start_server, stop

pytestmark = pytest.mark.slow
KEY = "test-key-123"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served") / "index"
    proc, url = start_server(folder, api_key=KEY)
    yield url
    assert stop(proc) in STOPPED_BY_SIGTERM


@pytest.fixture(scope="module")
def remote(server):
    from lmk_rag.index import RemoteIndex

    with RemoteIndex(server, api_key=KEY) as index:
        index.add(list(DOCUMENTS.values()), ids=list(DOCUMENTS), metadatas=[{"topic": k} for k in DOCUMENTS])
        yield index


async def test_the_openai_client_sync_and_async(server, encoder):
    from openai import AsyncOpenAI, OpenAI

    texts = ["How do I rotate the keys?", "A second text."]
    expected = encoder.encode(texts)
    made = OpenAI(base_url=server + "/v1", api_key=KEY).embeddings.create(input=texts, model="lmk")
    np.testing.assert_allclose([d.embedding for d in made.data], expected, atol=1e-5)  # base64 on the wire
    assert made.usage.prompt_tokens == sum(encoder.count_tokens(texts))
    floats = await AsyncOpenAI(base_url=server + "/v1", api_key=KEY).embeddings.create(
        input=texts[0], model="lmk", encoding_format="float"
    )
    np.testing.assert_allclose(floats.data[0].embedding, expected[0], atol=1e-5)
    from openai import AuthenticationError

    with pytest.raises(AuthenticationError, match="API key"):
        OpenAI(base_url=server + "/v1", api_key="wrong").embeddings.create(input="x", model="lmk")


async def test_langchain_and_llama_index_openai_embedding_classes(server, encoder):
    from langchain_openai import OpenAIEmbeddings
    from llama_index.embeddings.openai import OpenAIEmbedding

    expected = encoder.encode(["Backups run nightly."])[0]
    lc = OpenAIEmbeddings(base_url=server + "/v1", api_key=KEY, model="lmk", check_embedding_ctx_length=False)
    np.testing.assert_allclose(lc.embed_documents(["Backups run nightly."])[0], expected, atol=1e-5)
    np.testing.assert_allclose(await lc.aembed_query("Backups run nightly."), expected, atol=1e-5)
    li = OpenAIEmbedding(model_name="lmk", api_base=server + "/v1", api_key=KEY)
    np.testing.assert_allclose(li.get_text_embedding("Backups run nightly."), expected, atol=1e-5)
    np.testing.assert_allclose(await li.aget_query_embedding("Backups run nightly."), expected, atol=1e-5)
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding  # LlamaIndex's class for compatible servers

    like = OpenAILikeEmbedding(model_name="lmk", api_base=server + "/v1", api_key=KEY)
    batch = like.get_text_embedding_batch(["Backups run nightly."] * 3)
    np.testing.assert_allclose(batch, [expected] * 3, atol=1e-5)


def test_a_remote_index_answers_as_a_local_one(remote, encoder, tmp_path):
    from lmk_rag.errors import InvalidInputError, InvalidTypeError
    from lmk_rag.index import QdrantIndex

    local = QdrantIndex(path=tmp_path / "local", encoder=encoder)
    local.add(list(DOCUMENTS.values()), ids=list(DOCUMENTS), metadatas=[{"topic": k} for k in DOCUMENTS])
    for query in ("rotate the signing keys", "how long is a restore", "install on windows"):
        got, want = remote.search(query, k=3), local.search(query, k=3)
        assert [(h.id, h.span, h.passage, h.text) for h in got] == [(h.id, h.span, h.passage, h.text) for h in want]
        assert [h.similarity for h in got] == pytest.approx([h.similarity for h in want], abs=1e-5)
        assert remote.context(query, 64) == local.context(query, 64)
    local.close()
    assert remote.search("keys", filter={"topic": "backup"})[0].id == "backup"
    assert len(remote) == len(DOCUMENTS) and [d.id for d in remote.get(["keys", "missing"])] == ["keys"]
    with pytest.raises(InvalidInputError, match="token_counter"):
        remote.context("x", token_counter=len)
    with pytest.raises(InvalidInputError, match=r"\$regex"):
        remote.search("x", filter={"topic": {"$regex": "k"}})
    with pytest.raises(InvalidTypeError, match="dict filter"):
        remote.search("x", filter=object())


async def test_framework_retrievers_by_url(server, remote):
    from llama_index.retrievers.lmk import LMKRetriever as LlamaRetriever

    from langchain_lmk import LMKRetriever as LangChainRetriever

    question = "how do I rotate the signing keys?"
    lc = LangChainRetriever(url=server, api_key=KEY, max_tokens=64)
    docs = lc.invoke(question)
    assert docs[0].metadata["parent_id"] == "keys" and docs[0].metadata["tokens"] <= 64
    assert [d.page_content for d in await lc.ainvoke(question)] == [d.page_content for d in docs]
    passages = LangChainRetriever(url=server, api_key=KEY, mode="passage", k=2).invoke(question)
    assert len(passages) == 2 and passages[0].metadata["similarity"] > 0
    whole = LangChainRetriever(url=server, api_key=KEY, mode="document", k=1).invoke(question)
    assert whole[0].page_content == DOCUMENTS["keys"]
    li = LlamaRetriever(url=server, api_key=KEY, max_tokens=64)
    nodes = li.retrieve(question)
    assert nodes[0].node.ref_doc_id == "keys"
    assert [n.node.get_content() for n in await li.aretrieve(question)] == [n.node.get_content() for n in nodes]
    from lmk_rag.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="API key"):
        LangChainRetriever(url=server, api_key="wrong").invoke(question)
    with pytest.raises(ValueError, match="not both"):
        LangChainRetriever(url=server, index=remote)


def test_kill_9_during_writes_keeps_every_acknowledged_document_and_sigterm_finishes_a_write(tmp_path, encoder):
    from lmk_rag.index.verify import healthy

    folder = tmp_path / "index"
    proc, url = start_server(folder)
    acked: dict[str, str] = {}
    stop_writing = threading.Event()

    def writer() -> None:
        n = 0
        with httpx.Client(base_url=url, timeout=60) as client:
            while not stop_writing.is_set() and n < 400:
                batch = {f"doc{n + j}": f"Document {n + j}. " + "Words about things. " * (20 + j) for j in range(3)}
                n += 3
                try:
                    r = client.post("/documents", json={"documents": [{"id": k, "text": v} for k, v in batch.items()]})
                except httpx.HTTPError:
                    return  # the server died with this request in flight: not acknowledged
                if r.status_code == 200:
                    acked.update(batch)

    thread = threading.Thread(target=writer)
    thread.start()
    deadline = time.monotonic() + 60
    while len(acked) < 9 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=15)
    stop_writing.set()
    thread.join(timeout=60)
    assert len(acked) >= 9

    proc, url = start_server(folder)  # restart on the same folder
    from lmk_rag.index import RemoteIndex

    with RemoteIndex(url) as remote:
        stored = {d.id: d.text for d in remote.get(sorted(acked))}
    assert stored == acked  # every acknowledged document, with its text

    # SIGTERM while a write is in flight: the write finishes and is answered, then the server stops.
    late = {
        f"late{i}": f"Late document {i}. " + "It has a few sentences about the topic at hand. " * 40 for i in range(8)
    }
    answer: dict[str, httpx.Response] = {}

    def write() -> None:
        body = {"documents": [{"id": k, "text": v} for k, v in late.items()]}
        answer["r"] = httpx.post(url + "/documents", json=body, timeout=120)

    late_writer = threading.Thread(target=write)
    late_writer.start()
    time.sleep(0.5)  # the request is in; encoding 8 long documents takes longer than this
    assert stop(proc) in STOPPED_BY_SIGTERM
    late_writer.join(timeout=120)
    assert answer["r"].status_code == 200, answer["r"].text
    acked.update(late)
    from lmk_rag.index import QdrantIndex

    with QdrantIndex(path=folder, encoder=encoder) as index:
        ids = index.ids()
        assert len(ids) == len(set(ids)) and set(acked) <= set(ids)  # once each; maybe the one in flight too
        encoded = index.get_encoded(ids)
        assert all(healthy(doc, multi, True) for doc, multi in encoded)  # nothing half-written
        assert index.store.landmark_count() == sum(len(doc.spans) for doc, _ in encoded)
