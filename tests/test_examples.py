"""The examples run offline, as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.slow  # subprocesses: the real command line, model loads each time


def run_example(name: str, *args: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_quickstart_finds_the_right_documents():
    out = run_example("quickstart.py")
    assert "encoded 5 documents" in out
    for name in ["bicycle_maintenance.md", "tides.md", "sourdough.md", "printing_press.md", "home_solar.md"]:
        assert f"-> {name}" in out


@pytest.mark.parametrize("question, doc", [("When should I replace a stretched chain?", "bicycle_maintenance.md")])
def test_quickstart_custom_question(question, doc):
    out = run_example("quickstart.py", question)
    assert f"-> {doc}" in out and "stretch" in out


def _context_tokens(out: str) -> int:
    match = re.search(r"context the LLM receives: (\d+) passages, (\d+) tokens", out)
    assert match and int(match.group(1)) >= 1, out
    return int(match.group(2))


def test_langchain_rag_example_hands_the_llm_passages():
    out = run_example("langchain_rag.py", "How do I make a sourdough starter?")
    assert "retrieved: sourdough.md" in out and "Mix 50 grams of wholemeal flour" in out
    assert 0 < _context_tokens(out) <= 256


def test_llamaindex_query_engine_example_hands_the_llm_passages():
    out = run_example("llamaindex_query_engine.py", "Why do some coasts have huge tides?")
    assert "source: tides.md" in out and "--- tides.md chars" in out
    assert "file_path: " in out and "file_size" not in out  # what stock LlamaIndex shows the LLM
    with_paths = int(re.search(r"\((\d+) with their file_path lines\)", out).group(1))
    assert _context_tokens(out) < with_paths <= _context_tokens(out) + 16 * 8  # a short line per passage
    assert 0 < _context_tokens(out) <= 256


@pytest.mark.parametrize("script, top", [("ingest_qdrant.py", "home_solar.md"), ("ingest_chroma.py", "tides.md")])
def test_ingest_examples_are_idempotent(tmp_path, script, top):
    args = ["--index", str(tmp_path / "idx")]
    first = run_example(script, *args)
    second = run_example(script, *args)  # re-running replaces, never duplicates
    for out in (first, second):
        assert "5 documents in" in out
        assert out.splitlines()[1].split()[1] == top
