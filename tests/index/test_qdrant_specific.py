"""Qdrant details: UUIDv5 point ids, payload, folder lock message, prefetch mode."""

from __future__ import annotations

import builtins
import os
import threading
import uuid
from pathlib import Path

import pytest

from lmk_rag.index import QdrantIndex
from lmk_rag.index.qdrant import edge_files, point_id
from lmk_rag.index.qdrant.edge_files import landmark_shard_dir


def test_point_ids_are_uuid5_and_payload_keeps_the_original(tmp_path, base_encoder):
    idx = QdrantIndex(location=":memory:", encoder=base_encoder)
    idx.add(["some text about tides"], ids=["docs/tides.md#v1"], metadatas=[{"lang": "en"}])
    pid = point_id("docs/tides.md#v1")
    assert uuid.UUID(pid).version == 5
    point = idx.store.client.retrieve(idx.collection, ids=[pid], with_payload=True, with_vectors=True)[0]
    assert point.payload["doc_id"] == "docs/tides.md#v1" and point.payload["metadata"] == {"lang": "en"}
    assert len(point.vector["landmarks"]) == len(point.payload["spans"])


def test_folder_held_by_another_client_says_so(tmp_path, base_encoder):
    first = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    try:
        with pytest.raises(RuntimeError, match="open in another process"):
            QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    finally:
        first.close()
    QdrantIndex(tmp_path / "idx", encoder=base_encoder).close()


def test_one_location_only(base_encoder):
    with pytest.raises(ValueError, match="one of"):
        QdrantIndex("a", location=":memory:", encoder=base_encoder)


