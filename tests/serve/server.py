"""Start and stop a real ``lmk-rag serve`` on loopback, on a free port, in bounded time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.chroma_server import free_port

STARTUP_SECONDS = 120


def start_server(index: Path | None, *extra: str, api_key: str | None = None) -> tuple[subprocess.Popen, str]:
    """The server process and its URL, once ``/health`` answers; RuntimeError (with its log) if not."""
    port = free_port()
    command = [sys.executable, "-m", "lmk_rag.cli", "serve", "--port", str(port), *extra]
    if index is not None:
        command += ["--index", f"qdrant:{index}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("LMK_RAG_API_KEY", None)
    if api_key:
        env["LMK_RAG_API_KEY"] = api_key
    log_path = Path(index).parent / f"serve-{port}.log" if index else None
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115 - the server's to keep open
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(timeout=15)
            shown = log_path.read_text(errors="replace")[-3000:] if log_path else ""
            raise RuntimeError(f"lmk-rag serve did not start within {STARTUP_SECONDS} s: {shown}")
        time.sleep(0.3)


#: How a server that stopped cleanly on SIGTERM exits: uvicorn finishes the requests in flight and
#: the app's shutdown, then re-raises the signal, so the status says what stopped it.
STOPPED_BY_SIGTERM = (0, -signal.SIGTERM)


def stop(proc: subprocess.Popen, timeout: float = 60) -> int:
    """SIGTERM, then the exit status (killed after ``timeout`` seconds)."""
    proc.terminate()
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)
        raise
