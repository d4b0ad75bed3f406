"""The bad-input and fault battery (fast cases): each test reproduces a failure a hostile user found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lmk_rag import LMKEncoder
from lmk_rag.errors import (
    IncompatibleIndexError,
    IndexUnavailableError,
    InvalidInputError,
    InvalidTypeError,
    LMKError,
    ModelLoadError,
)
from lmk_rag.ingest import decode_text, discover, ingest

from .cli_runner import run_cli as cli  # in this process: the real parser, messages, exit codes

BASE = "sentence-transformers/all-MiniLM-L6-v2"
CORPUS = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"


def cli_subprocess(*args: str) -> subprocess.CompletedProcess:
    """``lmk-rag ARGS`` in its own process: a fatal signal there cannot take the test run down."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "lmk_rag.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


def one_error_line(out: subprocess.CompletedProcess, message: str) -> None:
    assert out.returncode == 2, out.stderr[-2000:]
    assert message in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert len([line for line in out.stderr.splitlines() if line.startswith("lmk-rag")]) == 1


@pytest.fixture(scope="module")
def base():
    return LMKEncoder(BASE, device="cpu")


# ---------------------------------------------------------------- ids: a bare str is never split
@pytest.fixture(params=["qdrant", "chroma"])
def index(request, tmp_path, base):
    """An empty index on each backend: Qdrant in memory, Chroma in a folder."""
    from lmk_rag.index import ChromaIndex, QdrantIndex

    if request.param == "qdrant":
        return QdrantIndex(location=":memory:", encoder=base)
    return ChromaIndex(tmp_path / "c", encoder=base)


def test_bare_string_ids_are_refused_not_split(index):
    idx = index
    idx.add(["alpha text", "beta text", "gamma text"], ids=["m", "3", "m3"])
    for call in (lambda: idx.delete("m3"), lambda: idx.get("m3"), lambda: idx.add(["x", "y"], ids="ab")):
        with pytest.raises(TypeError, match="bare str"):
            call()
    assert sorted(idx.ids()) == ["3", "m", "m3"]
    with pytest.raises(TypeError, match=r"ids\[1\]"):
        idx.delete(["m", 3])
    idx.delete(["m3"])
    assert sorted(idx.ids()) == ["3", "m"]


def test_langchain_store_delete_refuses_a_bare_string(base):
    from langchain_lmk import LMKVectorStore
    from lmk_rag.index import QdrantIndex

    store = LMKVectorStore(index=QdrantIndex(location=":memory:", encoder=base))
    store.add_texts(["one", "two", "three"], ids=["m", "3", "m3"])
    with pytest.raises(TypeError, match="bare str"):
        store.delete("m3")
    assert sorted(store.index.ids()) == ["3", "m", "m3"]


# ---------------------------------------------------------------- metadata keys
def test_metadata_keys_with_punctuation_filter_alike(index):
    idx = index
    keys = ["a.b", "a[0]", "with space", "x:y", "plain"]
    idx.add(["first doc", "second doc"], ids=["1", "2"], metadatas=[{k: "yes" for k in keys}, {k: "no" for k in keys}])
    for key in keys:
        assert [h.id for h in idx.search("doc", k=2, filter={key: "yes"})] == ["1"], key
    with pytest.raises(ValueError, match="without '\"'"):
        idx.add(["t"], ids=["3"], metadatas=[{'say "hi"': 1}])
    with pytest.raises(ValueError, match="non-empty"):
        idx.add(["t"], ids=["3"], metadatas=[{"": 1}])
    with pytest.raises(ValueError, match="finite"):
        idx.add(["t"], ids=["3"], metadatas=[{"score": float("nan")}])
    with pytest.raises(TypeError, match="must be str, int, float, bool or None"):
        idx.add(["t"], ids=["3"], metadatas=[{"when": object()}])
    with pytest.raises(TypeError, match=r"ids\[0\] must be a non-empty str"):
        idx.add(["t"], ids=[""])
    assert len(idx) == 2  # nothing half-written


# ---------------------------------------------------------------- search_by_vector and modes
def test_search_by_vector_checks_like_search(base, tmp_path):
    from lmk_rag.index import ChromaIndex

    idx = ChromaIndex(tmp_path / "c", encoder=base)
    idx.add(["some text"], ids=["a"])
    q = base.encode_query("text")
    with pytest.raises(ValueError, match="k must"):
        idx.search_by_vector(q, k=0)
    with pytest.raises(ValueError, match="mode must be one of"):
        idx.search_by_vector(q, mode="prefetch")  # Qdrant's mode: Chroma used to run MaxSim silently
    with pytest.raises(ValueError, match="neighbours"):
        idx.search_by_vector(q, neighbours=-1)
    with pytest.raises(ValueError, match="shape"):
        idx.search_by_vector(q[:10])
    with pytest.raises(ValueError, match="finite"):
        idx.search_by_vector(np.full_like(q, np.nan))
    with pytest.raises(ValueError, match="mode must be one of"):
        idx.search("text", mode="maxsimm")


# ---------------------------------------------------------------- texts
def test_odd_texts_give_clear_errors_or_work(base):
    with pytest.raises(TypeError, match="dict"):
        base.encode({"a": 1})
    with pytest.raises(TypeError, match="set"):
        base.encode({"a", "b"})
    with pytest.raises(ValueError, match=r"texts\[1\] is not valid Unicode: a lone surrogate"):
        base.encode(["fine", "bad \udc80 text"])
    with pytest.raises(ValueError, match="lone surrogate"):
        base.encode_query("q \ud800")
    odd = ["a\x00b", "[SEP] [CLS] [PAD] [MASK]", "", " ", "é" * 3000]
    out = base.encode(odd)
    assert out.shape == (5, base.dimension) and np.isfinite(out).all()
    mv = base.encode_multi(["x" * 200_000])[0]  # 200k characters, windows, nothing cut
    assert mv.spans[0][0] == 0 and mv.spans[-1][1] == 200_000 and np.isfinite(mv.vectors).all()


