"""`lmk-rag ingest --ray --ray-address ADDR` on a Ray cluster of two nodes (two raylets on this
machine, one CPU each, as `ray start --head` plus `ray start --address` would make on two hosts),
its actors writing into a real `chroma run` server: the cluster path a user takes, not the local
Ray that `--ray` alone starts."""

from __future__ import annotations

import pytest
import ray  # the [ray] extra is part of [test]
from ray.cluster_utils import Cluster

from lmk_rag.index import ChromaIndex, QdrantIndex
from lmk_rag.index.uri import IndexURI
from lmk_rag.ingest import ingest

from .chroma_server import start_chroma_server, stop
from .cli_runner import run_cli as cli
from .test_distributed import assert_same, contents, docs  # noqa: F401 - `docs` is a fixture

pytestmark = pytest.mark.slow  # two raylets, two actors that load the model, a server


@pytest.fixture()
def two_node_cluster():
    if ray.is_initialized():  # another module's local Ray: this test joins a cluster of its own
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def test_cli_ingest_on_a_two_node_cluster_into_a_chroma_server(tmp_path, docs, encoder, two_node_cluster):  # noqa: F811
    proc, port = start_chroma_server(tmp_path / "server")
    try:
        uri = f"chroma+http://127.0.0.1:{port}"
        # Two actors of one CPU each on nodes of one CPU each: one actor per node, each writing.
        args = ["ingest", str(docs), "--index", uri, "--no-progress", "--ray", "--actors", "2", "--batch-docs", "1"]
        out = cli(*args, "--ray-address", two_node_cluster.address)
        assert out.returncode == 1, out.stderr[-2000:]  # the two unreadable files, reported by name
        assert "added 6, updated 0, skipped 0 unchanged" in out.stdout and "ran on 2 Ray nodes" in out.stdout
        assert "/docs/broken.pdf: damaged PDF" in out.stdout and "/docs/blob.txt: binary" in out.stdout
        assert not ray.is_initialized(), "the command left this process connected to the cluster"

        reference = QdrantIndex(tmp_path / "reference", encoder=encoder)
        server = ChromaIndex(host="127.0.0.1", port=port, encoder=encoder)
        # What each actor reopens: the server, never a copy of the driver's client.
        assert server.address() == IndexURI("chroma", host="127.0.0.1", port=port, ssl=False, collection="lmk")
        try:
            ingest(reference, [docs], show_progress=False)
            assert_same(contents(reference), contents(server))
        finally:
            reference.close()
        # Idempotent: a second run reads the stored digests and writes nothing.
        again = cli(*args, "--ray-address", two_node_cluster.address)
        assert "added 0, updated 0, skipped 6 unchanged" in again.stdout and len(server) == 6
    finally:
        stop(proc)
