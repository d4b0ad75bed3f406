"""Start and stop a real `chroma run` on loopback, on a free port, in bounded time."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_chroma_server(folder: Path, timeout: float = 60) -> tuple[subprocess.Popen, int]:
    """The server process and its port, once it answers a heartbeat; RuntimeError if it does not."""
    import chromadb

    chroma = Path(sys.executable).parent / "chroma"
    if not chroma.exists():
        chroma = Path(shutil.which("chroma") or "chroma")
    port = free_port()
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            return proc, port
        except Exception as exc:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"chroma run did not start within {timeout:.0f} s") from exc
            time.sleep(0.3)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)
