"""Ingestion on a local Ray (``ray.init(num_cpus=2)``): equal results to the single-process
ingest, into an embedded Qdrant index (written by the driver); skips, per-file failures, kill -9
and resume, the command line. Actors writing into a real `chroma run` server, on a cluster of two
nodes: ``test_distributed_cluster.py``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import ray  # the [ray] extra is part of [test]

from lmk_rag.index import QdrantIndex
from lmk_rag.ingest import ingest
from lmk_rag.ingest.ray import RayExecutor

from .test_cli import CORPUS, cli, kill_after_commits, many_documents

pytestmark = pytest.mark.slow  # a Ray cluster, actor pools that load the model, a server


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.fixture()
def docs(tmp_path):
    """The sample corpus, one long document that needs several windows, a damaged PDF and a
    binary .txt (both must fail alone, reported by name)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for p in CORPUS.glob("*.md"):
        (folder / p.name).write_text(p.read_text())
    (folder / "long").mkdir()
    (folder / "long" / "all.md").write_text("\n\n".join(p.read_text() for p in sorted(CORPUS.glob("*.md"))) * 3)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a PDF body\n")
    (folder / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    return folder


def contents(index) -> dict:
    """Path below the docs folder -> (document, vectors); ids are absolute paths."""
    return {d.id.split("/docs/", 1)[1]: (d, mv) for batch in index.scan() for d, mv in batch}


def names(ids) -> set[str]:
    return {i.split("/docs/", 1)[1] for i in ids}


def assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for doc_id, (doc, mv) in a.items():
        other, omv = b[doc_id]
        assert other.text == doc.text and other.metadata == doc.metadata, doc_id
        assert omv.spans == mv.spans and omv.n_tokens == mv.n_tokens, doc_id
        np.testing.assert_allclose(omv.vectors, mv.vectors, atol=1e-5, err_msg=doc_id)
        np.testing.assert_allclose(omv.pooled, mv.pooled, atol=1e-5, err_msg=doc_id)


def test_ray_ingest_into_embedded_index_equals_single_process(tmp_path, docs, encoder, local_ray):
    single = QdrantIndex(tmp_path / "single", encoder=encoder)
    distributed = QdrantIndex(tmp_path / "ray", encoder=encoder)
    try:
        expected = ingest(single, [docs], show_progress=False)
        got = ingest(distributed, [docs], executor=RayExecutor(actors=2), batch_docs=2, show_progress=False)
        assert (
            (got.added, got.updated, got.skipped) == (expected.added, expected.updated, expected.skipped) == (6, 0, 0)
        )
        assert (got.landmarks, got.tokens) == (expected.landmarks, expected.tokens)
        assert names(got.failed) == names(expected.failed) == {"broken.pdf", "blob.txt"}
        failed = {i.split("/docs/", 1)[1]: reason for i, reason in got.failed.items()}
        assert "damaged PDF" in failed["broken.pdf"] and "binary" in failed["blob.txt"]
        assert_same(contents(single), contents(distributed))
        long_doc, long_mv = contents(distributed)["long/all.md"]
        # Longer than the 512-token window: encoded whole, in windows, to its last character.
        assert long_mv.n_tokens > 2 * 512 and long_mv.spans[-1][1] >= len(long_doc.text.rstrip())

        (docs / "tides.md").write_text("Tides, rewritten: the moon pulls the sea twice a day.")
        (docs / "sourdough.md").unlink()
        again = ingest(distributed, [docs], executor=RayExecutor(actors=1), prune=True, show_progress=False)
        assert (again.added, again.updated, again.skipped, again.pruned) == (0, 1, 4, 1)
        assert names(distributed.ids()) == set(contents(single)) - {"sourdough.md"}
        assert distributed.get([(docs / "tides.md").as_posix()])[0].text.startswith("Tides, rewritten")
    finally:
        single.close()
        distributed.close()


def test_a_batch_that_cannot_be_written_is_retried_then_reported_per_file(tmp_path, docs, encoder, local_ray):
    """The embedded index fails the first write of every batch (a transient error) and always
    refuses one document: the transient failures are retried away, the bad one reported by name."""
    index = QdrantIndex(tmp_path / "idx", encoder=encoder)
    real_upsert, calls = index._upsert, {"n": 0}

    def flaky(ids, texts, metas, multis):
        calls["n"] += 1
        if calls["n"] % 2 == 1:
            raise ConnectionError("transient: the store hiccuped")
        if any(i.endswith("/tides.md") for i in ids):
            raise RuntimeError("disk full while writing tides.md")
        real_upsert(ids, texts, metas, multis)

    index._upsert = flaky
    try:
        summary = ingest(index, [docs], executor=RayExecutor(actors=1), batch_docs=16, show_progress=False, attempts=2)
        tides = (docs / "tides.md").as_posix()
        assert tides in summary.failed and "disk full" in summary.failed[tides]
        assert summary.added == 5 and names(index.ids()) == {
            "home_solar.md",
            "sourdough.md",
            "bicycle_maintenance.md",
            "printing_press.md",
            "long/all.md",
        }
    finally:
        index.close()


def test_bad_arguments_are_refused_before_any_work(tmp_path, encoder):
    index = QdrantIndex(tmp_path / "idx", encoder=encoder)
    try:
        for kwargs, match in (
            ({"actors": 0}, "actors must be an int >= 1"),
            ({"gpus_per_actor": -1}, "gpus_per_actor must be a number >= 0"),
            ({"cpus_per_actor": 0, "gpus_per_actor": 0}, "cpus_per_actor > 0 or gpus_per_actor > 0"),
        ):
            with pytest.raises(ValueError, match=match):
                ingest(index, [CORPUS], executor=RayExecutor(**kwargs), show_progress=False)
        with pytest.raises(ValueError, match="batch_docs must be an int >= 1"):
            ingest(index, [CORPUS], executor=RayExecutor(), batch_docs=0, show_progress=False)
    finally:
        index.close()


def test_cli_ray_kill_minus_9_then_resume_exactly_once(tmp_path):
    folder = many_documents(tmp_path / "many")
    uri = f"qdrant:{tmp_path / 'idx'}"
    common = ["--index", uri, "--no-progress", "--ray", "--actors", "1", "--batch-docs", "2"]
    # Its own session, so kill -9 reaches the local Ray's processes too, as a crash of the machine would.
    commits = kill_after_commits(["ingest", str(folder), *common], own_session=True)
    assert commits >= 3, "the ingest never committed a batch"
    mid = json.loads(cli("info", "--index", uri, "--json").stdout)
    assert 0 < mid["documents"] < 40
    resumed = cli("ingest", str(folder), *common)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    done = re_summary(resumed.stdout)
    assert done["skipped"] == mid["documents"] and done["added"] + done["updated"] + done["skipped"] == 40
    assert "40 documents in" in resumed.stdout
    info = json.loads(cli("info", "--index", uri, "--json").stdout)
    assert info["documents"] == 40


def re_summary(stdout: str) -> dict[str, int]:
    import re

    m = re.search(r"added (\d+), updated (\d+), skipped (\d+) unchanged", stdout)
    assert m, stdout
    return {"added": int(m[1]), "updated": int(m[2]), "skipped": int(m[3])}


def test_cli_ray_options_need_ray(tmp_path):
    out = cli("ingest", str(CORPUS), "--index", f"qdrant:{tmp_path / 'idx'}", "--actors", "2")
    assert out.returncode == 2 and "--actors applies to --ray; add --ray" in out.stderr
