"""Concurrent writers of the same ids never lose a document or its landmarks, on either backend.

The Chroma writes used to end with a clean-up that deleted every generation but the writer's own,
which also removed a concurrent writer's live landmarks: the document stayed counted but was never
found again. These tests re-add the same ids from several writers at once and then check, for every
document, that its live generation has all its landmark rows and that search finds it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

IDS = [f"doc{i}" for i in range(6)]
TEXTS = [f"Document {i} is about topic {i}: " + " ".join(f"w{i}x{j}" for j in range(40 + 13 * i)) for i in range(6)]


@pytest.fixture(scope="module")
def encoded(base_encoder):
    return base_encoder.encode_multi(TEXTS)


def assert_every_document_whole(idx, ids, multis):
    """Each id: one document row, all its landmark rows under the live generation, found by search."""
    assert sorted(idx.ids()) == sorted(ids)
    for doc_id, mv in zip(ids, multis):
        doc = idx.get([doc_id])[0]
        assert len(doc.spans) == len(mv)
        if hasattr(idx, "landmarks"):  # Chroma: count the live generation's rows
            gen = idx.docs.get(ids=[doc_id], include=["metadatas"])["metadatas"][0]["_lmk_gen"]
            rows = idx.landmarks.get(where={"$and": [{"_lmk_doc": doc_id}, {"_lmk_gen": gen}]}, include=[])
            assert len(rows["ids"]) == len(mv), f"{doc_id}: {len(rows['ids'])} of {len(mv)} landmark rows live"
        hits = idx.search_by_vector(mv.vectors[-1], k=len(ids))
        assert doc_id in [h.id for h in hits], f"{doc_id} is stored but search never returns it"


def _hammer(make, encoded, writers: int = 3, rounds: int = 6) -> None:
    errors: list[BaseException] = []

    def write(seed: int) -> None:
        try:
            idx = make()
            order = np.random.default_rng(seed).permutation(len(IDS))
            for r in range(rounds):
                pick = [int(i) for i in order[: 2 + (r + seed) % 5]]
                idx.add_encoded([encoded[i] for i in pick], [TEXTS[i] for i in pick], [IDS[i] for i in pick])
                order = np.roll(order, 1)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s,)) for s in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors


@pytest.mark.parametrize("where", ["chroma-path", "chroma-http", "qdrant-memory"])
def test_threads_rewriting_the_same_ids_lose_nothing(where, tmp_path, base_encoder, encoded, request):
    from lmk_rag.index import ChromaIndex, QdrantIndex

    if where == "chroma-path":

        def make():
            return ChromaIndex(tmp_path / "c", encoder=base_encoder)
    elif where == "chroma-http":
        port = request.getfixturevalue("chroma_server")
        collection = f"race{tmp_path.name[-12:].replace('_', '')}"

        def make():
            return ChromaIndex(host="127.0.0.1", port=port, collection=collection, encoder=base_encoder)
    else:
        shared = QdrantIndex(location=":memory:", encoder=base_encoder)

        def make():
            return shared  # one index object shared by every thread

    first = make()
    first.add_encoded(list(encoded), TEXTS, IDS)
    _hammer(make, encoded)
    assert_every_document_whole(first, IDS, encoded)
    assert len(first) == len(IDS)


def test_delete_racing_a_write_leaves_it_whole_or_gone(tmp_path, base_encoder, encoded):
    from lmk_rag.index import ChromaIndex

    idx = ChromaIndex(tmp_path / "c", encoder=base_encoder)
    other = ChromaIndex(tmp_path / "c", encoder=base_encoder)
    for _ in range(5):
        t = threading.Thread(target=lambda: other.add_encoded(list(encoded), TEXTS, IDS))
        t.start()
        idx.delete(IDS[:3])
        t.join()
    present = idx.ids()
    assert_every_document_whole(idx, present, [encoded[IDS.index(i)] for i in present])


WRITER = """
import sys
from lmk_rag import LMKEncoder
from lmk_rag.index.uri import open_index, parse_index_uri
enc = LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")
texts = {texts!r}
ids = {ids!r}
multis = enc.encode_multi(texts)
idx = open_index(parse_index_uri(sys.argv[1]), enc)
for r in range(8):
    pick = [(r + j) % len(ids) for j in range(1 + r % 4)]
    idx.add_encoded([multis[i] for i in pick], [texts[i] for i in pick], [ids[i] for i in pick])
idx.close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["chroma-path", "chroma-http"])
def test_two_processes_rewriting_the_same_ids_lose_nothing(backend, tmp_path, base_encoder, encoded, request):
    from lmk_rag.index import ChromaIndex

    if backend == "chroma-path":
        uri, idx = f"chroma:{tmp_path / 'c'}", ChromaIndex(tmp_path / "c", encoder=base_encoder)
    else:
        port = request.getfixturevalue("chroma_server")
        uri, idx = f"chroma+http://127.0.0.1:{port}", None
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(texts=TEXTS, ids=IDS))
    procs = [subprocess.Popen([sys.executable, str(script), uri], stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    if idx is None:
        idx = ChromaIndex(host="127.0.0.1", port=request.getfixturevalue("chroma_server"), encoder=base_encoder)
    assert_every_document_whole(idx, IDS, encoded)


def test_embedded_chroma_leaves_no_unnamed_rows_after_a_write(tmp_path, base_encoder, encoded):
    """A writer killed between its landmark rows and its document row leaves rows no document names;
    the next write of that document (holding the folder lock) removes them."""
    from lmk_rag.index import ChromaIndex

    idx = ChromaIndex(tmp_path / "c", encoder=base_encoder)
    idx.add_encoded(list(encoded), TEXTS, IDS)
    idx.landmarks.add(
        ids=["doc0\x1fdead\x1f0"],
        embeddings=[encoded[0].vectors[0]],
        metadatas=[{"_lmk_doc": "doc0", "_lmk_gen": "dead", "_lmk_i": 0, "_lmk_t": 0.0}],
    )
    idx.add_encoded([encoded[0]], [TEXTS[0]], ["doc0"])
    assert idx.landmarks.count() == sum(len(m) for m in encoded)
    assert Path(tmp_path / "c" / ".lmk_write.lock").exists()
