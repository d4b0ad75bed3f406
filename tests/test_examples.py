"""The examples run offline, as written."""

from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.slow  # the examples end to end, with the packaged model


def run_example(name: str, *args: str) -> str:
    """Run ``python examples/NAME ARGS`` as a script (``__main__``, its own argv, from the project
    folder) in this process, so the model loads once for all examples; its stdout."""
    out = io.StringIO()
    argv, cwd = sys.argv, os.getcwd()
    sys.argv = [str(ROOT / "examples" / name), *args]
    try:
        os.chdir(ROOT)
        with contextlib.redirect_stdout(out):
            try:
                runpy.run_path(str(ROOT / "examples" / name), run_name="__main__")
            except SystemExit as exc:
                assert exc.code in (None, 0), f"{name} exited with {exc.code}: {out.getvalue()[-3000:]}"
    finally:
        sys.argv = argv
        os.chdir(cwd)
    return out.getvalue()


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