def test_model_paths_say_what_is_wrong(tmp_path):
    with pytest.raises(ModelLoadError, match=r"no model folder at '\./no/such/model'"):
        LMKEncoder("./no/such/model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match=r"holds no config\.json"):
        LMKEncoder(tmp_path / "empty")
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(ModelLoadError, match="is a file"):
        LMKEncoder(tmp_path / "weights.bin")
    assert issubclass(ModelLoadError, LMKError) and issubclass(ModelLoadError, OSError)


def test_a_damaged_weights_file_or_a_nul_in_modules_json_is_one_clear_error(tmp_path, tiny_bert_dir):
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(tiny_bert_dir, damaged)
    for weights in damaged.glob("*.safetensors"):
        weights.write_bytes(b"garbage" * 10)
    with pytest.raises(ModelLoadError, match=r"cannot be read .* damaged or not a safetensors file"):
        LMKEncoder(damaged, device="cpu")
    nul = tmp_path / "nul"
    shutil.copytree(tiny_bert_dir, nul)
    (nul / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "a\u0000b", "type": "sentence_transformers.models.Transformer"}])
    )
    with pytest.raises(ModelLoadError, match="holds a NUL byte"):
        LMKEncoder(nul, device="cpu")


def test_words_a_wordpiece_tokenizer_cannot_read_are_warned_about(base, caplog):
    with caplog.at_level("WARNING", logger="lmk_rag"):
        base.encode_multi(["Intro. " + "x" * 200_000 + " tail."])
    assert "200000 characters in 1 words longer than 100 characters" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="lmk_rag"):
        base.encode_multi(["An ordinary sentence with https://example.org/a/b?c=d and snake_case_names."])
    assert "unknown token" not in caplog.text


# ---------------------------------------------------------------- files
def test_text_encodings_with_a_byte_order_mark_are_read():
    for encoding in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"):
        raw = ("\ufeff" if encoding in ("utf-16-le", "utf-16-be") else "") + "Grüße, 世界"
        assert decode_text(raw.encode(encoding)).text.lstrip("\ufeff") == "Grüße, 世界", encoding
    with pytest.raises(ValueError, match="binary"):
        decode_text(b"\x00\x01\x02")
    assert decode_text("café crème".encode("latin-1")).text == "café crème"  # detected, not refused


@pytest.fixture()
def hostile_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret outside the folder")
    (outside / "more.md").write_text("more outside")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "plain.md").write_text("an ordinary document")
    (docs / "new\nline.txt").write_text("a file with a newline in its name")
    (docs / "passwd.txt").symlink_to(outside / "secret.txt")
    (docs / "inside_link.md").symlink_to(docs / "plain.md")
    (docs / "outdir").symlink_to(outside, target_is_directory=True)
    (docs / "loop.txt").symlink_to(docs / "loop.txt")
    (docs / "dangling.txt").symlink_to(tmp_path / "nothing.txt")
    (docs / "sub").mkdir()
    (docs / "sub" / "up").symlink_to(docs, target_is_directory=True)  # a folder loop
    os.mkfifo(docs / "pipe.txt")
    return docs


def test_discovery_does_not_leave_the_folder(hostile_folder):
    found = discover([hostile_folder])
    # ids are absolute paths, links resolved: the link to plain.md inside the folder is plain.md
    assert [i for i, _ in found.files] == [(hostile_folder / n).as_posix() for n in ("new\nline.txt", "plain.md")]
    ignored = {Path(k).relative_to(hostile_folder).as_posix(): v for k, v in found.ignored.items()}
    assert "outside the folder" in ignored["passwd.txt"]
    assert "folder" in ignored["outdir"] and "folder" in ignored["sub/up"]
    assert "symlink" in ignored["loop.txt"] and "symlink" in ignored["dangling.txt"]
    assert "FIFO" in ignored["pipe.txt"]
    followed = discover([hostile_folder], follow_symlinks=True)
    ids = [i for i, _ in followed.files]
    outside = hostile_folder.parent / "outside"
    # passwd.txt and outdir/secret.txt are one file, kept once under its real path
    inside = [(hostile_folder / n).as_posix() for n in ("new\nline.txt", "plain.md")]
    assert ids == sorted([(outside / "more.md").as_posix(), (outside / "secret.txt").as_posix(), *inside])
    assert not any("/sub/up/" in i for i in ids)  # the loop is entered once at most
    assert "FIFO" in followed.ignored[(hostile_folder / "pipe.txt").as_posix()]


def test_ingest_reads_no_file_outside_and_lists_what_it_passed_over(hostile_folder, tmp_path, base):
    from lmk_rag.index import QdrantIndex

    idx = QdrantIndex(location=":memory:", encoder=base)
    summary = ingest(idx, [hostile_folder], show_progress=False)
    assert sorted(idx.ids()) == [(hostile_folder / n).as_posix() for n in ("new\nline.txt", "plain.md")]
    assert all("secret" not in h.text for h in idx.search("the secret outside the folder", k=3))
    passwd = (hostile_folder / "passwd.txt").as_posix()
    assert not summary.failed and passwd in summary.ignored
    assert any(line.startswith(f"  ignored {passwd}: symlink to") for line in summary.lines())


def test_same_name_in_two_folders_gives_two_documents_and_one_file_twice_gives_one(tmp_path, base):
    from lmk_rag.index import QdrantIndex

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.md").write_text(f"document x in folder {name}")
    idx = QdrantIndex(location=":memory:", encoder=base)
    summary = ingest(idx, [tmp_path / "a", tmp_path / "b", tmp_path / "a" / "x.md"], show_progress=False)
    assert summary.added == 2 and sorted(idx.ids()) == [(tmp_path / n / "x.md").as_posix() for n in ("a", "b")]


