"""Teach an encoder to pool at landmarks.

Objectives (weights in :class:`~lmk_rag.train.config.TrainConfig`; the terms in :mod:`.losses`):
- contrastive InfoNCE with in-batch (and given hard) negatives on pooled LMK vectors;
- the same on MaxSim over landmark vectors (what the multi-vector index scores);
- distillation: each landmark state (of documents and, if asked, of queries)
  towards the frozen base model's embedding of its chunk alone (the base reads short
  chunks well; landmarks should too);
- score distillation (optional): the batch's MaxSim score distribution of each query
  towards the frozen base's chunk-then-embed scores (query mean-pooled, max over the same
  chunks embedded alone), so contrastive steps cannot trade away the ranking chunks give;
- landmark localisation (optional): for pairs that know where their answer lies, the
  landmarks covering it against the other landmarks of the same page (the positive's and
  the hard negative's), so the best landmark of a hit names the passage that answers.
Parameters: LoRA (peft) on every linear layer plus a trained offset on the landmark
token's input embedding, or full fine-tuning. Seeded; each step's batch is a function of
(seed, step), so a run resumed from a checkpoint continues exactly.
"""

from __future__ import annotations

import json
import logging
import os
import time
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..encoder import LMKEncoder
from ..encoding.pooling import LandmarkWeights, check_landmark_weights
from ..errors import InvalidInputError
from ..folders.lmk import (
    ADAPTER_CONFIG,
    ADAPTER_DIR,
    ADAPTER_WEIGHTS,
    DELTA_NAME,
    LMKFolderConfig,
    has_lora_adapter,
    is_lmk_folder,
    lora_settings,
)
from ..folders.models import load_model, resolve_model_path
from ..folders.write import open_permissions
from .config import TrainConfig
from .data import Pair, build_pairs, sample_batch
from .losses import answer_landmarks, distill_loss, landmark_loss, maxsim_scores
from .student import LandmarkStudent, landmark_forward

logger = logging.getLogger(__name__)


