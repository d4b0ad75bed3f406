"""Qdrant on its real engine: the embedded Edge shard, prefetch + MaxSim, payload indexes,
quantized landmarks, hybrid BM25, copying between stores, and old local-mode folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lmk_rag import LMKEncoder, MultiVector
from lmk_rag.errors import IncompatibleIndexError
from lmk_rag.index import ChromaIndex, QdrantIndex, copy_index
from lmk_rag.index.fusion import fuse
from lmk_rag.index.qdrant.layout import default_prefetch_limit, landmark_search

from ..cli_runner import run_cli
from .test_index_contract import META, NAMES, TEXTS

RARE = "Error XQ-7731 means the flux valve overheated; let it cool for an hour before restarting the pump."
QUERIES = [
    "How many copies of the Gutenberg Bible were printed?",
    "sourdough starter hooch",
    "Bay of Fundy tidal range",
]


def filled(index: QdrantIndex | ChromaIndex) -> QdrantIndex | ChromaIndex:
    index.add(TEXTS + [RARE], ids=NAMES + ["pump.md"], metadatas=META + [{"topic": "pump", "n": 9, "public": False}])
    return index


def all_vectors(index) -> dict[str, tuple]:
    return {doc.id: (doc, mv) for batch in index.scan(3) for doc, mv in batch}


def test_embedded_index_is_an_edge_shard_and_hybrid_is_the_default(tmp_path, base_encoder):
    idx = filled(QdrantIndex(tmp_path / "idx", encoder=base_encoder))
    try:
        assert (tmp_path / "idx" / "lmk" / "edge_config.json").is_file()
        meta = json.loads((tmp_path / "idx" / "lmk.lmk.json").read_text())
        assert meta["fingerprint"]["model"] == base_encoder.fingerprint.model and meta["quantization"] is None
        assert idx.default_mode == "hybrid" and idx.modes[0] == "hybrid" and idx.vector_default_mode == "prefetch"
        for query in QUERIES:
            default = idx.search(query, k=3, mode="prefetch")
            exact = idx.search(query, k=3, mode="maxsim")
            hybrid = idx.search(query, k=3)
            assert [h.id for h in hybrid] == [h.id for h in idx.search(query, k=3, mode="hybrid")]
            by_vector = idx.search_by_vector(idx.encoder.encode_query(query), k=3)  # prefetch: no text for BM25
            assert [h.id for h in by_vector] == [h.id for h in default]
            # With every document among the candidates, prefetch + rerank is exact MaxSim.
            assert [h.id for h in default] == [h.id for h in exact]
            assert np.allclose([h.score for h in default], [h.score for h in exact], atol=1e-5)
    finally:
        idx.close()


def test_the_collections_landmark_vectors_stay_mapped_from_disk(tmp_path, base_encoder):
    """RAM must not grow with every landmark of the index: the collection's landmark multivector
    (read for the few documents a search rescores) is mapped, never loaded whole, in the growing
    segment and in the optimized one; the pooled vectors (searched by HNSW) stay in RAM."""
    idx = filled(QdrantIndex(tmp_path / "idx", encoder=base_encoder))
    idx.optimize()
    before = [h.id for h in idx.search(QUERIES[0], k=3, mode="maxsim")]
    idx.close()
    shard = tmp_path / "idx" / "lmk"
    assert json.loads((shard / "edge_config.json").read_text())["vectors"]["landmarks"]["memory"] == "cold"
    segments = [json.loads(p.read_text())["config"]["vector_data"] for p in shard.glob("segments/*/segment.json")]
    assert segments
    assert all(not s["landmarks"]["storage_type"].startswith("InRam") for s in segments)
    assert any(s["pooled"]["storage_type"].startswith("InRam") for s in segments)
    reopened = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    try:
        assert [h.id for h in reopened.search(QUERIES[0], k=3, mode="maxsim")] == before
    finally:
        reopened.close()


def test_prefetch_limit_grows_with_the_corpus_and_can_be_set(tmp_path, base_encoder):
    assert default_prefetch_limit(10, 100) == 100
    assert default_prefetch_limit(50, 100) == 500
    assert default_prefetch_limit(10, 100_000) == 1581
    assert default_prefetch_limit(10, 1_000_000) == 5000
    idx = filled(QdrantIndex(location=":memory:", encoder=base_encoder, prefetch_limit=1))
    # One pooled candidate: the rerank can only return that one.
    assert len(idx.search(QUERIES[0], k=1)) == 1
    assert idx._prefetch(3) == 3  # never fewer candidates than results
    with pytest.raises(ValueError, match="prefetch_limit"):
        QdrantIndex(location=":memory:", encoder=base_encoder, prefetch_limit=0)


def test_the_landmark_search_widens_its_beam_as_the_corpus_grows(tmp_path, base_encoder, monkeypatch):
    """Near-copies crowd a large corpus's nearest landmarks: the HNSW beam (ef) grows as 3 sqrt(n)
    while the landmarks fetched stay 3 per candidate document; the index passes its size."""
    assert landmark_search(20, 100) == (64, 256)
    assert landmark_search(20, 100_000) == (64, 948)
    assert landmark_search(20, 1_000_000) == (64, 3000)
    assert landmark_search(200, 100) == (600, 600)
    idx = filled(QdrantIndex(tmp_path / "idx", encoder=base_encoder))
    try:
        sizes: list[int] = []
        original = idx.store.landmark_candidates

        def spy(vector: list[float], limit: int, corpus_size: int) -> list[tuple[str, float]] | None:
            sizes.append(corpus_size)
            return original(vector, limit, corpus_size)

        monkeypatch.setattr(idx.store, "landmark_candidates", spy)
        assert idx.search(QUERIES[0], k=2, mode="prefetch")
        assert sizes == [len(idx)] and len(idx) == len(TEXTS) + 1
    finally:
        idx.close()


def test_filters_build_payload_indexes_on_the_keys_they_use(tmp_path, base_encoder):
    idx = filled(QdrantIndex(tmp_path / "idx", encoder=base_encoder))
    try:
        assert {h.id for h in idx.search("how things work", k=9, filter={"public": False})} == {
            NAMES[1],
            NAMES[3],
            "pump.md",
        }
        assert [h.id for h in idx.search("anything", k=9, filter={"topic": "tides", "n": 4})] == ["tides.md"]
        schema = set(idx.store.shard.info().payload_schema)
        assert {"metadata.public", "metadata.topic", "metadata.n"} <= {k.replace('"', "") for k in schema}
    finally:
        idx.close()


@pytest.mark.parametrize("where", ["edge", "memory"])
def test_hybrid_finds_a_rare_exact_term_with_either_fusion(tmp_path, base_encoder, where):
    kwargs = {"path": tmp_path / "idx"} if where == "edge" else {"location": ":memory:"}
    idx = filled(QdrantIndex(**kwargs, encoder=base_encoder))
    try:
        # An exact code the dense model cannot read: BM25 ranks it first, RRF and BM25's share keep it there.
        for fusion, weight in (("rrf", 0.3), ("weighted", 1.0)):
            idx.hybrid_fusion, idx.hybrid_weight = fusion, weight
            hits = idx.search("XQ-7731", k=3, mode="hybrid")
            assert hits[0].id == "pump.md" and "XQ-7731" in hits[0].passage
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        idx.hybrid_fusion, idx.hybrid_weight = "weighted", 0.0  # no BM25 share: MaxSim's order
        query = "How many copies of the Gutenberg Bible were printed?"
        assert [h.id for h in idx.search(query, k=3, mode="hybrid")] == [
            h.id for h in idx.search(query, k=3, mode="maxsim")
        ]
        assert (
            idx.search("sourdough starter hooch", k=1, mode="hybrid", filter={"public": False})[0].id == "sourdough.md"
        )
        assert idx.search("XQ-7731", k=3, mode="hybrid", filter={"topic": "tides"})[0].id == "tides.md"
    finally:
        idx.close()


def test_fusion_rules():
    maxsim = np.array([0.9, 0.5, 0.7])
    bm25 = [None, 10.0, 5.0]
    weighted = fuse(maxsim, bm25, "weighted", 0.5)
    assert np.allclose(weighted, [0.5 * 1.0, 0.5 * 0.0 + 0.5 * 1.0, 0.5 * 0.5 + 0.5 * 0.5])
    assert np.allclose(fuse(maxsim, bm25, "weighted", 0.0), [1.0, 0.0, 0.5])
    rrf = fuse(maxsim, bm25, "rrf")
    assert np.allclose(rrf, [1 / 61, 1 / 63 + 1 / 61, 1 / 62 + 1 / 62])


def test_hybrid_where_it_cannot_run_says_why(tmp_path, base_encoder):
    chroma = ChromaIndex(tmp_path / "c", encoder=base_encoder)
    chroma.add(["a text"], ids=["a"])
    with pytest.raises(ValueError, match="QdrantIndex"):
        chroma.search("text", mode="hybrid")
    idx = QdrantIndex(location=":memory:", encoder=base_encoder)
    with pytest.raises(ValueError, match="query text"):
        idx.search_by_vector(base_encoder.encode_query("text"), mode="hybrid")
    for bad in ({"hybrid_fusion": "sum"}, {"hybrid_weight": 1.5}, {"quantization": "fp16"}):
        with pytest.raises(ValueError):
            QdrantIndex(location=":memory:", encoder=base_encoder, **bad)


@pytest.mark.parametrize("quantization", ["int8", "binary"])
def test_quantized_landmarks_are_searched_and_recorded(tmp_path, base_encoder, quantization):
    idx = filled(QdrantIndex(tmp_path / "q", encoder=base_encoder, quantization=quantization))
    try:
        for mode in ("prefetch", "maxsim", "hybrid"):
            assert idx.search("sourdough starter hooch", k=1, mode=mode)[0].id == "sourdough.md"
    finally:
        idx.close()
    again = QdrantIndex(tmp_path / "q", encoder=base_encoder)
    assert again.quantization == quantization and len(again) == 6
    again.close()
    other = "binary" if quantization == "int8" else "int8"
    with pytest.raises(IncompatibleIndexError, match="quantization"):
        QdrantIndex(tmp_path / "q", encoder=base_encoder, quantization=other)


def test_copy_from_embedded_to_the_server_layout_keeps_everything(tmp_path, base_encoder):
    edge = filled(QdrantIndex(tmp_path / "idx", encoder=base_encoder))
    server = QdrantIndex(location=":memory:", encoder=base_encoder)  # the client code a server uses
    try:
        assert copy_index(edge, server, batch_size=4) == 6
        assert copy_index(edge, server) == 6 and len(server) == 6  # again: same ids, nothing doubled
        a, b = all_vectors(edge), all_vectors(server)
        assert sorted(a) == sorted(b)
        for doc_id, (doc, mv) in a.items():
            assert b[doc_id][0] == doc
            assert np.allclose(b[doc_id][1].vectors, mv.vectors, atol=1e-6)
            assert np.allclose(b[doc_id][1].pooled, mv.pooled, atol=1e-6)
            assert b[doc_id][1].spans == mv.spans and b[doc_id][1].n_tokens == mv.n_tokens > 0
        for mode in server.modes:
            assert [h.id for h in server.search("XQ-7731 pump", k=3, mode=mode)] == [
                h.id for h in edge.search("XQ-7731 pump", k=3, mode=mode)
            ]
        other = LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", granularity=64, device="cpu")
        with pytest.raises(IncompatibleIndexError, match="granularity"):
            copy_index(edge, QdrantIndex(location=":memory:", encoder=other))
    finally:
        edge.close()


def test_copy_from_chroma(tmp_path, base_encoder):
    chroma = filled(ChromaIndex(tmp_path / "c", encoder=base_encoder))
    edge = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    try:
        assert copy_index(chroma, edge, batch_size=4) == 6
        a, b = all_vectors(chroma), all_vectors(edge)
        assert sorted(a) == sorted(b)
        assert all(np.allclose(a[i][1].vectors, b[i][1].vectors, atol=1e-6) for i in a)
        edge.hybrid_fusion = "rrf"  # BM25 vectors were computed from the copied text
        assert edge.search("XQ-7731", k=1, mode="hybrid")[0].id == "pump.md"
    finally:
        edge.close()


@pytest.mark.slow
def test_cli_copy_moves_a_chroma_index_into_qdrant_without_re_encoding(tmp_path):
    """`lmk-rag copy chroma:OLD qdrant:NEW`: every document with its vectors; BM25 vectors are
    computed from the stored text, so the default hybrid search works on the copy."""
    corpus = Path(__file__).resolve().parents[2] / "examples" / "sample_corpus"
    old, new = f"chroma:{tmp_path / 'old'}", f"qdrant:{tmp_path / 'new'}"
    assert run_cli("ingest", str(corpus), "--index", old, "--no-progress").returncode == 0
    converted = run_cli("copy", old, new, "--no-progress")
    assert converted.returncode == 0, converted.stderr[-2000:]
    assert "copied 5 documents" in converted.stdout
    before = json.loads(run_cli("search", "solar panel inverter", "--index", old, "--json", "--mode", "maxsim").stdout)
    after = json.loads(run_cli("search", "solar panel inverter", "--index", new, "--json", "--mode", "maxsim").stdout)
    assert [h["id"] for h in after] == [h["id"] for h in before]
    assert [h["score"] for h in after] == pytest.approx([h["score"] for h in before], abs=1e-5)
    hybrid = run_cli("search", "solar panel inverter", "--index", new, "--json")  # the default: hybrid
    assert hybrid.returncode == 0 and json.loads(hybrid.stdout)[0]["id"] == after[0]["id"]


def _hidden_landmark_corpus(dim: int, seed: int = 0) -> tuple[list[MultiVector], np.ndarray]:
    """300 documents whose pooled vectors lie near the query but none of whose landmarks does, and one
    document (the last) with a single landmark equal to the query among 99 unrelated ones: by MaxSim it
    ranks first, by its pooled vector far below the 300 (so pooled candidates alone miss it)."""
    rng = np.random.default_rng(seed)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)

    q = unit(rng.normal(size=dim))
    multis = []
    for _ in range(300):
        lms = unit(q + 1.6 * unit(rng.normal(size=(4, dim))))  # each ~0.5 to the query, their mean ~0.8
        multis.append(MultiVector(unit(lms.mean(0)), lms, [(i, i + 1) for i in range(4)], 4))
    lms = np.concatenate([q[None], unit(rng.normal(size=(99, dim)))])
    multis.append(MultiVector(unit(lms.mean(0)), lms, [(i, i + 1) for i in range(100)], 100))
    return multis, q


@pytest.mark.parametrize("where", ["path", "memory"])
def test_the_default_search_finds_a_document_by_one_landmark_its_pooled_vector_hides(tmp_path, base_encoder, where):
    """Candidates come from the landmark index: exact MaxSim's best document is found even where 300
    documents' pooled vectors are nearer the query (1,600 pooled candidates would be needed to see it)."""
    multis, q = _hidden_landmark_corpus(base_encoder.dimension)
    ids = [f"d{i}" for i in range(len(multis))]
    idx = QdrantIndex(tmp_path / "idx", encoder=base_encoder) if where == "path" else None
    idx = idx or QdrantIndex(location=":memory:", encoder=base_encoder)
    try:
        idx.add_encoded(multis, ["x"] * len(multis), ids)
        pooled_rank = int((np.stack([m.pooled for m in multis]) @ q > multis[-1].pooled @ q).sum())
        assert pooled_rank >= 300 > default_prefetch_limit(10, len(multis))
        hits = idx.search_by_vector(q, k=10)  # the default for a vector: prefetch, exact MaxSim
        assert hits[0].id == "d300" and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert hits[0].landmark == 0
        filtered = idx.search_by_vector(q, k=3, filter={"n": {"$ne": 1}})  # with a filter too
        assert filtered[0].id == "d300"
    finally:
        idx.close()


