"""research/scripts/ood_pack.py: the packed sources answer for the readers, page for page."""

from __future__ import annotations

import importlib.util
import json
import lzma
from pathlib import Path

import pytest

from lmk_rag.corpora.rst import Page, Section

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def ood_pack(monkeypatch):
    import lmk_rag.corpora.domains as domains
    import lmk_rag.corpora.rst as rst
    import lmk_rag.corpora.texts as texts
    import lmk_rag.eval.domains as domain_tasks

    readers = ((domains, "read_domain_pages"), (domain_tasks, "read_domain_pages"), (rst, "read_rst_pages"))
    for module, name in (*readers, (texts, "training_texts")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    spec = importlib.util.spec_from_file_location("ood_pack", ROOT / "research" / "scripts" / "ood_pack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_packed_pages_round_trip_and_replace_the_readers(tmp_path, ood_pack):
    from lmk_rag.corpora import domains, rst, texts
    from lmk_rag.eval import domains as domain_tasks

    page = Page("nodejs/fs.html", "File system\nRead a file with fs.readFile.", (Section("File system", 0, 12, 42),))
    assert ood_pack.page_from_json(json.loads(json.dumps(ood_pack.page_to_json(page)))) == page
    packed = {
        "domains": {"nodejs": [ood_pack.page_to_json(page)]},
        "rst": {"train": [ood_pack.page_to_json(page)], "eval": []},
        "texts": [["pydocs/x", "some training text"]],
    }
    path = tmp_path / "sources.json.xz"
    with lzma.open(path, "wt", encoding="utf-8") as f:
        json.dump(packed, f)
    ood_pack.install_readers(path)
    assert domains.read_domain_pages(domains.DOMAINS["nodejs"]) == [page]
    assert domain_tasks.read_domain_pages(domains.DOMAINS["nodejs"]) == [page]
    assert rst.read_rst_pages(None, split="train") == [page] and rst.read_rst_pages(None, "eval") == []
    assert [t.text for t in texts.training_texts()] == ["some training text"]
    with pytest.raises(ValueError, match="packed file"):
        rst.read_rst_pages("/some/other/docs", split="train")
