"""A CLI that answers: --version, help on every argument, an example per command, ingest --json,
-v that tells what lmk-rag does, and a warning for landmark pooling on an untrained model."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from lmk_rag.cli import build_parser

from .cli_runner import run_cli

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "sample_corpus"


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_version_is_the_installed_distributions():
    proc = subprocess.run([sys.executable, "-m", "lmk_rag.cli", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"lmk-rag {version('lmk-rag')}"


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_argument_has_help_and_every_command_an_example(name):
    command = _commands()[name]
    silent = [
        a.option_strings or [a.dest]
        for a in command._actions
        if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()
    ]
    assert not silent, f"lmk-rag {name}: arguments without help: {silent}"
    assert command.epilog.startswith("examples:\n") and f"lmk-rag {name} " in command.epilog
    assert "examples:" in command.format_help()


@pytest.mark.slow
def test_ingest_json_is_the_summary_and_verbose_logs_model_index_and_settings(tmp_path):
    index = f"qdrant:{tmp_path / 'idx'}"
    first = run_cli("ingest", str(CORPUS), "--index", index, "--no-progress", "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["added"] == 5 and summary["documents"] == 5 and summary["failed"] == {}
    assert summary["landmarks"] > 0 and summary["tokens"] > 0
    again = run_cli("-v", "ingest", str(CORPUS), "--index", index, "--no-progress", "--json")
    assert json.loads(again.stdout)["skipped"] == 5
    assert "encoder: model lmk-rag/all-MiniLM-L6-v2-lmk-v4" in again.stderr
    assert "pooling=lmk, granularity=32, window 256 tokens (overlap 0 chunks)" in again.stderr
    assert f"index {index}: existing; encoder settings from the index" in again.stderr
    assert "(5 documents)" in again.stderr
    quiet = run_cli("search", "tides", "--index", index, "-k", "1")
    assert "encoder:" not in quiet.stderr and "INFO" not in quiet.stderr


def test_landmark_pooling_on_an_untrained_model_warns_once_with_what_to_do(caplog):
    from lmk_rag import LMKEncoder
    from lmk_rag.folders.loading import _WARNED_UNTRAINED

    base = "sentence-transformers/all-MiniLM-L6-v2"
    _WARNED_UNTRAINED.discard(base)
    with caplog.at_level(logging.WARNING, logger="lmk_rag"):
        LMKEncoder(base, device="cpu")
        LMKEncoder(base, device="cpu", granularity=64)
        LMKEncoder(base, device="cpu", pooling="mean")
        LMKEncoder(device="cpu")  # the packaged, trained model: no warning
    warnings = [r.getMessage() for r in caplog.records if "no LMK training" in r.getMessage()]
    assert len(warnings) == 1
    assert base in warnings[0] and "pooling='mean'" in warnings[0] and "lmk-rag train" in warnings[0]
    assert "\n" not in warnings[0]


@pytest.mark.slow
def test_search_context_prints_the_passages_for_an_llm_within_the_budget(tmp_path):
    index = f"qdrant:{tmp_path / 'idx'}"
    assert run_cli("ingest", str(CORPUS), "--index", index, "--no-progress").returncode == 0
    shown = run_cli("search", "How long do solar inverters last?", "--index", index, "--context", "128")
    assert shown.returncode == 0, shown.stderr
    assert (
        shown.stdout.startswith("context for 'How long do solar inverters last?':")
        and "[1] examples/sample_corpus/home_solar.md" in shown.stdout  # ids inside the working folder: relative
    )
    data = json.loads(run_cli("search", "tides", "--index", index, "--context", "96", "--json").stdout)
    assert data and sum(p["tokens"] for p in data) <= 96
    texts = {p.name: p.read_text(encoding="utf-8") for p in CORPUS.glob("*.md")}
    assert all(texts[Path(p["id"]).name][p["span"][0] : p["span"][1]] == p["text"] for p in data)
    bad = run_cli("search", "tides", "--index", index, "--context", "0")
    assert bad.returncode == 2 and "max_tokens must be an int >= 1" in bad.stderr


def test_credentials_in_an_index_uri_are_never_printed():
    from lmk_rag.cli import redact_uri

    assert redact_uri("chroma+http://alice:s3cret@db.example:8000") == "chroma+http://db.example:8000"
    assert redact_uri("qdrant:./lmk_index") == "qdrant:./lmk_index"
    out = run_cli("search", "x", "--index", "chroma+http://alice:s3cret@127.0.0.1:1")
    assert out.returncode == 2 and "s3cret" not in out.stdout + out.stderr


def test_credentials_in_a_chroma_uri_are_sent_to_the_server_as_basic_auth(monkeypatch):
    import base64

    import chromadb

    from lmk_rag.index.uri import parse_index_uri, read_fingerprint

    seen = []

    class Refused(Exception):
        pass

    def client(**kwargs):
        seen.append(kwargs)
        raise Refused("stop here: only the headers matter")

    monkeypatch.setattr(chromadb, "HttpClient", client)
    uri = parse_index_uri("chroma+http://alice:s3%40cret@db.example:8000")
    assert "s3" not in repr(uri)  # never printed
    with pytest.raises(Exception, match="stop here"):
        read_fingerprint(uri)
    token = base64.b64encode(b"alice:s3@cret").decode()
    assert seen[0]["headers"] == {"Authorization": f"Basic {token}"} and seen[0]["host"] == "db.example"
    assert parse_index_uri("chroma+http://db.example:8000").headers is None


def test_copy_onto_itself_is_refused_before_anything_opens(tmp_path):
    folder = tmp_path / "idx"
    out = run_cli("copy", f"qdrant:{folder}", f"qdrant:{tmp_path}/./idx")
    assert out.returncode == 2 and "SOURCE and DEST are the same index" in out.stderr
    assert not folder.exists()


@pytest.mark.parametrize("password", ["s3cr@t", "p:ss", "p%40ss", "a@b:c%2Fd/e"])
def test_no_message_prints_a_password_whatever_it_holds(password, tmp_path):
    """The copy summary and its "no index" error, every malformed-URI message and -v's traceback
    name the URI without its credentials, for passwords holding '@', ':', '%' and '/'."""
    from lmk_rag.index.uri import redact_uri

    secret_parts = [part for part in password.replace("@", " ").replace(":", " ").split() if len(part) > 1]
    uris = [
        f"chroma+http://admin:{password}@db.example:notaport",  # bad port
        f"chroma+http://admin:{password}@/x",  # no host
        f"qdrant+http://admin:{password}@db.example:6333?shards=2",  # unknown setting
        f"chroma+http://admin:{password}@127.0.0.1:1",  # no index there
    ]
    for uri in uris:
        assert redact_uri(uri).startswith(uri.split("://")[0] + "://") and password not in redact_uri(uri)
        for args in (("copy", uri, f"qdrant:{tmp_path / 'dest'}"), ("search", "x", "--index", uri, "-v")):
            out = run_cli(*args)
            printed = out.stdout + out.stderr
            assert out.returncode != 0 and password not in printed, printed
            assert not any(f":{part}" in printed or f"{part}@" in printed for part in secret_parts), printed


# ---------------------------------------------------------------- a new user's CLI papercuts (#46 item 6)
def _example_lines() -> list[tuple[str, str]]:
    """Every `lmk-rag ...` line of the -h epilogs and of the README's and docs' code blocks."""
    import re

    root = Path(__file__).resolve().parents[1]
    lines = [
        (f"lmk-rag {name} -h", line.strip())
        for name, c in _commands().items()
        for line in (c.epilog or "").splitlines()
    ]
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, flags=re.S):
            joined = block.replace("\\\n", " ")
            lines += [(page.name, line.strip()) for line in joined.splitlines()]
    return [(where, line) for where, line in lines if line.startswith("lmk-rag ")]


def test_every_cli_example_in_the_help_and_the_docs_parses():
    """Each example's options exist for its command (a wrong one would be a usage error)."""
    import shlex

    parser = build_parser()
    examples = _example_lines()
    assert len(examples) > 40
    for where, line in examples:
        words = shlex.split(line, comments=True)[1:]
        words = [w for w in words if w != "[--json]"]
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"{where}: `{line}` does not parse")