def _landmark_points(idx: QdrantIndex) -> int:
    store = idx.store
    if hasattr(store, "landmark_shard"):
        import qdrant_edge

        return int(store.landmark_shard.count(qdrant_edge.CountRequest(exact=True)))
    return int(store.client.count(store.landmarks, exact=True).count)


@pytest.mark.parametrize("where", ["path", "memory"])
def test_the_landmark_index_follows_every_write(tmp_path, base_encoder, where):
    """Re-adding a document with fewer landmarks leaves none of its old ones; deleting removes them."""
    idx = QdrantIndex(tmp_path / "idx", encoder=base_encoder) if where == "path" else None
    idx = idx or QdrantIndex(location=":memory:", encoder=base_encoder)
    try:
        long_text = " ".join(TEXTS)
        idx.add([long_text, TEXTS[0]], ids=["long", "short"])
        n_long = len(idx.get_encoded(["long"])[0][1].vectors)
        n_short = len(idx.get_encoded(["short"])[0][1].vectors)
        assert n_long > 3 and _landmark_points(idx) == n_long + n_short
        idx.add([TEXTS[1]], ids=["long"])  # the same id, now a short text
        n_now = len(idx.get_encoded(["long"])[0][1].vectors)
        assert _landmark_points(idx) == n_now + n_short
        idx.delete(["long"])
        assert _landmark_points(idx) == n_short
        assert [h.id for h in idx.search(TEXTS[0][:80], k=3, mode="prefetch")] == ["short"]
    finally:
        idx.close()


