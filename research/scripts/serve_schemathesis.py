"""Schemathesis (every check, 60 examples per route, both phases) against a real ``lmk-rag serve``
with an API key and a small index; its report goes to research/results/serve/schemathesis_run.txt.
The suite runs a smaller in-process version (tests/serve/test_fuzz.py)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.serve.conftest import DOCUMENTS  # noqa: E402
from tests.serve.server import start_server, stop  # noqa: E402

KEY = "fuzz-key"
OUT = ROOT / "research" / "results" / "serve" / "schemathesis_run.txt"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "index", api_key=KEY)
        try:
            headers = {"Authorization": f"Bearer {KEY}"}
            documents = [{"id": k, "text": v} for k, v in DOCUMENTS.items()]
            httpx.post(url + "/documents", headers=headers, json={"documents": documents}).raise_for_status()
            st = Path(sys.executable).with_name("schemathesis")
            command = [str(st), "run", url + "/openapi.json", "--checks", "all", "--max-examples", "60"]
            out = subprocess.run(
                [*command, "-H", f"Authorization: Bearer {KEY}", "--workers", "2"],
                capture_output=True,
                text=True,
                timeout=900,
            )
        finally:
            stop(proc)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(out.stdout, encoding="utf-8")
    print(out.stdout[-3000:], out.stderr[-2000:], sep="\n")


if __name__ == "__main__":
    main()