def test_prune_removes_only_vanished_files_under_the_paths_given(tmp_path, base):
    from lmk_rag.index import QdrantIndex

    idx = QdrantIndex(location=":memory:", encoder=base)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}1.md").write_text(f"first of {name}")
        (tmp_path / name / f"{name}2.md").write_text(f"second of {name}")
        ingest(idx, [tmp_path / name], show_progress=False)
    idx.add(["added through the API"], ids=["api-doc"])
    (tmp_path / "a" / "a2.md").unlink()
    summary = ingest(idx, [tmp_path / "a"], prune=True, show_progress=False)
    assert summary.pruned == 1
    kept = [(tmp_path / n).as_posix() for n in ("a/a1.md", "b/b1.md", "b/b2.md")]
    assert sorted(idx.ids()) == sorted([*kept, "api-doc"])


@pytest.mark.slow
def test_ingest_of_the_current_folder_skips_its_own_index(tmp_path):
    (tmp_path / "note.md").write_text("Kettles descale best with citric acid.")
    out = cli("ingest", ".", "--no-progress", "--model", BASE, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    again = cli("ingest", ".", "--no-progress", cwd=tmp_path)
    assert "added 0, updated 0, skipped 1" in again.stdout and "1 documents in" in again.stdout


# ---------------------------------------------------------------- read-only commands, faults
@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["qdrant", "chroma"])
def test_read_only_commands_write_nothing(scheme, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    for command in (["search", "q"], ["info"]):
        one_error_line(cli(*command, "--index", f"{scheme}:{folder}"), "no lmk-rag index")
    assert list(folder.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["search", "q", "--index", "qdrant+http://127.0.0.1:1"], "cannot reach the Qdrant server"),
        (["ingest", "README.md", "--index", "qdrant+http://127.0.0.1:1"], "cannot reach the Qdrant server"),
        (["search", "q", "--index", "chroma+http://127.0.0.1:1"], "cannot reach the Chroma server"),
    ],
)
def test_unreachable_servers_are_one_line(args, message):
    one_error_line(cli(*args, cwd=Path(__file__).resolve().parents[1]), message)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["qdrant", "chroma"])
def test_an_index_path_that_is_a_file_is_one_line(scheme, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "doc.md").write_text("a document")
    one_error_line(cli("ingest", str(tmp_path / "doc.md"), "--index", f"{scheme}:{tmp_path / 'file'}"), "is a file")
    one_error_line(cli("search", "q", "--index", f"{scheme}:{tmp_path / 'file'}"), "is a file")


@pytest.mark.slow
def test_the_qdrant_lock_error_names_the_default_folder(tmp_path, base, monkeypatch):
    from lmk_rag.index import QdrantIndex

    monkeypatch.chdir(tmp_path)
    first = QdrantIndex(encoder=base)
    try:
        out = cli("search", "q", cwd=tmp_path)
        one_error_line(out, "'lmk_index' is open in another process")
        assert "'None'" not in out.stderr
    finally:
        first.close()


@pytest.mark.slow
def test_a_chroma_server_that_dies_is_one_clear_error(tmp_path, base):
    from lmk_rag.index import ChromaIndex
    from tests.chroma_server import start_chroma_server

    proc, port = start_chroma_server(tmp_path / "srv")
    try:
        idx = ChromaIndex(host="127.0.0.1", port=port, encoder=base)
        idx.add(["before the crash"], ids=["a"])
    finally:
        proc.kill()
        proc.wait(timeout=30)
    with pytest.raises(IndexUnavailableError, match="cannot reach the Chroma server"):
        idx.add(["after the crash"], ids=["b"])


def test_chroma_https_uri_asks_for_tls(monkeypatch, base):
    import chromadb

    from lmk_rag.index.uri import open_index, parse_index_uri

    uri = parse_index_uri("chroma+https://db.example:8443")
    assert (uri.host, uri.port, uri.ssl) == ("db.example", 8443, True)
    assert parse_index_uri("chroma+http://db.example").ssl is False
    seen = {}

    def fake_client(**kwargs):
        seen.update(kwargs)
        raise ValueError("Could not connect to a Chroma server. Are you sure it is running?")

    monkeypatch.setattr(chromadb, "HttpClient", fake_client)
    with pytest.raises(IndexUnavailableError, match=r"https://db\.example:8443"):
        open_index(uri, base)
    assert seen["ssl"] is True


def test_errors_are_one_hierarchy():
    for cls in (InvalidInputError, InvalidTypeError, ModelLoadError, IndexUnavailableError):
        assert issubclass(cls, LMKError)
    assert issubclass(InvalidInputError, ValueError) and issubclass(InvalidTypeError, TypeError)


def test_every_error_class_is_importable_from_the_package_root():
    import inspect

    import lmk_rag
    import lmk_rag.errors

    classes = {n for n, o in vars(lmk_rag.errors).items() if inspect.isclass(o) and issubclass(o, LMKError)}
    assert classes == set(lmk_rag.errors.__all__) and classes <= set(lmk_rag.__all__)
    assert all(getattr(lmk_rag, name) is getattr(lmk_rag.errors, name) for name in classes)


def test_a_file_name_that_is_not_utf8_is_reported_and_the_others_are_ingested(tmp_path):
    """Linux file names are bytes: one that is not UTF-8 cannot be a document id. It is listed as
    ignored with the fix, and the rest of the folder is ingested (it used to abort the run)."""
    import os

    from lmk_rag.ingest import discover

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("Tides follow the moon.")
    try:
        with open(os.path.join(os.fsencode(folder), b"caf\xe9.md"), "w") as f:
            f.write("Latin-1 named file.")
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    found = discover([folder])
    assert [i for i, _ in found.files] == [(folder / "good.md").as_posix()]
    reason = "its path is not valid UTF-8 (document ids are text); rename it to ingest it"
    assert found.ignored == {f"{folder.as_posix()}/caf\\xe9.md": reason}


