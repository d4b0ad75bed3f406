"""The server's routes in-process: the shapes clients expect, vectors equal to the library's,
nothing truncated, and every bad request a 4xx JSON error naming what to change."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from tests.serve.conftest import DOCUMENTS

LONG = " ".join(f"Sentence number {i} says something about topic {i % 7}." for i in range(400))


def _error(response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["code"] == status
    for word in words:
        assert word in body["message"] or word == body["param"], body
    return body


def test_openai_embeddings_equal_the_library_vectors_as_float_and_base64(client, encoder):
    texts = ["Rotate the keys weekly.", LONG]
    expected = encoder.encode(texts)
    floats = client.post("/v1/embeddings", json={"input": texts, "model": "any-name"}).json()
    assert floats["object"] == "list" and floats["model"] == encoder.model_name
    got = np.array([item["embedding"] for item in floats["data"]], dtype=np.float32)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert [item["index"] for item in floats["data"]] == [0, 1]
    # usage counts every token of the long input: it was encoded in windows, not cut at 256
    tokens = sum(encoder.count_tokens(texts))
    assert floats["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens} and tokens > 2 * encoder.max_length
    packed = client.post("/v1/embeddings", json={"input": texts, "encoding_format": "base64"}).json()
    decoded = np.stack([np.frombuffer(base64.b64decode(i["embedding"]), dtype="<f4") for i in packed["data"]])
    np.testing.assert_allclose(decoded, expected, atol=1e-5)
    one = client.post("/v1/embeddings", json={"input": "Rotate the keys weekly."}).json()
    np.testing.assert_allclose(one["data"][0]["embedding"], expected[0], atol=1e-5)
    query = client.post("/v1/embeddings", json={"input": ["keys?"], "input_type": "query"}).json()
    np.testing.assert_allclose(query["data"][0]["embedding"], encoder.encode_query("keys?"), atol=1e-5)


def test_models_info_health_and_metrics(client, encoder):
    assert client.get("/v1/models").json()["data"][0]["id"] == encoder.model_name
    assert client.get("/health").json() == {"status": "ok"}
    info = client.get("/info").json()
    assert info["dimension"] == encoder.dimension and info["landmark_interval"] == encoder.fingerprint.granularity
    assert info["window_tokens"] == encoder.max_length and info["index"]["documents"] == len(DOCUMENTS)
    assert info["limits"]["max_inputs"] == 2048
    client.post("/v1/embeddings", json={"input": "hello"})
    client.post("/v1/embeddings", json={"input": ""})
    text = client.get("/metrics").text
    assert 'lmk_rag_requests_total{route="/v1/embeddings",status="200"} 1.0' in text
    assert 'lmk_rag_requests_total{route="/v1/embeddings",status="422"} 1.0' in text
    assert "lmk_rag_request_seconds_bucket" in text and "lmk_rag_batch_inputs_count" in text
    assert 'lmk_rag_tokens_total{route="/v1/embeddings"}' in text


def test_tei_embed_and_landmarks_with_their_spans(client, encoder):
    texts = ["Short one.", LONG]
    vectors = np.array(client.post("/embed", json={"inputs": texts}).json(), dtype=np.float32)
    np.testing.assert_allclose(vectors, encoder.encode(texts), atol=1e-5)
    raw = np.array(client.post("/embed", json={"inputs": "Short one.", "normalize": False}).json()[0])
    np.testing.assert_allclose(raw, encoder.encode(["Short one."], normalize=False)[0], atol=1e-4)
    assert abs(np.linalg.norm(raw) - 1.0) > 1e-3  # not normalised when asked not to be
    _error(client.post("/embed", json={"inputs": "x", "truncate": True}), 422, "truncate", "never truncates")
    landmarks = client.post("/embed_landmarks", json={"inputs": texts}).json()
    multis = encoder.encode_multi(texts)
    for got, multi in zip(landmarks, multis):
        assert [(e["text_offset"]["start"], e["text_offset"]["end"]) for e in got] == multi.spans
        np.testing.assert_allclose([e["embedding"] for e in got], multi.vectors, atol=1e-5)
    assert landmarks[1][-1]["text_offset"]["end"] == len(LONG.rstrip())  # the end of the long text is covered


def test_search_context_and_document_writes(client):
    hits = client.post("/search", json={"query": "how do I rotate the signing keys?", "k": 2}).json()["hits"]
    assert hits[0]["id"] == "keys" and len(hits) == 2
    top = hits[0]
    assert DOCUMENTS["keys"][top["span"]["start"] : top["span"]["end"]] == top["passage"]
    assert -1 <= top["similarity"] <= 1 and top["text"] is None and top["metadata"] == {"topic": "keys"}
    with_text = client.post("/search", json={"query": "backup", "k": 1, "with_text": True}).json()["hits"][0]
    assert with_text["text"] == DOCUMENTS["backup"]
    filtered = client.post("/search", json={"query": "keys", "filter": {"topic": "backup"}}).json()["hits"]
    assert [h["id"] for h in filtered] == ["backup"]
    context = client.post("/context", json={"query": "how long does a restore take?", "max_tokens": 40}).json()
    assert context["passages"] and context["tokens"] <= 40
    first = context["passages"][0]
    assert (
        first["id"] == "backup" and DOCUMENTS["backup"][first["span"]["start"] : first["span"]["end"]] == first["text"]
    )
    floor = client.post("/context", json={"query": "capital of France?", "min_score": 0.9}).json()
    assert floor == {"passages": [], "tokens": 0}

    stored = client.post(
        "/documents",
        json={
            "documents": [
                {"id": "new/doc 1", "text": "Gardening. Water tomatoes in the morning.", "metadata": {"n": 1}},
                {"text": "An id is made for a document sent without one."},
            ]
        },
    ).json()["ids"]
    assert stored[0] == "new/doc 1" and len(stored[1]) == 32
    assert client.get("/documents/new/doc 1").json() == {
        "id": "new/doc 1",
        "text": "Gardening. Water tomatoes in the morning.",
        "metadata": {"n": 1},
    }
    assert (
        client.post("/search", json={"query": "when to water tomatoes", "k": 1}).json()["hits"][0]["id"] == "new/doc 1"
    )
    assert client.delete("/documents/new/doc 1").json() == {"deleted": "new/doc 1"}
    _error(client.delete("/documents/new/doc 1"), 404, "doc_id")
    _error(client.get("/documents/new/doc 1"), 404, "doc_id")
    assert client.get("/info").json()["index"]["documents"] == len(DOCUMENTS) + 1


@pytest.mark.parametrize(
    ("route", "body", "status", "words"),
    [
        ("/v1/embeddings", {"input": 5}, 422, ["input"]),
        ("/v1/embeddings", {"input": ""}, 422, ["input", "empty"]),
        ("/v1/embeddings", {"input": []}, 422, ["input", "at least 1"]),
        ("/v1/embeddings", {"input": [[1, 2, 3]]}, 422, ["token ids"]),
        ("/v1/embeddings", {"input": "x", "dimensions": 64}, 422, ["dimensions"]),
        ("/v1/embeddings", {"input": "x", "encoding_format": "int8"}, 422, ["encoding_format"]),
        ("/v1/embeddings", {"input": "x", "temperature": 1}, 422, ["temperature"]),
        ("/v1/embeddings", {"inputs": "x"}, 422, ["input"]),
        ("/v1/embeddings", ["x"] * 10_000, 422, ["body"]),
        ("/v1/embeddings", {"input": ["x"] * 10_000}, 413, ["input", "2048"]),
        ("/embed", {"inputs": None}, 422, ["inputs"]),
        ("/embed_landmarks", {"inputs": ["ok", "  "]}, 422, ["inputs", "empty"]),
        ("/search", {"query": ""}, 422, ["query"]),
        ("/search", {"query": "x", "k": 0}, 422, ["k"]),
        ("/search", {"query": "x", "k": "many"}, 422, ["k"]),
        ("/search", {"query": "x", "k": "4"}, 422, ["k"]),
        ("/search", {"query": "x", "with_text": 0}, 422, ["with_text"]),
        ("/context", {"query": "x", "min_score": False}, 422, ["min_score"]),
        ("/documents", {"documents": [{"text": "x", "metadata": {"_lmk_id": 1}}]}, 422, ["metadata"]),
        ("/documents", {"documents": [{"text": "x", "metadata": {"n": 2**60}}]}, 422, ["metadata"]),
        ("/search", {"query": "x", "mode": "fast"}, 422, ["mode"]),
        ("/search", {"query": "x", "filter": {"topic": {"$regex": "k.*"}}}, 422, ["filter", "$regex"]),
        ("/search", {"query": "x", "filter": "topic=keys"}, 422, ["filter"]),
        ("/context", {"query": "x", "max_tokens": -1}, 422, ["max_tokens"]),
        ("/context", {"query": "x", "min_score": 2}, 422, ["min_score"]),
        ("/context", {"query": "x", "filter": {"$or": "no"}}, 422, ["filter"]),
        ("/documents", {"documents": []}, 422, ["documents"]),
        ("/documents", {"documents": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, 422, ["duplicates"]),
        ("/documents", {"documents": [{"text": "x", "metadata": {"m": {"nested": 1}}}]}, 422, ["metadata"]),
    ],
)
def test_bad_requests_get_a_4xx_naming_the_field(client, route, body, status, words):
    _error(client.post(route, json=body), status, *words)


def test_malformed_bodies_unknown_routes_and_methods(client):
    _error(client.post("/search", content=b"{not json", headers={"content-type": "application/json"}), 422, "JSON")
    _error(client.post("/search", content=b"query=x"), 422, "body")
    _error(client.post("/search", content=b"\xff\xfe{", headers={"content-type": "application/json"}), 422, "JSON")
    _error(client.get("/v2/everything"), 404, "/docs")
    _error(client.get("/v1/embeddings"), 405, "POST")
    wrong_method = client.post("/documents/abc")
    _error(wrong_method, 405, "DELETE, GET")
    assert wrong_method.headers["allow"] == "DELETE, GET"


def test_a_large_body_is_413_before_it_is_read(client):
    big = json.dumps({"input": ["x" * 1000] * 50_000}).encode()  # 50 MB
    _error(client.post("/v1/embeddings", content=big, headers={"content-type": "application/json"}), 413, "limit")

    def chunks():  # no content-length: counted as it streams
        for _ in range(10):
            yield b" " * (1024 * 1024)

    _error(client.post("/v1/embeddings", content=chunks(), headers={"content-type": "application/json"}), 413, "limit")


def test_the_api_key_is_asked_for_every_route_but_health(app_factory):
    from fastapi.testclient import TestClient

    with TestClient(app_factory(api_key="s3cret")) as c:
        _error(c.post("/v1/embeddings", json={"input": "x"}), 401, "API key")
        wrong = c.post("/search", json={"query": "x"}, headers={"Authorization": "Bearer nope"})
        assert _error(wrong, 401, "authorization") and wrong.headers["www-authenticate"] == "Bearer"
        _error(c.get("/metrics", headers={"Authorization": "Basic s3cret"}), 401)
        assert c.get("/health").status_code == 200 and c.get("/openapi.json").status_code == 200
        ok = c.post("/v1/embeddings", json={"input": "x"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert "s3cret" not in c.get("/info", headers={"Authorization": "Bearer s3cret"}).text


def test_without_an_index_the_index_routes_say_how_to_get_one(app_factory):
    from fastapi.testclient import TestClient

    with TestClient(app_factory(index=False)) as c:
        assert c.post("/embed", json={"inputs": "x"}).status_code == 200
        _error(c.post("/search", json={"query": "x"}), 404, "--index")
        _error(c.post("/documents", json={"documents": [{"text": "x"}]}), 404, "--index")
        assert c.get("/info").json()["index"] is None


def test_cors_is_off_unless_origins_are_given(app_factory):
    from fastapi.testclient import TestClient

    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    with TestClient(app_factory(index=False)) as c:
        assert "access-control-allow-origin" not in c.options("/embed", headers=preflight).headers
    with TestClient(app_factory(index=False, cors_origins=("https://app.example",))) as c:
        assert c.options("/embed", headers=preflight).headers["access-control-allow-origin"] == "https://app.example"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("max_inputs", 0),
        ("max_body_bytes", "8MB"),
        ("max_concurrent", True),
        ("shutdown_timeout", -1),
        ("api_key", "  "),
        ("cors_origins", ["https://a"]),
    ],
)
def test_bad_settings_are_refused_by_name(setting, value):
    from lmk_rag.errors import InvalidInputError
    from lmk_rag.serve import ServeSettings

    with pytest.raises(InvalidInputError, match=setting):
        ServeSettings(**{setting: value})


def test_an_app_mounted_inside_another_serves_without_its_own_lifespan(app_factory, encoder):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    parent = FastAPI()
    parent.mount("/lmk", app_factory(index=False))  # mounted apps get no lifespan events
    with TestClient(parent) as c:
        got = c.post("/lmk/v1/embeddings", json={"input": "hello"}).json()["data"][0]["embedding"]
    np.testing.assert_allclose(got, encoder.encode(["hello"])[0], atol=1e-5)


def test_an_index_with_another_encoder_is_refused(encoder, tiny_bert_dir, tmp_path):
    from lmk_rag import LMKEncoder
    from lmk_rag.errors import InvalidInputError
    from lmk_rag.index import QdrantIndex
    from lmk_rag.serve import create_app

    other = QdrantIndex(path=tmp_path / "other", encoder=LMKEncoder(str(tiny_bert_dir), device="cpu"))
    with pytest.raises(InvalidInputError, match="another encoder"):
        create_app(encoder, other)
    other.close()