class Trainer:
    """One training run of :class:`TrainConfig`: the frozen base as teacher, the student, the
    optimizer and the pairs; checkpoints so a stopped run resumes exactly."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        torch.manual_seed(config.seed)
        base_path, self.base_name = resolve_model_path(config.base_model)
        weights = config.landmark_weights
        if weights is None and config.init_from and is_lmk_folder(config.init_from):
            weights = LMKFolderConfig.load(Path(config.init_from)).landmark_weights
        self.landmark_weights: LandmarkWeights = check_landmark_weights(weights or "equal")
        # Layout and teacher: the frozen base, shared with any encoder of the same model.
        self.enc = LMKEncoder(
            base_path,
            granularity=list(config.granularities),
            device=config.device,
            seed=config.seed,
            landmark_weights=self.landmark_weights,
        )
        self.teacher = LMKEncoder(base_path, pooling="mean", granularity=None, device=config.device)
        self.query_enc = LMKEncoder(
            base_path,
            granularity=max(config.granularities),
            device=config.device,
            landmark_weights=self.landmark_weights,
        )
        model = load_model(
            base_path,
            device=self.enc.device,
            dtype=torch.float32,
            trust_remote_code=False,
            allow_pickle=False,
            revision=None,
        )
        torch.nn.Module.eval(model)  # dropout off: ~5x faster on CPU, and LoRA needs no dropout here
        self.student = LandmarkStudent(model, self.enc.special.landmark_id, config)
        if config.init_from:
            self._load_init(Path(config.init_from))
        self.optimizer = torch.optim.AdamW(self.student.trainable(), lr=config.lr, weight_decay=0.0)
        self.pairs = build_pairs(config, self.enc.tokenize)
        self.out = Path(config.output)
        self.history: list[dict[str, float]] = []
        self.step = 0

    def _load_init(self, folder: Path) -> None:
        """Start from a trained LMK folder's LoRA weights and landmark offset (e.g. a distillation
        phase run elsewhere); its base model and LoRA rank must be this run's."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        if not has_lora_adapter(folder):
            raise InvalidInputError(
                f"init_from={str(folder)!r} is not an LMK folder written by `lmk-rag train` (needs "
                f"{ADAPTER_DIR}/{ADAPTER_WEIGHTS} and {DELTA_NAME})"
            )
        recorded = LMKFolderConfig.load(folder)
        if recorded.base_model != self.config.base_model:
            raise InvalidInputError(
                f"init_from={str(folder)!r} was trained on base {recorded.base_model!r}, this run's base is "
                f"{self.config.base_model!r}: pass the same base_model"
            )
        self._check_init_shape(folder)
        state = load_file(str(folder / ADAPTER_DIR / ADAPTER_WEIGHTS), device=str(self.enc.device))
        result = set_peft_model_state_dict(self.student.model, state)
        unfit = [k for k in getattr(result, "unexpected_keys", []) if "lora" in k]
        if unfit:
            raise InvalidInputError(f"init_from={str(folder)!r}: LoRA weights that do not fit this run: {unfit[:3]}")
        with torch.no_grad():
            self.student.delta.copy_(load_file(str(folder / DELTA_NAME))["delta"].to(self.student.delta.device))

    def _check_init_shape(self, folder: Path) -> None:
        """The run's LoRA rank and alpha must be the folder's: a rank that differs fails deep in
        torch, an alpha that differs silently rescales every update the folder learned (a merged
        folder has rank = the ranks summed and alpha = rank)."""
        adapter = lora_settings(folder)
        r, alpha = adapter.get("r"), adapter.get("lora_alpha")
        if (r, alpha) != (self.config.lora_r, self.config.lora_alpha):
            raise InvalidInputError(
                f"init_from={str(folder)!r} holds a LoRA of rank {r} with lora_alpha {alpha}; this run has "
                f"lora_r={self.config.lora_r}, lora_alpha={self.config.lora_alpha}: pass --lora-r {r} "
                f"--lora-alpha {alpha} (lora_r={r}, lora_alpha={alpha})"
            )

    # ---------------------------------------------------------------- losses
    def _autocast(self) -> AbstractContextManager[Any]:
        """bf16 autocast when asked: faster steps on GPUs and on CPUs with AVX512-BF16 or AMX
        (docs/results.md)."""
        return torch.autocast(
            device_type=torch.device(self.enc.device).type, dtype=torch.bfloat16, enabled=self.config.bf16
        )

    def losses(self, pairs: list[Pair], step: int) -> dict[str, torch.Tensor]:
        """Each objective's weighted loss on ``pairs`` at ``step`` (distillation only in the first
        ``distill_only_steps``)."""
        c = self.config
        self.enc.reseed([c.seed, step, 1])
        docs = [p.positive for p in pairs] + [p.negative for p in pairs if p.negative]
        queries = [p.query for p in pairs]
        contrast = step >= c.distill_only_steps
        distill_queries = c.distill_weight > 0 and c.distill_queries
        with self._autocast():
            pooled, states, text_of_chunk, layout = landmark_forward(self.student, self.enc, docs)
        out: dict[str, torch.Tensor] = {}
        teacher_chunks: torch.Tensor | None = None
        if c.distill_weight > 0 or (contrast and c.score_distill_weight > 0):
            teacher_chunks = self._teacher_chunks(docs, text_of_chunk, layout, states.device)
        if c.distill_weight > 0 and teacher_chunks is not None:
            out["distill"] = distill_loss(states, teacher_chunks) * c.distill_weight
        if not contrast and not distill_queries:
            return out  # distillation-only step: the queries are not needed
        with self._autocast():
            q_pooled, q_states, q_text_of_chunk, q_layout = landmark_forward(self.student, self.query_enc, queries)
        if distill_queries:  # queries stay in the space the landmarks are pulled to
            q_teacher = self._teacher_chunks(queries, q_text_of_chunk, q_layout, q_states.device)
            out["distill_q"] = distill_loss(q_states, q_teacher) * c.distill_weight
        q = F.normalize(q_pooled, dim=-1)
        labels = torch.arange(len(pairs), device=q.device)
        if contrast:
            if c.contrastive_weight > 0:
                logits = q @ F.normalize(pooled, dim=-1).T / c.temperature
                out["contrastive"] = F.cross_entropy(logits, labels) * c.contrastive_weight
            if c.maxsim_weight > 0 or c.score_distill_weight > 0:
                maxsim_logits = maxsim_scores(q, F.normalize(states, dim=-1), text_of_chunk, len(docs)) / c.temperature
            if c.maxsim_weight > 0:
                out["maxsim"] = F.cross_entropy(maxsim_logits, labels) * c.maxsim_weight
            if c.score_distill_weight > 0 and teacher_chunks is not None:
                out["score_distill"] = (
                    self._score_distill(queries, maxsim_logits, teacher_chunks, text_of_chunk, len(docs))
                    * c.score_distill_weight
                )
            if c.landmark_weight > 0:
                located = self._landmark_term(pairs, q, states, text_of_chunk, layout)
                if located is not None:
                    out["landmark"] = located * c.landmark_weight
        return out

    def _landmark_term(
        self,
        pairs: list[Pair],
        q: torch.Tensor,
        states: torch.Tensor,
        text_of_chunk: torch.Tensor,
        layout: Any,
    ) -> torch.Tensor | None:
        """The landmark localisation loss over the pairs that carry an answer span: the landmarks
        of their positive and hard negative compete, the ones covering the answer win."""
        # the pair each document serves: the positives in order, then each hard negative's pair
        doc_owner = np.array([*range(len(pairs)), *(i for i, p in enumerate(pairs) if p.negative)], dtype=np.int64)
        chunk_text = text_of_chunk.cpu().numpy()
        answers = [p.answer for p in pairs]
        positive = answer_landmarks(np.asarray(layout.spans), chunk_text, answers)
        located = np.array([a is not None for a in answers])
        owner = np.where(located[doc_owner[chunk_text]], doc_owner[chunk_text], -1)
        device = states.device
        return landmark_loss(
            q,
            F.normalize(states, dim=-1),
            torch.as_tensor(owner, device=device),
            torch.as_tensor(positive, device=device),
            self.config.temperature,
        )

    def _teacher_chunks(
        self, texts: list[str], text_of_chunk: torch.Tensor, layout: Any, device: torch.device
    ) -> torch.Tensor:
        """The frozen base's embedding of each landmark's chunk read alone (what chunk-then-embed stores)."""
        chunk_texts = [texts[t][a:b] for t, (a, b) in zip(text_of_chunk.cpu().numpy(), layout.spans)]
        with self._autocast():
            return torch.as_tensor(self.teacher.encode(chunk_texts), device=device)

    def _score_distill(
        self,
        queries: list[str],
        student_logits: torch.Tensor,
        teacher_chunks: torch.Tensor,
        text_of_chunk: torch.Tensor,
        n_docs: int,
    ) -> torch.Tensor:
        """KL(teacher || student) over each query's batch documents, teacher = the base model's
        chunk-then-embed MaxSim (query mean-pooled, chunks embedded alone), same temperature."""
        with self._autocast():
            tq = torch.as_tensor(self.teacher.encode(queries), device=student_logits.device)
        teacher_logits = maxsim_scores(
            F.normalize(tq.float(), dim=-1), F.normalize(teacher_chunks.float(), dim=-1), text_of_chunk, n_docs
        )
        target = F.softmax(teacher_logits / self.config.temperature, dim=-1)
        return F.kl_div(F.log_softmax(student_logits, dim=-1), target, reduction="batchmean")

    # ---------------------------------------------------------------- checkpoints
    def _checkpoint_dir(self) -> Path:
        return self.out / "checkpoint"

    def save_checkpoint(self) -> None:
        """Write ``checkpoint/state.pt`` so that a crash at any moment leaves a whole checkpoint:
        the new state goes to a temporary file in the same folder, then replaces the old one with
        ``os.replace`` (atomic on POSIX and Windows)."""
        folder = self._checkpoint_dir()
        folder.mkdir(parents=True, exist_ok=True)
        state = {n: p.detach().cpu() for n, p in self.student.named_parameters() if p.requires_grad}
        tmp = folder / "state.pt.tmp"
        torch.save(
            {"step": self.step, "params": state, "optimizer": self.optimizer.state_dict(), "history": self.history}, tmp
        )
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, folder / "state.pt")

    def maybe_resume(self) -> bool:
        """Continue from ``checkpoint/state.pt`` if there is one. It is read with
        ``weights_only=True``: tensors, numbers and state dicts only, so a crafted file cannot run code."""
        folder = self._checkpoint_dir()
        state_file = folder / "state.pt"
        if not state_file.is_file():
            return False
        try:
            state = torch.load(state_file, weights_only=True, map_location="cpu")
        except Exception as exc:
            raise InvalidInputError(
                f"cannot resume from {state_file}: {exc}. It is not a checkpoint this version wrote (only tensors "
                "and numbers are loaded); delete it to start again, or pass another --output"
            ) from exc
        params = dict(self.student.named_parameters())
        with torch.no_grad():
            for name, value in state["params"].items():
                params[name].copy_(value)
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.history = state["step"], state["history"]
        logger.warning("resuming from %s at step %d", state_file, self.step)
        return True

    def batch_size_at(self, step: int) -> int:
        """Distillation-only steps may use their own (smaller) batch: they need no negatives, and
        more, cheaper updates is what moves the landmark states (measured: 2x the steps at half the
        batch, same wall time, took landmark/chunk cosine from 0.61 to 0.78)."""
        c = self.config
        if step < c.distill_only_steps and c.distill_batch_size is not None:
            return c.distill_batch_size
        return c.batch_size

    def lr_at(self, step: int) -> float:
        """Learning rate of ``step``: linear warm-up, then constant or linear decay to zero."""
        c = self.config
        if step < c.warmup_steps:
            return c.lr * (step + 1) / c.warmup_steps
        if c.lr_decay == "linear":
            return c.lr * max(0.0, (c.steps - step) / max(1, c.steps - c.warmup_steps))
        return c.lr

    # ---------------------------------------------------------------- loop
    def train(self) -> Path:
        """Run (or resume) to ``steps`` (or the stop step, or the time limit) and save the folder."""
        from tqdm.auto import tqdm

        c = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        self.maybe_resume()
        t0 = time.perf_counter()
        bar = tqdm(total=c.steps, initial=self.step, desc="train", disable=not c.show_progress)
        while self.step < c.steps:
            self.optimizer.zero_grad(set_to_none=True)
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_at(self.step)
            totals: dict[str, float] = {}
            size = self.batch_size_at(self.step)
            for micro in range(c.grad_accum):
                idx = sample_batch(len(self.pairs), size, c.seed, self.step * c.grad_accum + micro)
                parts = self.losses([self.pairs[i] for i in idx], self.step)
                loss = torch.stack(list(parts.values())).sum() / c.grad_accum
                loss.backward()  # type: ignore[no-untyped-call]
                for k, v in parts.items():
                    totals[k] = totals.get(k, 0.0) + v.item() / c.grad_accum
            self.optimizer.step()
            self.step += 1
            totals["loss"] = sum(totals.values())
            self.history.append({"step": self.step, **totals})
            bar.set_postfix({k: f"{v:.3f}" for k, v in totals.items()})
            bar.update(1)
            at_stop_step = c.stop_at_step is not None and self.step >= c.stop_at_step
            elapsed = time.perf_counter() - t0
            out_of_time = c.max_seconds is not None and elapsed > c.max_seconds and self.step < c.steps
            if out_of_time and not at_stop_step:
                logger.warning("max_seconds=%s reached: stopping at step %d of %d", c.max_seconds, self.step, c.steps)
            if at_stop_step or out_of_time or self.step % c.checkpoint_every == 0 or self.step == c.steps:
                self.save_checkpoint()
            if at_stop_step or out_of_time:
                break
        bar.close()
        return self.save(time.perf_counter() - t0)

    def save(self, seconds: float) -> Path:
        """Write the LMK folder ``LMKEncoder(model=output)`` loads."""
        from safetensors.torch import save_file

        c = self.config
        record: dict[str, Any] = {
            "config": asdict(c),
            "pairs": len(self.pairs),
            "wall_seconds_this_run": seconds,
            "final": self.history[-1] if self.history else {},
        }
        if c.full_finetune:
            self.student.model.save_pretrained(self.out)
            self.enc.tokenizer.save_pretrained(self.out)
            base = "."
        else:
            self.student.model.save_pretrained(str(self.out / ADAPTER_DIR))
            base = c.base_model
            _record_adapter_base(self.out / ADAPTER_DIR, base)
        save_file({"delta": self.student.delta.detach().cpu().contiguous()}, str(self.out / DELTA_NAME))
        LMKFolderConfig(
            base_model=base,
            pooling="lmk",
            granularity=min(c.granularities),
            landmark_token_id=self.enc.special.landmark_id,
            landmark_weights=self.landmark_weights,
            training=record,
        ).save(self.out)
        (self.out / "history.json").write_text(json.dumps(self.history), encoding="utf-8")
        open_permissions(self.out)  # safetensors writes 0600: another user could not load the model
        return self.out


def _record_adapter_base(adapter: Path, base: str) -> None:
    """peft records the folder the base was loaded from (this machine's site-packages for the
    packaged default); record the name the run was given instead, which resolves anywhere."""
    path = adapter / ADAPTER_CONFIG
    settings = json.loads(path.read_text(encoding="utf-8"))
    settings["base_model_name_or_path"] = base
    path.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def train(config: TrainConfig) -> Path:
    """Train and save; resumes from ``output/checkpoint`` when one is there."""
    return Trainer(config).train()
