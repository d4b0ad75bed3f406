"""An app around the packaged encoder and a small folder index, run in-process (no port)."""

from __future__ import annotations

import pytest

DOCUMENTS = {
    "keys": "Rotating keys. To rotate the signing keys, run `vault rotate` and restart the workers. "
    "The old key stays valid for one day so that tokens already issued keep working.",
    "backup": "Backups. The database is backed up every night at two o'clock to the object store. "
    "A restore takes about an hour for a ten gigabyte database.",
    "docs/install.md": "Installing. Install the package with pip, then run the set-up command once. "
    "On Windows, use the installer from the release page instead.",
}


@pytest.fixture
def app_factory(encoder, tmp_path):
    """make(index=True, **settings) -> a FastAPI app (with a fresh folder index holding DOCUMENTS)."""
    from lmk_rag.index import QdrantIndex
    from lmk_rag.serve import ServeSettings, create_app

    def make(index: bool = True, **settings):
        idx, folder = None, tmp_path / f"index{len(list(tmp_path.iterdir()))}"
        if index:
            idx = QdrantIndex(path=folder, encoder=encoder)
            idx.add(list(DOCUMENTS.values()), ids=list(DOCUMENTS), metadatas=[{"topic": k} for k in DOCUMENTS])
        app = create_app(encoder, idx, ServeSettings(**settings))
        app.state.index_folder = folder  # for tests that reopen the index after shutdown
        return app

    return make


@pytest.fixture
def client(app_factory):
    from fastapi.testclient import TestClient

    with TestClient(app_factory()) as c:
        yield c