class _RecordingClient:
    """A qdrant-client in memory that records the settings each collection is created with
    (local mode accepts, but does not keep, shard and replication settings)."""

    def __init__(self) -> None:
        from qdrant_client import QdrantClient

        self._client = QdrantClient(location=":memory:")
        self.created: dict[str, dict] = {}

    def create_collection(self, name, **kwargs):
        self.created[name] = kwargs
        return self._client.create_collection(name, **kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_cluster_options_reach_the_new_collection(base_encoder):
    client = _RecordingClient()
    idx = QdrantIndex(
        client=client,
        encoder=base_encoder,
        shard_number=6,
        replication_factor=2,
        write_consistency_factor=2,
        on_disk=True,
    )
    made = client.created["lmk"]
    assert (made["shard_number"], made["replication_factor"], made["write_consistency_factor"]) == (6, 2, 2)
    assert made["vectors_config"]["pooled"].on_disk and made["vectors_config"]["landmarks"].on_disk
    idx.add(["tides follow the moon"], ids=["t"])
    assert idx.search("moon", k=1)[0].id == "t"
    landmarks = client.created["lmk__lmk_landmarks"]  # the landmark index is sharded alike
    assert (landmarks["shard_number"], landmarks["replication_factor"], landmarks["write_consistency_factor"]) == (
        6,
        2,
        2,
    )
    # An existing collection keeps its settings; none are sent again.
    QdrantIndex(client=client, encoder=base_encoder)
    assert list(client.created) == ["lmk", "lmk__lmk_meta", "lmk__lmk_landmarks"]


def test_cluster_options_are_checked_and_need_a_server(tmp_path, base_encoder):
    with pytest.raises(ValueError, match="shard_number must be an int >= 1, got 0"):
        QdrantIndex(location=":memory:", encoder=base_encoder, shard_number=0)
    with pytest.raises(ValueError, match="on_disk must be True or False"):
        QdrantIndex(location=":memory:", encoder=base_encoder, on_disk="yes")
    with pytest.raises(ValueError, match="replication_factor sets up a collection on a Qdrant server"):
        QdrantIndex(tmp_path / "idx", encoder=base_encoder, replication_factor=2)


def test_index_uri_carries_cluster_options():
    from lmk_rag.index.uri import parse_index_uri

    uri = parse_index_uri("qdrant+http://qdrant.internal:6333?shard_number=6&replication_factor=2&on_disk=true")
    assert uri.url == "http://qdrant.internal:6333"
    assert uri.options == {"shard_number": 6, "replication_factor": 2, "on_disk": True}
    for bad, match in (
        ("qdrant+http://h:6333?shards=2", "unknown setting 'shards'"),
        ("qdrant+http://h:6333?shard_number=two", "shard_number must be an int >= 1"),
        ("qdrant+http://h:6333?on_disk=maybe", "on_disk must be true or false"),
        ("chroma+http://h:8000?shard_number=2", "are Qdrant collection settings"),
    ):
        with pytest.raises(ValueError, match=match):
            parse_index_uri(bad)


def test_only_server_indexes_can_be_reopened_elsewhere(tmp_path, base_encoder):
    idx = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    assert idx.address() is None
    idx.close()
    assert QdrantIndex(location=":memory:", encoder=base_encoder).address() is None


@pytest.mark.parametrize("named", [False, True])
def test_a_collection_lmk_rag_did_not_create_is_refused_with_what_it_has(named, base_encoder):
    from qdrant_client import QdrantClient, models

    from lmk_rag.errors import IncompatibleIndexError
    from lmk_rag.index import QdrantIndex

    client = QdrantClient(location=":memory:")
    plain = models.VectorParams(size=384, distance=models.Distance.COSINE)
    client.create_collection("docs", vectors_config={"text": plain} if named else plain)
    found = "named vectors \\['text'\\]" if named else "one unnamed vector of size 384"
    with pytest.raises(IncompatibleIndexError, match=f"'docs' was not created by lmk-rag: it has {found}"):
        QdrantIndex(client=client, collection="docs", encoder=base_encoder)


def test_a_document_beyond_a_servers_multivector_limit_is_refused_by_name_before_any_write(base_encoder):
    """A Qdrant server refuses a multivector of 1,048,576 floats or more with a 422 deep in
    qdrant-client; the index says which document, how many landmarks fit, and what to do."""
    import numpy as np

    from lmk_rag import MultiVector
    from lmk_rag.errors import InvalidInputError

    dim = base_encoder.dimension
    most = (1_048_576 - 1) // dim
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(most + 1, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    huge = MultiVector(
        vectors.mean(0) / np.linalg.norm(vectors.mean(0)), vectors, [(i, i + 1) for i in range(most + 1)], 9
    )
    small = base_encoder.encode_multi(["A short note about tides."])[0]
    idx = QdrantIndex(location=":memory:", encoder=base_encoder)
    try:
        with pytest.raises(
            InvalidInputError, match=rf"'huge.txt' has {most + 1} landmarks.*at most {most} per document"
        ):
            idx.add_encoded([small, huge], ["A short note about tides.", "x" * (most + 1)], ["small.txt", "huge.txt"])
        assert idx.ids() == []  # refused before the batch reached the server
        idx.add_encoded([small], ["A short note about tides."], ["small.txt"])
        assert idx.ids() == ["small.txt"]
    finally:
        idx.close()


def _join_warm_threads() -> None:
    for thread in threading.enumerate():
        if thread.name == "lmk-rag warm":
            thread.join(timeout=30)


class _CountingFile:
    """A file opened by the read-ahead, counting the bytes read from it into ``counts``."""

    def __init__(self, path: Path, counts: dict[Path, int]) -> None:
        self.file, self.path, self.counts = open(path, "rb", buffering=0), path, counts  # noqa: SIM115

    def __enter__(self) -> _CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()

    def fileno(self) -> int:
        return self.file.fileno()

    def seek(self, offset: int) -> int:
        return self.file.seek(offset)

    def readinto(self, buffer: memoryview) -> int:
        n = self.file.readinto(buffer) or 0
        self.counts[self.path] = self.counts.get(self.path, 0) + n
        return n


def _searched_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and "wal" not in p.relative_to(folder).parts]


def test_warm_reads_both_shards_ahead_but_not_their_logs(tmp_path, base_encoder, monkeypatch):
    idx = QdrantIndex(tmp_path / "idx", encoder=base_encoder)
    texts = [f"Section {i}. The tide tables for harbour {i} are printed every spring." for i in range(40)]
    idx.add(texts, ids=[f"d{i}" for i in range(40)])
    idx.optimize()
    counts: dict[Path, int] = {}

    def counting_open(path: Path, mode: str = "r", buffering: int = -1) -> object:
        if buffering == 0:  # the read-ahead's unbuffered reads; other files as they are
            return _CountingFile(Path(path), counts)
        return builtins.open(path, mode, buffering)

    monkeypatch.setattr(edge_files, "open", counting_open, raising=False)
    try:
        size = idx.warm()
        _join_warm_threads()
        landmarks = landmark_shard_dir(tmp_path / "idx", idx.collection)
        files = _searched_files(landmarks) + _searched_files(tmp_path / "idx" / idx.collection)
        assert size == sum(p.stat().st_blocks * 512 for p in files) > 0
        # Every byte read is a searched file's (no log), each read at most once, holes skipped;
        # among them the landmark index's codes and the collection's landmark vectors.
        assert set(counts) <= set(files) and all(n <= path.stat().st_size for path, n in counts.items())
        assert 0 < sum(counts.values()) <= size
        read = " ".join(str(p.relative_to(tmp_path)) for p, n in counts.items() if n)
        assert "landmarks/segments" in read and "vector_storage-landmarks" in read, read
        assert idx.search("tide tables for harbour 7", k=1)[0].id == "d7"
    finally:
        idx.close()


def test_the_read_ahead_takes_the_files_named_first_up_to_its_limit_and_never_a_log(tmp_path, monkeypatch):
    folder = tmp_path / "shard"
    (folder / "wal").mkdir(parents=True)
    for name in ("a.bin", "b-first.bin", "wal/open-1"):
        (folder / name).write_bytes(os.urandom(8192))
    os.sync()
    counts: dict[Path, int] = {}
    monkeypatch.setattr(edge_files, "open", lambda path, *_, **__: _CountingFile(Path(path), counts), raising=False)

    def read(limit: int | None, first: str = "") -> tuple[int, set[str]]:
        counts.clear()
        size, reader = edge_files.read_ahead([folder], limit=limit, first=first)
        reader()
        return size, {path.name for path, n in counts.items() if n}

    assert read(None) == (16384, {"a.bin", "b-first.bin"})
    assert read(8192) == (8192, {"a.bin"})
    assert read(8192, first="first") == (8192, {"b-first.bin"})
    assert read(4096) == (0, set())


def test_a_server_index_has_nothing_to_warm(base_encoder):
    idx = QdrantIndex(location=":memory:", encoder=base_encoder)
    idx.add(["some text about tides"], ids=["a"])
    assert idx.warm() == 0


def test_serve_reads_the_index_ahead_before_it_listens(tmp_path, encoder, monkeypatch, capsys):
    import uvicorn

    from lmk_rag.cli.main import main

    with QdrantIndex(tmp_path / "idx", encoder=encoder) as idx:
        idx.add(["Tides rise twice a day.", "Harbours close in storms."], ids=["a", "b"])
    listened: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: listened.append(app))
    monkeypatch.delenv("LMK_RAG_API_KEY", raising=False)
    assert main(["serve", "--index", f"qdrant:{tmp_path / 'idx'}", "--port", "8765"]) == 0
    _join_warm_threads()
    assert listened and "MB of it ahead" in capsys.readouterr().err
    warmed: list[int] = []
    monkeypatch.setattr(QdrantIndex, "warm", lambda self: warmed.append(1) or 0)
    # (The mocked server never shuts down, so the first index stays open: a second folder.)
    assert main(["serve", "--index", f"qdrant:{tmp_path / 'idx2'}", "--port", "8765", "--no-warm"]) == 0
    assert len(listened) == 2 and not warmed and "ahead" not in capsys.readouterr().err
    for app in listened:  # what the server's shutdown would have done
        app.state.engine.index.close()