def test_a_tilde_in_an_index_path_is_the_home_folder(tmp_path, monkeypatch):
    from lmk_rag.index.uri import parse_index_uri

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert parse_index_uri("qdrant:~/idx").path == str(tmp_path / "home" / "idx")
    assert parse_index_uri("chroma:~/c").path == str(tmp_path / "home" / "c")
    from lmk_rag import LMKEncoder
    from lmk_rag.index import QdrantIndex

    monkeypatch.chdir(tmp_path)
    idx = QdrantIndex(path="~/idx", encoder=LMKEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu"))
    idx.close()
    assert (tmp_path / "home" / "idx").is_dir() and not (tmp_path / "~").exists()


def test_a_qdrant_server_that_refuses_the_api_key_is_one_line(tmp_path, monkeypatch):
    """A server answering 401 (no or wrong API key): the command line says so in one line, exit 2,
    and sends QDRANT_API_KEY when it is set."""
    import http.server
    import threading

    from tests.cli_runner import run_cli

    seen: list[str | None] = []

    class Refuse(http.server.BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            seen.append(self.headers.get("api-key"))
            body = b'{"status": {"error": "Must provide an API key"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = _refuse

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        uri = f"qdrant+http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setenv("QDRANT_API_KEY", "wrong-key")
        for args in (["search", "x", "--index", uri], ["info", "--index", uri]):
            out = run_cli(*args)
            assert out.returncode == 2, out.stderr
            assert "refused the request (401 Unauthorized)" in out.stderr and "QDRANT_API_KEY" in out.stderr
            assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
        assert "wrong-key" in seen
    finally:
        server.shutdown()


# ---------------------------------------------------------------- two encoders never mixed (#38 item 9)
@pytest.mark.parametrize("scheme", ["qdrant", "chroma"])
def test_an_index_whose_encoder_record_is_lost_is_refused_not_taken_for_new(scheme, tmp_path, base):
    from lmk_rag.index import ChromaIndex, QdrantIndex

    def open_index():
        if scheme == "qdrant":
            return QdrantIndex(tmp_path / "idx", encoder=base)
        return ChromaIndex(tmp_path / "idx", encoder=base)

    idx = open_index()
    idx.add(["Spring tides come at new and full moon."], ids=["tides"])
    idx.close()
    if scheme == "qdrant":
        (tmp_path / "idx" / "lmk.lmk.json").unlink()  # a backup of the shard alone
    else:
        import chromadb

        chromadb.PersistentClient(str(tmp_path / "idx")).delete_collection("lmk__lmk_meta")
    with pytest.raises(IncompatibleIndexError, match="holds 1 documents but no record of the encoder"):
        open_index()


def test_a_model_folder_rewritten_in_place_is_refused(tmp_path, tiny_bert_dir):
    import shutil

    import torch
    from transformers import BertModel

    from lmk_rag.index import QdrantIndex

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    first = LMKEncoder(str(folder), device="cpu", pooling="mean")
    idx = QdrantIndex(tmp_path / "idx", encoder=first)
    idx.add(["Spring tides come at new and full moon."], ids=["tides"])
    idx.close()
    assert len(QdrantIndex(tmp_path / "idx", encoder=LMKEncoder(str(folder), device="cpu", pooling="mean"))) == 1
    model = BertModel.from_pretrained(folder)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    model.save_pretrained(folder)  # same path, other weights
    from lmk_rag.folders.loading import clear_model_cache

    clear_model_cache()
    with pytest.raises(IncompatibleIndexError, match="weights: "):
        QdrantIndex(tmp_path / "idx", encoder=LMKEncoder(str(folder), device="cpu", pooling="mean"))


# ---------------------------------------------------------------- racing creators (#38 item 10)
def test_processes_racing_to_create_one_index_never_see_it_half_made(tmp_path):
    """Four processes open one new embedded index at once: each one either opens it or is told in
    one line that another process holds it; the index ends up made once, with its fingerprint."""
    script = (
        "import sys\n"
        "from lmk_rag import LMKEncoder\n"
        "from lmk_rag.errors import IndexUnavailableError\n"
        "from lmk_rag.index import QdrantIndex\n"
        f"enc = LMKEncoder({BASE!r}, device='cpu', pooling='mean')\n"
        "try:\n"
        f"    idx = QdrantIndex({str(tmp_path / 'idx')!r}, encoder=enc)\n"
        "except IndexUnavailableError as exc:\n"
        "    assert 'open in another process' in str(exc), exc\n"
        "    print('busy')\n"
        "    sys.exit(0)\n"
        "idx.add(['text ' + sys.argv[1]], ids=[sys.argv[1]])\n"
        "idx.close()\n"
        "print('wrote')\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for i in range(4)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()[-2000:]
    wrote = [i for i, (out, _) in enumerate(outs) if b"wrote" in out]
    assert wrote
    from lmk_rag.index import QdrantIndex

    idx = QdrantIndex(tmp_path / "idx", encoder=LMKEncoder(BASE, device="cpu", pooling="mean"))
    assert sorted(idx.ids()) == sorted(str(i) for i in wrote)
    idx.close()


# ---------------------------------------------------------------- a full disk (#38 item 3)
@pytest.fixture()
def small_disk(tmp_path):
    """A mount point and a function that mounts a tmpfs of N MB there (skipped where the test may not mount)."""
    point = tmp_path / "disk"
    point.mkdir()
    mounted = []

    def mount(megabytes: int) -> Path:
        if mounted:
            subprocess.run(["umount", str(point)], check=False)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(point)], capture_output=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small file system here ({done.stderr.decode().strip() or 'not root'})")
        mounted.append(point)
        return point

    yield mount
    if mounted:
        subprocess.run(["umount", str(point)], check=False)


def _fill(disk: Path, leave_mb: int) -> None:
    import shutil

    free = shutil.disk_usage(disk).free - leave_mb * 2**20
    with open(disk / "filler", "wb") as handle:
        handle.truncate(0)
        for _ in range(free // 2**20):
            handle.write(b"\0" * 2**20)


@pytest.mark.slow
def test_a_full_disk_is_one_line_not_a_bus_error(small_disk):
    """Ingest onto a 3 MB disk, and search an index whose disk has filled up, used to die with
    SIGBUS (exit 135, no message): each is now one line naming the disk, the need and the fix."""
    disk = small_disk(3)
    out = cli_subprocess("ingest", str(CORPUS), "--index", f"qdrant:{disk / 'idx'}", "--no-progress")
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "MB free on the disk of" in out.stderr and "put the index on another disk" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1

    disk = small_disk(400)
    # Calls with room on the disk run in this process; those that once died of SIGBUS in their own.
    built = cli("ingest", str(CORPUS), "--index", f"qdrant:{disk / 'idx'}", "--no-progress")
    assert built.returncode == 0, built.stderr[-2000:]
    _fill(disk, leave_mb=40)
    found = cli_subprocess("search", "tides", "--index", f"qdrant:{disk / 'idx'}")
    assert found.returncode == 2 and "free to open" in found.stderr, (found.returncode, found.stderr[-2000:])
    (disk / "filler").unlink()
    again = cli("search", "tides", "--index", f"qdrant:{disk / 'idx'}", "-k", "1")
    assert again.returncode == 0 and "tides.md" in again.stdout  # committed data survived

    # Room to open but not to write: the ingest stops at its first write with one line (exit 2).
    from lmk_rag.index.space import MARGIN_BYTES, OPEN_MARGIN_BYTES, unfilled_bytes

    to_open = unfilled_bytes(disk / "idx", "vector_storage") + OPEN_MARGIN_BYTES
    to_write = unfilled_bytes(disk / "idx") + MARGIN_BYTES
    assert to_write > to_open + 16 * 2**20
    _fill(disk, leave_mb=(to_open + to_write) // 2 // 2**20)
    more = disk.parent / "more"
    more.mkdir()
    (more / "new.md").write_text("A new document about kettles and citric acid.")
    stopped = cli_subprocess("ingest", str(more), "--index", f"qdrant:{disk / 'idx'}", "--no-progress")
    assert stopped.returncode == 2 and "free to write" in stopped.stderr, (stopped.returncode, stopped.stderr[-2000:])
    assert len(stopped.stderr.strip().splitlines()) == 1
    (disk / "filler").unlink()
    info = cli("info", "--index", f"qdrant:{disk / 'idx'}", "--json")
    assert json.loads(info.stdout)["documents"] == 5  # nothing lost, nothing half-written


@pytest.mark.slow
def test_building_a_missing_landmark_index_on_a_full_disk_is_one_line_not_a_bus_error(small_disk):
    """The first open of an index without its landmark index builds one: with room to open but not
    to build (the battery left 60 MB), one line instead of SIGBUS, and the index is untouched."""
    import shutil

    from lmk_rag.index.space import MARGIN_BYTES, OPEN_MARGIN_BYTES, unfilled_bytes

    disk = small_disk(800)  # the engine's files are sparse: a retry needs room for two shards' holes
    built = cli("ingest", str(CORPUS), "--index", f"qdrant:{disk / 'idx'}", "--no-progress")  # room: in this process
    assert built.returncode == 0, built.stderr[-2000:]
    shutil.rmtree(disk / "idx" / "lmk.landmarks")
    to_open = unfilled_bytes(disk / "idx", "vector_storage") + OPEN_MARGIN_BYTES
    _fill(disk, leave_mb=(to_open + MARGIN_BYTES // 2) // 2**20)
    out = cli_subprocess("search", "tides", "--index", f"qdrant:{disk / 'idx'}")
    assert out.returncode == 2 and "free to write" in out.stderr, (out.returncode, out.stderr[-2000:])
    assert len(out.stderr.strip().splitlines()) == 1
    (disk / "filler").unlink()
    again = cli("search", "tides", "--index", f"qdrant:{disk / 'idx'}", "-k", "1")
    assert again.returncode == 0 and "tides.md" in again.stdout, again.stderr[-2000:]


class _ShortOfDiskToMerge:
    """An Edge shard whose optimizer refuses as the engine does on a disk with too little room to
    merge (seen on a 1M-document index: merging writes a new copy of the segments first)."""

    def __init__(self, shard) -> None:
        self._shard = shard

    def optimize(self) -> None:
        raise Exception(
            "Service runtime error: Not enough space available for optimization, "
            "needed: 28.56 GiB, available: 15.33 GiB"
        )

    def __getattr__(self, name: str):
        return getattr(self._shard, name)


def test_no_room_to_merge_segments_is_one_clear_error_and_close_still_keeps_every_write(tmp_path, base, caplog):
    from lmk_rag.errors import InsufficientSpaceError
    from lmk_rag.index import QdrantIndex

    idx = QdrantIndex(tmp_path / "idx", encoder=base)
    idx.add(["Tides rise twice a day.", "Descale a kettle with citric acid."], ids=["tides", "kettle"])
    idx.store.shard = _ShortOfDiskToMerge(idx.store.shard)
    with pytest.raises(InsufficientSpaceError, match=r"could not be optimized.*needed: 28.56 GiB, available: 15.33"):
        idx.optimize()
    idx.add(["Sourdough starter needs feeding."], ids=["bread"])
    with caplog.at_level("WARNING"):
        idx.close()  # merging can wait: the writes are flushed, no exception
    assert "call optimize() again" in caplog.text
    reopened = QdrantIndex(tmp_path / "idx", encoder=base)
    try:
        assert len(reopened) == 3
        assert reopened.search("feeding a starter", k=1, mode="maxsim")[0].id == "bread"
    finally:
        reopened.close()


def test_a_collection_name_cannot_collide_with_the_files_beside_another(tmp_path, base):
    from lmk_rag.index import QdrantIndex

    for name in ("lmk.landmarks", "lmk__lmk_landmarks", "a/b", ".hidden", ""):
        with pytest.raises(InvalidInputError, match="collection must be a name of letters"):
            QdrantIndex(tmp_path / "idx", collection=name, encoder=base)


# ---------------------------------------------------------------- damaged index files (#38 item 7)
@pytest.fixture(scope="module")
def built_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("built") / "idx"
    out = cli("ingest", str(CORPUS), "--index", f"qdrant:{folder}", "--model", BASE, "--no-progress")
    assert out.returncode == 0, out.stderr[-2000:]
    return folder


def _damaged_copy(built: Path, tmp_path: Path, pattern: str, damage) -> Path:
    import shutil

    folder = tmp_path / "idx"
    shutil.copytree(built, folder)
    targets = list(folder.glob(pattern))
    assert targets, f"nothing to damage at {pattern}: the engine's file layout changed"
    for target in targets:
        damage(target)
    return folder


def test_a_truncated_payload_file_is_one_line_naming_the_index_and_the_rebuild(built_index, tmp_path):
    folder = _damaged_copy(
        built_index, tmp_path, "lmk/segments/*/payload_storage/page_0.dat", lambda p: os.truncate(p, 100)
    )
    out = cli("search", "tides", "--index", f"qdrant:{folder}")
    assert out.returncode == 2 and f"the index at '{folder}' is damaged" in out.stderr
    assert "rebuild it" in out.stderr and "Traceback" not in out.stderr


def test_garbled_vectors_are_found_and_reencoded_by_ingest_verify(built_index, tmp_path):
    def garble(path: Path) -> None:
        with open(path, "r+b") as handle:
            handle.write(bytes([0x47]) * 4096)  # the first documents' pooled vectors, overwritten

    folder = _damaged_copy(built_index, tmp_path, "lmk/segments/*/vector_storage-pooled/vectors/chunk_0.mmap", garble)
    plain = cli("ingest", str(CORPUS), "--index", f"qdrant:{folder}", "--no-progress")
    assert "skipped 5 unchanged" in plain.stdout  # the damage is invisible to a plain re-run
    fixed = cli("ingest", str(CORPUS), "--index", f"qdrant:{folder}", "--no-progress", "--verify")
    assert fixed.returncode == 0 and "verified 5 documents: 3 re-encoded" in fixed.stdout, fixed.stdout
    again = cli("ingest", str(CORPUS), "--index", f"qdrant:{folder}", "--no-progress", "--verify")
    assert "verified 5 documents: 0 re-encoded" in again.stdout
    hits = json.loads(cli("search", "tides", "--index", f"qdrant:{folder}", "--json", "--mode", "prefetch").stdout)
    assert all(-1.0 <= hit["score"] <= 1.0 + 1e-4 for hit in hits)


def test_a_truncated_vector_file_is_rebuilt_by_ingest_verify(built_index, tmp_path):
    folder = _damaged_copy(
        built_index,
        tmp_path,
        "lmk/segments/*/vector_storage-landmarks/vectors/chunk_0.mmap",
        lambda p: os.truncate(p, 1000),
    )
    assert cli("search", "tides", "--index", f"qdrant:{folder}").returncode == 2
    fixed = cli("ingest", str(CORPUS), "--index", f"qdrant:{folder}", "--no-progress", "--verify")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "5 re-encoded" in fixed.stdout and f"kept at {folder}.damaged" in fixed.stdout
    found = json.loads(cli("search", "tides and the moon", "--index", f"qdrant:{folder}", "--json").stdout)
    assert found[0]["id"].endswith("tides.md")


def test_a_damaged_landmark_index_of_a_large_index_falls_back_to_pooled_candidates_and_verify_rebuilds_it(
    built_index, tmp_path, monkeypatch
):
    """The landmark index holds nothing the index does not: where it is too large to rebuild on
    open, searches go on (with one warning saying how to rebuild it) and `ingest --verify` rebuilds it."""
    from lmk_rag.index.qdrant import store

    monkeypatch.setattr(store, "AUTO_REBUILD_DOCUMENTS", 0)
    folder = _damaged_copy(
        built_index,
        tmp_path,
        "lmk.landmarks/segments/*/vector_storage-lm/tq_vectors/chunk_0.mmap",
        lambda p: os.truncate(p, 100),
    )
    found = cli("search", "tides and the moon", "--index", f"qdrant:{folder}", "--json")
    assert found.returncode == 0, found.stderr[-2000:]
    assert json.loads(found.stdout)[0]["id"].endswith("tides.md")
    assert "landmark index" in found.stderr and "--verify" in found.stderr
    fixed = cli("ingest", str(CORPUS), "--index", f"qdrant:{folder}", "--no-progress", "--verify")
    assert fixed.returncode == 0 and "0 re-encoded" in fixed.stdout, fixed.stdout + fixed.stderr[-2000:]
    again = cli("search", "tides and the moon", "--index", f"qdrant:{folder}", "--json")
    assert again.returncode == 0 and "landmark index" not in again.stderr, again.stderr[-2000:]
    assert json.loads(again.stdout)[0]["id"].endswith("tides.md")


def _random_bytes(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes(np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())


def _replace_folder_by_a_file(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
    path.write_text("not a shard")


@pytest.mark.parametrize(
    ("pattern", "damage"),
    [
        ("lmk.landmarks/edge_config.json", lambda p: p.unlink()),  # config deleted
        ("lmk.landmarks/edge_config.json", lambda p: p.write_text("{garbled")),
        # the landmark index's 4-bit codes (LANDMARK_DATATYPE)
        ("lmk.landmarks/segments/*/vector_storage-lm/tq_vectors/chunk_0.mmap", lambda p: os.truncate(p, 100)),
        ("lmk.landmarks/segments/*/vector_storage-lm/tq_vectors/chunk_0.mmap", _random_bytes),  # random codes
        ("lmk.landmarks/segments/*/payload_storage/page_0.dat", lambda p: p.write_bytes(bytes(p.stat().st_size))),
        ("lmk.landmarks", _replace_folder_by_a_file),
    ],
    ids=["config-deleted", "config-garbled", "vectors-truncated", "vectors-random", "payload-zeroed", "a-file"],
)
def test_a_damaged_landmark_index_is_noticed_on_open_and_rebuilt(built_index, tmp_path, pattern, damage):
    """Every open compares the landmark index with the collection (counts, a sample's vectors and
    owners): a damaged one is rebuilt with one warning, and the rankings are a clean index's."""
    expected = json.loads(
        cli("search", "tides and the moon", "--index", f"qdrant:{built_index}", "--json", "--mode", "prefetch").stdout
    )
    folder = _damaged_copy(built_index, tmp_path, pattern, damage)
    found = cli("search", "tides and the moon", "--index", f"qdrant:{folder}", "--json", "--mode", "prefetch")
    assert found.returncode == 0 and "Traceback" not in found.stderr, found.stderr[-2000:]
    assert [h["id"] for h in json.loads(found.stdout)] == [h["id"] for h in expected]
    assert "landmark index" in found.stderr or "not a landmark index" in found.stderr, found.stderr
    again = cli("search", "tides and the moon", "--index", f"qdrant:{folder}", "--json", "--mode", "prefetch")
    assert "landmark index" not in again.stderr, again.stderr  # rebuilt once, trusted after
    assert [h["id"] for h in json.loads(again.stdout)] == [h["id"] for h in expected]


def test_an_emptied_write_ahead_log_does_not_make_a_closed_index_unopenable(built_index, tmp_path):
    def empty(path: Path) -> None:
        os.truncate(path, 0)
        os.utime(path, (0, 0))  # emptied long ago, not being written now

    folder = _damaged_copy(built_index, tmp_path, "lmk/wal/open-*", empty)
    found = cli("search", "tides and the moon", "--index", f"qdrant:{folder}", "--json")
    assert found.returncode == 0, found.stderr[-2000:]
    assert json.loads(found.stdout)[0]["id"].endswith("tides.md")


def test_a_path_longer_than_the_system_allows_is_reported_and_the_rest_ingested(tmp_path, base):
    from lmk_rag.index import QdrantIndex

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("A short document about tides.")
    here = os.getcwd()
    try:
        os.chdir(docs)
        for _ in range(22):  # 22 folders of 200 characters: deeper than PATH_MAX (4096)
            os.mkdir("d" * 200)
            os.chdir("d" * 200)
        with open("deep.md", "w") as handle:
            handle.write("A document too deep to open by its path.")
    finally:
        os.chdir(here)
    idx = QdrantIndex(location=":memory:", encoder=base)
    summary = ingest(idx, [docs], show_progress=False)
    assert idx.ids() == [(docs / "ok.md").as_posix()] and not summary.failed
    assert any("too long" in reason for reason in summary.ignored.values()), summary.ignored


# ---------------------------------------------------------------- read-only media (#38 item 12)
@pytest.mark.slow
def test_an_index_on_read_only_media_can_be_searched(small_disk):
    disk = small_disk(400)
    built = cli("ingest", str(CORPUS), "--index", f"qdrant:{disk / 'idx'}", "--no-progress")
    assert built.returncode == 0, built.stderr[-2000:]
    remount = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True)
    if remount.returncode != 0:
        pytest.skip(f"cannot remount read-only here ({remount.stderr.decode().strip()})")
    before = {p: p.stat().st_mtime_ns for p in disk.rglob("*")}
    found = cli("search", "tides and the moon", "--index", f"qdrant:{disk / 'idx'}", "--json")
    assert found.returncode == 0, found.stderr[-2000:]
    assert json.loads(found.stdout)[0]["id"].endswith("tides.md")
    info = cli("info", "--index", f"qdrant:{disk / 'idx'}", "--json")
    assert info.returncode == 0 and json.loads(info.stdout)["documents"] == 5
    assert {p: p.stat().st_mtime_ns for p in disk.rglob("*")} == before
    # A write is refused, never reported as made on the temporary copy and dropped (#51 item 6).
    more = disk.parent / "more"
    more.mkdir()
    (more / "new.md").write_text("A new document about kettles and citric acid.")
    added = cli("ingest", str(more), "--index", f"qdrant:{disk / 'idx'}", "--no-progress")
    one_error_line(added, "is on read-only media")
    assert "added" not in added.stdout
    info = cli("info", "--index", f"qdrant:{disk / 'idx'}", "--json")
    assert json.loads(info.stdout)["documents"] == 5


# ---------------------------------------------------------------- embedded Chroma across processes (#38 item 11)
def test_a_long_lived_embedded_chroma_sees_what_another_process_wrote(tmp_path, base):
    from lmk_rag.index import ChromaIndex

    idx = ChromaIndex(tmp_path / "chroma", encoder=base)
    idx.add(["Spring tides come at new and full moon."], ids=["tides"])
    assert [h.id for h in idx.search("tides", k=5)] == ["tides"]
    other = (
        "from lmk_rag import LMKEncoder\n"
        "from lmk_rag.index import ChromaIndex\n"
        f"b = ChromaIndex({str(tmp_path / 'chroma')!r}, encoder=LMKEncoder({BASE!r}, device='cpu'))\n"
        "b.add(['Kettles descale best with citric acid.', 'Bread rises with a starter.'], ids=['kettle', 'bread'])\n"
        "b.add(['Spring tides, rewritten by another process.'], ids=['tides'])\n"
        "b.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", other], capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(idx) == 3 and idx.search("descale a kettle", k=1)[0].id == "kettle"
    assert idx.get(["tides"])[0].text.startswith("Spring tides, rewritten")
    assert sorted(d.id for batch in idx.scan() for d, _ in batch) == ["bread", "kettle", "tides"]
    idx.close()


# ---------------------------------------- nothing deleted that lmk-rag did not write (#51 item 7)
@pytest.mark.parametrize("marker", ["config.json", "modules.json"])
def test_export_overwrite_never_deletes_a_folder_lmk_rag_did_not_write(tmp_path, marker):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('mine')")
    (project / "thesis.tex").write_text("\\documentclass{article}")
    (project / marker).write_text("{}")
    before = sorted(p.relative_to(project).as_posix() for p in project.rglob("*"))
    out = cli("export", "default", str(project), "--format", "lmk", "--overwrite")
    one_error_line(out, "is not a model folder lmk-rag wrote")
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*")) == before


def test_export_overwrite_replaces_its_own_folder_but_not_files_added_to_it(tmp_path):
    folder = tmp_path / "model"
    assert cli("export", "default", str(folder), "--format", "lmk").returncode == 0
    assert cli("export", "default", str(folder), "--format", "lmk", "--overwrite").returncode == 0
    (folder / "notes.md").write_text("my notes")
    out = cli("export", "default", str(folder), "--format", "lmk", "--overwrite")
    one_error_line(out, "holds files lmk-rag did not write (notes.md)")
    assert (folder / "notes.md").read_text() == "my notes"


# ---------------------------------------------------------------- a file too large to encode (#51 item 13)
def test_a_file_over_the_size_limit_is_passed_over_with_why_and_the_rest_ingested(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "small.md").write_text("A small note about tides and the Moon.")
    with open(folder / "huge.txt", "wb") as handle:  # 150 MB, written sparse: the battery's file
        handle.truncate(150 * 2**20)
    out = cli("ingest", str(folder), "--index", f"qdrant:{tmp_path / 'idx'}", "--no-progress", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert summary["documents"] == 1
    (reason,) = [why for path, why in summary["ignored"].items() if path.endswith("huge.txt")]
    assert "too large: 150.0 MB, over the 10 MB limit" in reason and "--max-file-mb" in reason
    bad = cli("ingest", str(folder), "--index", f"qdrant:{tmp_path / 'idx'}", "--max-file-mb", "-1")
    one_error_line(bad, "max_file_mb must be a number of MB > 0")
    with pytest.raises(InvalidInputError, match="max_file_mb"):
        discover([folder], max_file_mb="10")
    assert [p.name for _, p in discover([folder], max_file_mb=0).files] == ["huge.txt", "small.md"]


def test_a_refused_second_opener_leaves_the_holder_working_and_closable(tmp_path, base):
    from lmk_rag.index import QdrantIndex

    holder = QdrantIndex(tmp_path / "idx", encoder=base)
    holder.add(["Tides rise twice a day."], ids=["x"])
    with pytest.raises(IndexUnavailableError, match="open in another process or in another QdrantIndex"):
        QdrantIndex(tmp_path / "idx", encoder=base)
    holder.add(["Bread rises with yeast."], ids=["y"])
    assert [h.id for h in holder.search("tides", k=1)] == ["x"]
    holder.close()  # no engine exception
    again = QdrantIndex(tmp_path / "idx", encoder=base)
    assert len(again) == 2
    again.close()


def test_a_read_only_index_that_cannot_be_copied_is_one_clear_error(tmp_path, monkeypatch):
    import shutil

    from lmk_rag.errors import InsufficientSpaceError
    from lmk_rag.index.qdrant.edge_files import read_only_copy

    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "f").write_text("x")

    def failing_copy(src, dst, **kwargs):
        raise shutil.Error([(str(src), str(dst), "[Errno 28] No space left on device")])

    monkeypatch.setattr(shutil, "copytree", failing_copy)
    with pytest.raises(InsufficientSpaceError, match=r"No space left on device.*set TMPDIR"):
        read_only_copy(tmp_path / "idx")
    assert not [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("lmk-rag-read-only-*") if (p / "idx").exists()]


def test_k_beyond_what_an_engine_can_count_is_refused(tmp_path, base):
    from lmk_rag.index import QdrantIndex

    idx = QdrantIndex(location=":memory:", encoder=base)
    idx.add(["Tides rise twice a day."], ids=["x"])
    for call in (lambda: idx.search("tides", k=2**63 - 1), lambda: idx.context("tides", 128, k=2**63 - 1)):
        with pytest.raises(InvalidInputError, match="k must be an int from 1 to 10,000"):
            call()
    assert [h.id for h in idx.search("tides", k=10_000)] == ["x"]


# ---------------------------------------------------------------- damaged model folders (#51 item 12)
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export") / "merged"
    assert cli("export", "default", str(folder), "--format", "merged").returncode == 0
    return folder


@pytest.mark.parametrize(
    ("name", "damage", "message"),
    [
        ("tokenizer.json", lambda p: p.write_text("{}"), "is not the file lmk-rag wrote"),
        ("lmk_config.json", lambda p: p.write_text("[]"), "is not the file lmk-rag wrote"),
        ("model.safetensors", _random_bytes, "is not the file lmk-rag wrote"),  # between any sampled blocks
    ],
)
def test_a_damaged_model_folder_lmk_rag_wrote_is_one_clear_error(exported, tmp_path, name, damage, message):
    import shutil

    from lmk_rag import clear_model_cache

    folder = tmp_path / "model"
    shutil.copytree(exported, folder)
    damage(folder / name)
    clear_model_cache()
    with pytest.raises(ModelLoadError, match=message):
        LMKEncoder(str(folder), device="cpu").encode(["hello"])


def test_a_stub_tokenizer_or_config_in_a_folder_from_elsewhere_is_one_clear_error(exported, tmp_path):
    import shutil

    from lmk_rag import clear_model_cache
    from lmk_rag.folders.write import MANIFEST

    for name, text, message in (
        ("tokenizer.json", "{}", "cannot load the tokenizer"),
        ("lmk_config.json", "[]", "is not an lmk-rag model config"),
    ):
        folder = tmp_path / name
        shutil.copytree(exported, folder)
        (folder / MANIFEST).unlink()  # copied by hand, or written by another tool
        (folder / name).write_text(text)
        clear_model_cache()
        with pytest.raises(ModelLoadError, match=message):
            LMKEncoder(str(folder), device="cpu").encode(["hello"])


def test_chroma_landmark_search_is_wide_enough_to_find_what_concurrent_writers_added(tmp_path, base):
    """#51 item 9: Chroma's default HNSW breadth (100) let rank-5 documents differ between two
    identical Ray ingests; the landmark collection searches wider, also one made before."""
    import chromadb

    from lmk_rag.index import ChromaIndex
    from lmk_rag.index.chroma import LANDMARK_SEARCH_EF

    old = chromadb.PersistentClient(path=str(tmp_path / "old"))
    old.get_or_create_collection("lmk", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    for folder in ("old", "new"):
        idx = ChromaIndex(tmp_path / folder, encoder=base)
        try:
            assert idx.landmarks.configuration["hnsw"]["ef_search"] == LANDMARK_SEARCH_EF
            assert idx.landmarks.configuration["hnsw"]["space"] == "cosine"
        finally:
            idx.close()