def test_verbose_goes_after_the_command_too_and_search_shows_only_the_settings_it_uses(tmp_path):
    index = f"qdrant:{tmp_path / 'idx'}"
    assert run_cli("ingest", str(CORPUS), "--index", index, "--no-progress").returncode == 0
    out = run_cli("search", "tides", "--index", index, "-v")
    assert out.returncode == 0 and "existing; encoder settings from the index" in out.stderr
    text = _commands()["search"].format_help()
    assert "--device" in text and "--backend" in text
    assert "--pooling" not in text and "--granularity" not in text and "--model" not in text
    assert "--model" in _commands()["ingest"].format_help()
    assert "docs/guides/ray.md" in _commands()["ingest"].format_help()


def test_a_reader_that_leaves_early_gets_no_traceback_and_logs_get_no_progress_escapes(tmp_path):
    index = f"qdrant:{tmp_path / 'idx'}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    ingest = run_cli("ingest", str(CORPUS), "--index", index)  # stderr is not a terminal: a log file
    assert ingest.returncode == 0
    logged = ingest.stderr
    assert "\r" not in logged and "\x1b[" not in logged and "%|" not in logged
    proc = subprocess.Popen(
        [sys.executable, "-m", "lmk_rag.cli", "search", "tides", "--index", index, "-k", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    proc.stdout.close()  # as `| head -0` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_search_context_counts_with_a_given_tokenizer_and_takes_a_relevance_floor(tmp_path):
    from lmk_rag.folders.models import packaged_model_path

    index = f"qdrant:{tmp_path / 'idx'}"
    assert run_cli("ingest", str(CORPUS), "--index", index, "--no-progress").returncode == 0
    args = ("search", "How long do solar inverters last?", "--index", index, "--context", "64", "--json")
    out = run_cli(*args, "--token-counter", str(packaged_model_path()))
    assert out.returncode == 0, out.stderr
    passages = json.loads(out.stdout)
    assert passages and sum(p["tokens"] for p in passages) <= 64
    bad = run_cli(*args, "--token-counter", str(tmp_path / "nothing"))
    assert bad.returncode == 2 and "names no tokenizer here" in bad.stderr
    alone = run_cli("search", "tides", "--index", index, "--token-counter", str(packaged_model_path()))
    assert alone.returncode == 2 and "add --context TOKENS" in alone.stderr
    # The relevance floor (#45): an off-topic question gets an empty context; a bad floor is one line.
    off = run_cli(
        "search", "Who painted the Mona Lisa?", "--index", index, "--context", "256", "--json", "--min-score", "0.35"
    )
    assert off.returncode == 0 and json.loads(off.stdout) == []
    on = run_cli(*args, "--min-score", "0.35")
    assert on.returncode == 0 and json.loads(on.stdout)
    for bad_floor in ("1.5", "nan"):
        refused = run_cli(*args, "--min-score", bad_floor)
        assert refused.returncode == 2 and "min_score must be a number in [-1, 1]" in refused.stderr
    floor_alone = run_cli("search", "tides", "--index", index, "--min-score", "0.3")
    assert floor_alone.returncode == 2 and "add --context TOKENS" in floor_alone.stderr
