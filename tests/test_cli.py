"""The `lmk-rag` command: ingest, re-ingest, update, kill and resume, search, info. The entry point
and kill -9 run in subprocesses; the other calls run in this process (tests/cli_runner.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cli_runner import run_cli as cli

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
BASE = ["--model", "sentence-transformers/all-MiniLM-L6-v2"]


pytestmark = pytest.mark.slow  # model loads on every call; the kill tests spawn and kill processes


def cli_process(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m lmk_rag.cli ARGS`` in a fresh interpreter (the real entry point)."""
    return subprocess.run(
        [sys.executable, "-m", "lmk_rag.cli", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


@pytest.fixture()
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for p in CORPUS.glob("*.md"):
        (folder / p.name).write_text(p.read_text())
    (folder / "sub").mkdir()
    (folder / "sub" / "notes.txt").write_text("Kettles descale best with citric acid and warm water.")
    return folder


@pytest.mark.parametrize("scheme", ["qdrant", "chroma"])
def test_ingest_reingest_update_prune_search_info(tmp_path, docs, scheme):
    uri = f"{scheme}:{tmp_path / 'idx'}"
    first = cli_process("ingest", str(docs), "--index", uri, "--no-progress", *BASE)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "added 6, updated 0, skipped 0" in first.stdout and "6 documents in" in first.stdout
    again = cli("ingest", str(docs), "--index", uri, "--no-progress")
    assert "added 0, updated 0, skipped 6" in again.stdout
    (docs / "tides.md").write_text("Tides, rewritten: the moon pulls the sea twice a day.")
    changed = cli("ingest", str(docs), "--index", uri, "--no-progress")
    assert "added 0, updated 1, skipped 5" in changed.stdout
    (docs / "sourdough.md").unlink()
    pruned = cli("ingest", str(docs), "--index", uri, "--no-progress", "--prune")
    assert "pruned 1" in pruned.stdout and "5 documents in" in pruned.stdout

    def name(doc_id: str) -> str:  # ids are absolute paths, links resolved
        return Path(doc_id).relative_to(docs.resolve()).as_posix()

    out = cli("search", "descale a kettle", "--index", uri, "-k", "2")
    kettle = (docs / "sub" / "notes.txt").resolve().as_posix()
    assert out.returncode == 0 and out.stdout.startswith(f"1. {kettle}") and "[[" in out.stdout
    data = json.loads(cli("search", "descale a kettle", "--index", uri, "-k", "2", "--json").stdout)
    assert name(data[0]["id"]) == "sub/notes.txt" and "citric acid" in data[0]["passage"] and len(data) == 2
    gutenberg = ["search", "How many copies of the Gutenberg Bible were printed?", "--index", uri, "-k", "1", "--json"]
    peak = json.loads(cli(*gutenberg, "--passage", "peak").stdout)[0]
    assert name(peak["id"]) == "printing_press.md" and "180 copies" in peak["passage"]
    chain = ["search", "How often should I oil my bicycle chain?", "--index", uri, "-k", "1", "--json"]
    peak, region = (json.loads(cli(*chain, "--passage", rule).stdout)[0] for rule in ("peak", "region"))
    assert region == json.loads(cli(*chain).stdout)[0]  # region: the default
    assert region["id"] == peak["id"] and name(peak["id"]) == "bicycle_maintenance.md"
    assert region["landmark"] != peak["landmark"]
    kettle = str((docs / "sub" / "notes.txt").absolute())
    others = json.loads(cli(*chain, "--filter", json.dumps({"source": {"$ne": kettle}, "bytes": {"$gt": 0}})).stdout)
    assert name(others[0]["id"]) == "bicycle_maintenance.md"
    only = json.loads(cli(*chain, "--filter", json.dumps({"source": {"$in": [kettle]}})).stdout)
    assert [name(hit["id"]) for hit in only] == ["sub/notes.txt"]
    context = json.loads(cli(*chain[:-1], "--context", "64", "--json", "--filter", f'{{"source": "{kettle}"}}').stdout)
    assert {name(p["id"]) for p in context} == {"sub/notes.txt"}
    bad = cli(*chain, "--filter", '{"bytes": {"$like": 3}}')
    assert bad.returncode == 2 and "unknown operator '$like'; allowed: $eq, $ne" in bad.stderr
    assert "not JSON" in cli(*chain, "--filter", "{lang: en}").stderr
    info = json.loads(cli("info", "--index", uri, "--json").stdout)
    assert info["documents"] == 5 and info["fingerprint"]["granularity"] == 32
    if scheme == "qdrant":  # one row per landmark in the landmark index beside the documents
        assert info["landmark_rows"] >= info["documents"]
    else:  # Chroma keeps its landmarks as the documents' own rows: no separate count
        assert "landmark_rows" not in info
    mismatch = cli("ingest", str(docs), "--index", uri, "--granularity", "64", "--no-progress")
    assert mismatch.returncode == 2 and "granularity: 32 != 64" in mismatch.stderr


def many_documents(folder: Path, n: int = 40) -> Path:
    """``n`` distinct documents made from the sample corpus."""
    folder.mkdir()
    texts = [p.read_text() for p in sorted(CORPUS.glob("*.md"))]
    for i in range(n):
        (folder / f"doc{i:02d}.md").write_text(f"Document {i}.\n\n" + texts[i % len(texts)])
    return folder


def kill_after_commits(args: list[str], commits: int = 3, own_session: bool = False) -> int:
    """Run ``lmk-rag -v ARGS``, SIGKILL it once it logged ``commits`` committed batches (its whole
    process group with ``own_session``, as a crash would take helpers too); the count seen."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lmk_rag.cli", "-v", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=ENV,
        start_new_session=own_session,
    )
    assert proc.stderr is not None
    seen, deadline = 0, time.monotonic() + 240
    try:
        while seen < commits and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            seen += "committed" in line
    finally:
        if own_session:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    return seen


@pytest.mark.parametrize("scheme", ["chroma", "qdrant"])
def test_kill_mid_ingest_then_resume_exactly_once(tmp_path, scheme):
    folder = many_documents(tmp_path / "many")
    uri = f"{scheme}:{tmp_path / 'idx'}"
    commits = kill_after_commits(["ingest", str(folder), "--index", uri, "--batch-docs", "2", "--no-progress", *BASE])
    assert commits >= 3, "the ingest never committed a batch"
    mid = json.loads(cli("info", "--index", uri, "--json").stdout)
    assert 0 < mid["documents"] < 40
    resumed = cli("ingest", str(folder), "--index", uri, "--no-progress", "--batch-docs", "8")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"skipped {mid['documents']}" in resumed.stdout
    done = json.loads(cli("info", "--index", uri, "--json").stdout)
    assert done["documents"] == 40
    from lmk_rag import LMKEncoder
    from lmk_rag.index import ChromaIndex, QdrantIndex

    encoder = LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")
    if scheme == "chroma":
        idx = ChromaIndex(tmp_path / "idx", encoder=encoder)
        assert idx.landmarks.count() == sum(len(d.spans) for d in idx.get(idx.ids()))  # no stale or doubled rows
    else:
        idx = QdrantIndex(tmp_path / "idx", encoder=encoder)  # the Edge shard replays its WAL after the kill
        for batch in idx.scan(16):
            assert all(len(mv.vectors) == len(doc.spans) > 0 for doc, mv in batch)  # every document whole
    assert sorted(idx.ids()) == [(folder / f"doc{i:02d}.md").resolve().as_posix() for i in range(40)]
    idx.close()


def test_bad_files_are_skipped_with_reasons(tmp_path, docs):
    (docs / "blob.txt").write_bytes(b"\x00\x01binary\x00")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a PDF body\n")
    out = cli("ingest", str(docs), "--index", f"qdrant:{tmp_path / 'idx'}", "--no-progress", *BASE)
    assert out.returncode == 1
    assert f"failed {(docs / 'blob.txt').resolve().as_posix()}: binary file" in out.stdout
    assert "broken.pdf: damaged PDF" in out.stdout
    assert "6 documents in" in out.stdout


@pytest.mark.parametrize("scheme", ["qdrant", "chroma"])
def test_runs_over_time_never_lose_or_double_a_file(tmp_path, scheme):
    """Two projects with the same file names, a folder then its subfolder, a link to a folder: each
    file is one document, whatever the order of the runs (ids are absolute paths, links resolved)."""
    uri = f"{scheme}:{tmp_path / 'idx'}"
    for project in ("projA", "projB"):
        (tmp_path / project / "sub").mkdir(parents=True)
        (tmp_path / project / "README.md").write_text(f"{project} explains the kettle descaling.")
        (tmp_path / project / "sub" / "s.txt").write_text(f"{project} sub notes on sourdough.")
    (tmp_path / "link").symlink_to(tmp_path / "projA", target_is_directory=True)
    first = cli_process("ingest", str(tmp_path / "projA"), "--index", uri, "--no-progress", *BASE)
    assert "added 2, updated 0" in first.stdout, first.stderr[-2000:]
    second = cli("ingest", str(tmp_path / "projB"), "--index", uri, "--no-progress")
    assert "added 2, updated 0" in second.stdout  # projA's README is kept, not "updated"
    sub = cli("ingest", str(tmp_path / "projA" / "sub"), "--index", uri, "--no-progress")
    assert "added 0, updated 0, skipped 1" in sub.stdout  # the subfolder's file is already there
    link = cli("ingest", str(tmp_path / "link"), "--index", uri, "--no-progress", "--follow-symlinks")
    assert "added 0, updated 0, skipped 2" in link.stdout  # the same files through a link
    hits = json.loads(cli("search", "kettle descaling", "--index", uri, "-k", "10", "--json").stdout)
    ids = sorted(hit["id"] for hit in hits)
    assert ids == sorted(
        (tmp_path / p / f).resolve().as_posix() for p in ("projA", "projB") for f in ("README.md", "sub/s.txt")
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["ingest", "/no/such/folder", "--index", "qdrant:/tmp/x"], "no such file or folder"),
        (["ingest", str(CORPUS), "--index", "mysql://db"], "unknown index URI"),
        (["search", "q", "--index", "chroma+http://"], "no host"),
        (["search", "q", "--index", "qdrant:/definitely/not/here"], "no lmk-rag index"),
    ],
)
def test_bad_paths_and_uris_exit_2_with_one_line(args, message):
    out = cli(*args)
    assert out.returncode == 2 and message in out.stderr
    assert len([line for line in out.stderr.splitlines() if line.startswith("lmk-rag")]) == 1


def _hit(text: str, start: int, end: int):
    from types import SimpleNamespace

    return SimpleNamespace(text=text, span=(start, end))


def test_search_lines_keep_the_context_of_hard_wrapped_text():
    from lmk_rag.cli.search import _highlight

    text = (
        "Intro paragraph that is not context.\n\n## Shade and inverters\n\nShade on one panel can pull down\n"
        "a whole string. String inverters are cheaper and\nusually need replacing after ten to fifteen years.\n\n"
        "## Next section\n"
    )
    a = text.index("a whole")
    b = text.index("cheaper") + len("cheaper")
    line = _highlight(_hit(text, a, b), tty=False)
    # A single newline does not end the context (the old display stopped at "down"); a blank line does.
    assert line == (
        "Shade on one panel can pull down [[a whole string. String inverters are cheaper]] and usually need "
        "replacing after ten to fifteen years."
    )
    assert "\n" not in line and "Intro" not in line and "Next section" not in line


def test_search_lines_cut_long_context_at_whole_words():
    from lmk_rag.cli.search import _highlight

    words = " ".join(f"word{i}" for i in range(200))
    a = words.index("word100")
    b = a + len("word100")
    line = _highlight(_hit(words, a, b), tty=False)
    assert line.startswith("...word") and line.endswith("...")
    assert "[[word100]]" in line
    inner = line.strip(".").replace("[[", "").replace("]]", "").split(" ")
    assert all(w.startswith("word") and w[4:].isdigit() for w in inner)  # no half word at either end
    assert _highlight(_hit("only this", 0, 9), tty=True) == "\033[1monly this\033[0m"
