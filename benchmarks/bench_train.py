"""Training step time: fp32 vs ``--bf16`` autocast, distillation-only and full steps.

Same model (the packaged all-MiniLM-L6-v2 with LoRA), same batches, one process. Prints
seconds per step and the bf16 speed-up. bf16 pays off on CPUs with AVX512-BF16 or AMX and on
GPUs; elsewhere it can be slower, which this prints too.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from _texts import varied_texts

from lmk_rag.train import TrainConfig, Trainer


def step_seconds(trainer: Trainer, step: int, repeats: int = 3) -> float:
    """Best wall time of one forward + backward on the same batch (the optimizer is not stepped)."""
    pairs = trainer.pairs[: trainer.batch_size_at(step)]
    best = float("inf")
    for i in range(repeats + 1):  # the first run warms up
        t0 = time.perf_counter()
        torch.stack(list(trainer.losses(pairs, step).values())).sum().backward()
        trainer.optimizer.zero_grad(set_to_none=True)
        if i:
            best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    texts = varied_texts(64, max_words=280)
    with tempfile.TemporaryDirectory() as tmp:
        pairs = Path(tmp) / "pairs.jsonl"
        pairs.write_text("\n".join(json.dumps({"query": " ".join(t.split()[:12]), "positive": t}) for t in texts))
        results = {}
        for bf16 in (False, True):
            trainer = Trainer(
                TrainConfig(
                    output=str(Path(tmp) / "out"),
                    pairs=str(pairs),
                    steps=2,
                    distill_only_steps=1,
                    distill_batch_size=8,
                    batch_size=16,
                    bf16=bf16,
                    show_progress=False,
                )
            )
            results[bf16] = (step_seconds(trainer, 0), step_seconds(trainer, 1))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    for name, i in (("distillation-only step (batch 8)", 0), ("full step (batch 16)", 1)):
        t_fp32, t_bf16 = results[False][i], results[True][i]
        print(f"{name}: fp32 {t_fp32:.2f} s, bf16 {t_bf16:.2f} s -> bf16 x{t_fp32 / t_bf16:.2f}")


if __name__ == "__main__":
    main()
