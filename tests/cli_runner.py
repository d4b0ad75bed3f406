"""`lmk-rag ARGS` run inside the test process: the real parser, commands, messages and exit codes,
without a fresh interpreter importing torch and loading the model for every call (~6 s each on
2 cores). Tests of the process boundary itself (kill -9, the entry point, foreign interpreters)
keep their subprocesses."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
from pathlib import Path


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``lmk-rag ARGS`` here; stdout, stderr and the exit status as ``subprocess.run`` gives them."""
    from lmk_rag.cli import main

    out, err = io.StringIO(), io.StringIO()
    # `main` configures logging with basicConfig, a no-op under pytest (its handlers are on the
    # root logger): send the records to the captured stderr as the command line would.
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root = logging.getLogger()
    level = root.level
    own_level = logging.getLogger("lmk_rag").level  # `-v` raises it; restored below
    root.setLevel(logging.INFO if "-v" in args or "--verbose" in args else logging.WARNING)
    root.addHandler(handler)
    before = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(before)
        root.removeHandler(handler)
        logging.getLogger("lmk_rag").setLevel(own_level)
        root.setLevel(level)
    return subprocess.CompletedProcess(["lmk-rag", *args], code, out.getvalue(), err.getvalue())
