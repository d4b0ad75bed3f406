"""Regression tests for the defects a review of main found (one settings source, fingerprints,
caches, framework defaults, a quiet and honest command line)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lmk_rag import LMKEncoder
from lmk_rag.encoding.settings import EncoderSettings

from .cli_runner import run_cli as cli  # in this process: the real parser, messages, exit codes

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
BASE = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture()
def k64_folder(tmp_path, packaged_dir):
    """A trained-style LMK folder over the packaged base that records k=64 and mean pooling."""
    folder = tmp_path / "k64"
    folder.mkdir()
    (folder / "lmk_config.json").write_text(
        json.dumps({"base_model": str(packaged_dir), "pooling": "mean", "granularity": 64, "landmark_token_id": None})
    )
    return folder


# ---------------------------------------------------------------- one settings record
def test_every_setting_is_written_once_and_derived_everywhere():
    from llama_index.embeddings.lmk import LMKEmbedding

    from langchain_lmk import LMKEmbeddings
    from lmk_rag.cli import build_parser

    fields = {f.name: f for f in dataclasses.fields(EncoderSettings)}
    for cls in (LMKEmbeddings, LMKEmbedding):
        for name in EncoderSettings.names("framework"):
            assert cls.model_fields[name].default == fields[name].default, (cls, name)
            assert cls.model_fields[name].description == fields[name].metadata["help"]
    ingest = build_parser()._subparsers._group_actions[0].choices["ingest"]
    flags = {a.dest: a for a in ingest._actions}
    for name in EncoderSettings.names("cli"):
        assert name in flags and flags[name].default is None, name  # not given -> the index's / folder's
    assert EncoderSettings.names("fingerprint") == tuple(
        n
        for n in (
            "model",
            "pooling",
            "granularity",
            "normalize",
            "max_length",
            "truncate_tokens",
            "window_overlap",
            "query_prefix",
            "document_prefix",
            "layout",
            "landmark_weights",
            "sentence_max_tokens",
            "sentence_language",
        )
        if n in fields
    )
    with pytest.raises(TypeError, match=r"unknown encoder setting.*granularty"):
        LMKEncoder(granularty=64)


def test_the_encoders_signature_names_every_setting_with_its_default_and_allowed_values():
    """LMKEncoder's keyword arguments are EncoderSettings' fields, same order, same defaults; the
    Literal types of its modes hold exactly the values the settings accept."""
    import dataclasses
    import inspect
    import typing

    from lmk_rag.encoding.settings import EncoderSettings

    params = inspect.signature(LMKEncoder.__init__).parameters
    named = [p for p in params.values() if p.name not in ("self", "unknown")]
    fields = dataclasses.fields(EncoderSettings)
    assert [p.name for p in named] == [f.name for f in fields]
    assert all(p.default == f.default for p, f in zip(named, fields)), [
        (p.name, p.default, f.default) for p, f in zip(named, fields) if p.default != f.default
    ]
    hints = typing.get_type_hints(LMKEncoder.__init__)
    for f in fields:
        choices = f.metadata["choices"]
        if choices:
            literal = [a for a in typing.get_args(hints[f.name]) if typing.get_origin(a) is typing.Literal]
            literal = literal or [hints[f.name]]
            assert typing.get_args(literal[0]) == tuple(choices), f.name


def test_framework_classes_use_a_trained_folders_recorded_settings(k64_folder):
    from llama_index.embeddings.lmk import LMKEmbedding

    from langchain_lmk import LMKEmbeddings

    core = LMKEncoder(k64_folder, device="cpu")
    assert (core.granularity, core.pooling) == (64, "mean")
    for cls in (LMKEmbeddings, LMKEmbedding):
        framework = cls(model=str(k64_folder), device="cpu").encoder
        assert (framework.granularity, framework.pooling) == (64, "mean"), cls
        assert framework.fingerprint == core.fingerprint
    overridden = LMKEmbeddings(model=str(k64_folder), granularity=32, device="cpu").encoder
    assert overridden.granularity == 32


def test_llama_index_model_name_is_the_model_loaded():
    from llama_index.embeddings.lmk import LMKEmbedding

    from lmk_rag.folders.models import SHIPPED_ADAPTER_NAME

    assert LMKEmbedding(device="cpu").model_name == SHIPPED_ADAPTER_NAME
    assert LMKEmbedding(model=BASE, device="cpu").model_name == BASE
    # A name that is not the model loaded is never echoed: model_name loads that model, or fails.
    assert LMKEmbedding(model_name=BASE, device="cpu").model_name == BASE
    with pytest.raises(OSError, match="mine"):
        LMKEmbedding(device="cpu", model_name="mine")


# ---------------------------------------------------------------- fingerprints
def test_fingerprint_records_every_setting_that_changes_vectors(tmp_path):
    base = LMKEncoder(BASE, device="cpu")
    for change in ({"max_length": 256}, {"window_overlap": 1}, {"truncate_tokens": 100}):  # default overlap is 3
        other = LMKEncoder(BASE, device="cpu", **change)
        assert base.fingerprint.differences(other.fingerprint), change
    sentences = LMKEncoder(BASE, granularity="sentence", device="cpu")
    assert sentences.fingerprint.differences(
        LMKEncoder(BASE, granularity="sentence", sentence_max_tokens=32, device="cpu").fingerprint
    )
    # the sentence settings play no part at fixed k, so they do not refuse an index then
    assert not base.fingerprint.differences(LMKEncoder(BASE, sentence_max_tokens=32, device="cpu").fingerprint)


@pytest.mark.slow
def test_an_index_built_with_a_relative_model_path_reopens_from_elsewhere(tmp_path, tiny_bert_dir):
    import shutil

    project = tmp_path / "project"
    shutil.copytree(tiny_bert_dir, project / "m")
    (project / "doc.md").write_text("Kettles descale best with citric acid.")
    built = cli("ingest", "doc.md", "--index", "qdrant:idx", "--model", "./m", "--no-progress", cwd=project)
    assert built.returncode == 0, built.stderr[-2000:]
    info = json.loads(cli("info", "--index", f"qdrant:{project / 'idx'}", "--json", cwd=tmp_path).stdout)
    assert info["fingerprint"]["model"] == str((project / "m").resolve())
    found = cli("search", "kettle", "--index", f"qdrant:{project / 'idx'}", "--json", cwd=tmp_path)
    assert found.returncode == 0 and json.loads(found.stdout)[0]["id"] == (project / "doc.md").resolve().as_posix()


# ---------------------------------------------------------------- model cache
def test_the_model_cache_keys_on_the_landmark_id_and_can_be_freed(k64_folder, bert_tokenizer):
    from lmk_rag.folders import loading as encoder_module

    sep = LMKEncoder(k64_folder, device="cpu")
    other = LMKEncoder(k64_folder, device="cpu", landmark_token_id=bert_tokenizer.cls_token_id)
    assert sep.model is not other.model  # an adapter's offset is added to the landmark row
    encoder_module.clear_model_cache()
    assert LMKEncoder(k64_folder, device="cpu").model is not sep.model
    for i in range(encoder_module.MODEL_CACHE_SIZE + 2):
        LMKEncoder(k64_folder, device="cpu", landmark_token_id=100 + i)
    assert len(encoder_module._MODEL_CACHE) <= encoder_module.MODEL_CACHE_SIZE


# ---------------------------------------------------------------- huge texts
def test_huge_texts_tokenize_in_pieces_with_identical_tokens(monkeypatch):
    from lmk_rag.encoding import tokenization

    enc = LMKEncoder(BASE, device="cpu")
    text = "Tides rise and fall twice a day.\nThe moon pulls the sea;  storms push it. " * 40
    texts = [text, "short", text[::-1]]
    whole = enc.tokenize(texts, "query: ")
    monkeypatch.setattr(tokenization, "PIECE_CHARS", 37)
    monkeypatch.setattr(tokenization, "CALL_CHARS", 300)
    pieces = enc.tokenize(texts, "query: ")
    for name in ("ids", "starts", "ends", "offsets", "text_lengths"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(pieces, name), err_msg=name)


def test_ingest_progress_moves_inside_a_long_document(tmp_path, capsys):
    from lmk_rag.index import QdrantIndex
    from lmk_rag.ingest import ingest

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "long.md").write_text("A sentence about tides and the moon. " * 800)
    idx = QdrantIndex(location=":memory:", encoder=LMKEncoder(BASE, device="cpu", max_batch_tokens=1024))
    ingest(idx, [tmp_path / "docs"], show_progress=True)
    err = capsys.readouterr().err
    assert "encode" in err and "tok" in err  # the encoder's token bar, inside the one document


# ---------------------------------------------------------------- the command line
@pytest.mark.slow
def test_cli_is_quiet_about_model_loading(tmp_path):
    (tmp_path / "doc.md").write_text("Kettles descale best with citric acid.")
    out = cli("ingest", str(tmp_path / "doc.md"), "--index", f"qdrant:{tmp_path / 'idx'}", "--no-progress")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Loading weights" not in out.stderr and "FutureWarning" not in out.stderr, out.stderr
    found = cli("search", "kettle", "--index", f"qdrant:{tmp_path / 'idx'}")
    assert found.returncode == 0 and found.stderr == "", found.stderr


@pytest.mark.slow
def test_cli_shows_a_bug_with_its_traceback_and_exit_1(tmp_path, monkeypatch):
    from lmk_rag import cli as cli_module
    from lmk_rag.cli import indexes

    def broken(args):
        raise KeyError("a programming error")

    monkeypatch.setattr(indexes, "run_info", broken)
    with pytest.raises(KeyError):
        cli_module.main(["info", "--index", str(tmp_path)])
    script = (
        "import sys, lmk_rag.cli as c, lmk_rag.cli.indexes as commands\n"
        "def broken(args): raise KeyError('a programming error')\n"
        "commands.run_info = broken\nsys.exit(c.main(['info']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 1 and "Traceback" in out.stderr and "KeyError" in out.stderr


@pytest.mark.slow
def test_cli_error_lines_keep_their_traceback_under_verbose(tmp_path):
    quiet = cli("search", "q", "--index", f"qdrant:{tmp_path / 'none'}")
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    loud = cli("-v", "search", "q", "--index", f"qdrant:{tmp_path / 'none'}")
    assert loud.returncode == 2 and "Traceback" in loud.stderr and "IndexNotFoundError" in loud.stderr


def test_a_huge_input_pins_the_allocators_mmap_threshold(monkeypatch, tiny_bert_dir):
    """Peak memory grew with the number of forward batches (glibc's heap fragmenting); the encoder
    pins the mmap threshold once it sees a huge input. bench_huge_files.py measures the effect."""
    from lmk_rag import encoder as encoder_module

    calls = []
    monkeypatch.setattr(encoder_module, "HUGE_INPUT_TOKENS", 2000)
    monkeypatch.setattr(encoder_module, "pin_mmap_threshold", lambda: calls.append(1) or True)
    enc = LMKEncoder(tiny_bert_dir, device="cpu")
    enc.encode_multi(["word " * 100] * 50)  # many short texts: not one huge input
    assert calls == []
    enc.encode_multi(["word " * 3000])
    assert calls == [1]


# ---------------------------------------------------------------- contracts on the page
def test_every_public_name_has_a_docstring():
    """Each public module, class, function and method of the two packages says what it does and
    why (private names, starting with ``_``, are exempt); mkdocstrings renders these pages."""
    import ast

    root = Path(__file__).resolve().parents[1]
    missing = []
    for package in ("lmk_rag", "integrations"):
        for path in sorted((root / package).rglob("*.py")):
            if "trained" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = path.relative_to(root).as_posix()
            if ast.get_docstring(tree) is None:
                missing.append(f"{where}: module")

            def visit(nodes: list[ast.stmt], prefix: str = "", where: str = where) -> None:
                for node in nodes:
                    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        continue
                    if node.name.startswith("_"):
                        continue
                    if ast.get_docstring(node) is None:
                        missing.append(f"{where}:{node.lineno} {prefix}{node.name}")
                    if isinstance(node, ast.ClassDef):
                        visit(node.body, f"{prefix}{node.name}.")

            visit(tree.body)
    assert not missing, "public names without a docstring:\n" + "\n".join(missing)


def test_the_house_keeps_its_layers():
    """The import contract in pyproject.toml (layers, ``ingest`` / ``eval`` / ``train`` independent)
    holds, and the root of the package holds only its faces."""
    import shutil

    root = Path(__file__).resolve().parents[1]
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    done = subprocess.run([lint, "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    faces = sorted(p.name for p in (root / "lmk_rag").glob("*.py"))
    assert len(faces) <= 10, faces


def test_public_signatures_say_what_their_values_are():
    """Public signatures that take or return ``Any`` (research/scripts/count_any.py) stay at or
    below the count #50 left: a new one names its type, or this number is raised with a reason."""
    import runpy

    root = Path(__file__).resolve().parents[1]
    count_any = runpy.run_path(str(root / "research" / "scripts" / "count_any.py"))
    rows = [
        row
        for package in count_any["PACKAGES"]
        for path in sorted((root / package).rglob("*.py"))
        for row in count_any["signatures"](path)
    ]
    assert len(rows) <= 27, "\n".join(rows)
