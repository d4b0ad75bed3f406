"""``lmk-rag serve``'s options: shown in -h, and a bad one is one line and exit status 2 before
any model loads."""

from __future__ import annotations

import pytest

from lmk_rag.cli.main import main


def test_help_names_the_routes_and_limits(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "-h"])
    shown = capsys.readouterr().out
    for word in ("/v1/embeddings", "/embed_landmarks", "--api-key", "--max-body-mb", "--max-concurrent", "--index"):
        assert word in shown


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--port", "70000"], "--port"),
        (["--max-body-mb", "0"], "--max-body-mb"),
        (["--max-inputs", "0"], "max_inputs"),
        (["--max-concurrent", "-1"], "max_concurrent"),
        (["--batch-wait-ms", "-5"], "batch_wait_ms"),
        (["--index", "ftp://nowhere"], "unknown index URI"),
    ],
)
def test_a_bad_option_is_one_line_and_status_2(options, words, capsys, monkeypatch):
    monkeypatch.delenv("LMK_RAG_API_KEY", raising=False)
    assert main(["serve", *options]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lmk-rag serve: error:") and words in err and "\n" not in err