def test_an_index_without_its_landmark_index_gets_one_on_open(tmp_path, base_encoder):
    """The landmark index is rebuilt from the stored landmark vectors when its folder is missing."""
    import shutil

    idx = filled(QdrantIndex(tmp_path / "idx", encoder=base_encoder))
    expected = [h.id for h in idx.search(QUERIES[0], k=3, mode="maxsim")]
    total = sum(len(mv.vectors) for _, mv in all_vectors(idx).values())
    idx.close()
    shutil.rmtree(tmp_path / "idx" / "lmk.landmarks")
    again = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    try:
        assert _landmark_points(again) == total
        assert [h.id for h in again.search(QUERIES[0], k=3, mode="prefetch")] == expected
    finally:
        again.close()


def test_the_landmark_index_keeps_compressed_vectors_and_the_default_search_stays_exact(
    tmp_path, base_encoder, monkeypatch
):
    """The landmark vectors are kept in full once (the collection's); the landmark index stores
    compressed ones and only finds candidates, rescored by exact MaxSim. An index made with a
    float32 landmark index keeps it, and its exact scores, until a rebuild compresses it."""
    from lmk_rag.index.qdrant import layout
    from lmk_rag.index.qdrant.layout import LANDMARK_DATATYPE

    assert LANDMARK_DATATYPE != "float32"
    landmark_config = tmp_path / "idx" / "lmk.landmarks" / "edge_config.json"

    def same_as_exact(index: QdrantIndex) -> None:
        for query in QUERIES:
            default, exact = index.search(query, k=4, mode="prefetch"), index.search(query, k=4, mode="maxsim")
            assert [h.id for h in default] == [h.id for h in exact]
            assert np.allclose([h.score for h in default], [h.score for h in exact], atol=1e-6)
            assert [h.landmark for h in default] == [h.landmark for h in exact]

    monkeypatch.setattr(layout, "LANDMARK_DATATYPE", "float32")
    idx = filled(QdrantIndex(tmp_path / "idx", encoder=base_encoder))
    assert idx.store.landmark_scores_exact and "datatype" not in landmark_config.read_text()
    same_as_exact(idx)
    idx.close()
    monkeypatch.undo()

    again = QdrantIndex(tmp_path / "idx", encoder=base_encoder)  # made before: float32 kept
    try:
        assert again.store.landmark_scores_exact
        same_as_exact(again)
        again.rebuild_landmark_index()  # what `lmk-rag ingest --verify` does
        assert not again.store.landmark_scores_exact
        assert json.loads(landmark_config.read_text())["vectors"]["lm"]["datatype"] == LANDMARK_DATATYPE
        same_as_exact(again)
        again.add([TEXTS[0] + " A new sentence about tidal bores."], ids=["fresh"])
        same_as_exact(again)
    finally:
        again.close()
    reopened = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    try:
        assert not reopened.store.landmark_scores_exact  # read back from the shard's configuration
        same_as_exact(reopened)
    finally:
        reopened.close()


def test_a_compressed_landmark_vector_is_told_from_a_wrong_one():
    from lmk_rag.index.qdrant.store import same_vector

    rng = np.random.default_rng(0)
    v = rng.normal(size=384).astype(np.float32)
    v /= np.linalg.norm(v)
    near = v + rng.normal(0, 0.004, 384).astype(np.float32)  # about what 4-bit codes keep (cosine ~0.997)
    other = rng.normal(size=384).astype(np.float32)
    assert same_vector(near, v, exact=False) and not same_vector(near, v, exact=True)
    assert not same_vector(other, v, exact=False) and not same_vector(np.zeros(384, np.float32), v, exact=False)
    assert not same_vector(v[:100], v, exact=False)
    assert same_vector(v.copy(), v, exact=True)
