"""The model being trained: the encoder with LoRA (or all weights trainable) and a learned offset
on the landmark token's input embedding, and its differentiable landmark pass."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..encoder import LMKEncoder
from ..encoding.batching import make_batch
from ..encoding.landmarks import Layout
from ..encoding.pooling import landmark_weights_of, weighted_text_means
from ..encoding.windows import build_sequences
from ..errors import InvalidInputError
from .config import TrainConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class LandmarkStudent(torch.nn.Module):
    """The trainable encoder: LoRA (or all weights) plus a landmark embedding offset."""

    model: Any  # a Hugging Face model (PeftModel for LoRA)

    def __init__(self, model: PreTrainedModel, landmark_id: int, config: TrainConfig) -> None:
        super().__init__()
        if config.full_finetune:
            self.model = model
        else:
            from peft import LoraConfig, get_peft_model

            lora = LoraConfig(
                r=config.lora_r,
                lora_alpha=config.lora_alpha,
                lora_dropout=0.0,
                target_modules="all-linear",
                bias="none",
            )
            from ..folders.models import quiet_loading

            with quiet_loading():
                self.model = get_peft_model(model, lora)
        embeddings = model.get_input_embeddings().weight
        if not isinstance(embeddings, torch.Tensor):
            raise InvalidInputError("the model's input embeddings have no weight matrix to train a landmark offset on")
        self.delta = torch.nn.Parameter(torch.zeros(embeddings.shape[1], device=embeddings.device))
        self.landmark_id = landmark_id
        self.model.get_input_embeddings().register_forward_hook(self._add_delta)

    def _add_delta(
        self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor
    ) -> torch.Tensor:
        return output + (inputs[0] == self.landmark_id).unsqueeze(-1).to(output.dtype) * self.delta

    def trainable(self) -> list[torch.nn.Parameter]:
        """The parameters the optimizer updates (LoRA or all weights, and the landmark offset)."""
        return [p for p in self.parameters() if p.requires_grad]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Hidden states of the batch, with the landmark offset added to landmark embeddings."""
        hidden: torch.Tensor = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return hidden


def landmark_forward(
    student: LandmarkStudent, enc: LMKEncoder, texts: list[str]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Layout]:
    """Differentiable LMK pass: pooled (B, d), landmark states (M, d), chunk->text, layout."""
    _, layout, _ = enc.lay_out(texts)
    seqs = build_sequences(layout, enc.max_length, enc.window_overlap)
    rows = np.arange(len(seqs.lengths))
    batch = make_batch(seqs, rows, enc.special.pad_id, enc.special.cls_id is not None)
    hidden = student(batch.input_ids.to(enc.device), batch.attention_mask.to(enc.device))
    idx = batch.index
    picked = hidden[idx.lmk_rows.to(hidden.device), idx.lmk_cols.to(hidden.device)]
    n_chunks = int(layout.chunk_offsets[-1])
    states = torch.zeros(n_chunks, hidden.shape[-1], device=hidden.device).index_put(
        (idx.lmk_chunks.to(hidden.device),), picked.float()
    )
    text_of_chunk = torch.as_tensor(
        np.repeat(np.arange(layout.n_texts), np.diff(layout.chunk_offsets)), device=hidden.device
    )
    weights = torch.as_tensor(landmark_weights_of(layout.chunk_sizes, enc.landmark_weights), device=hidden.device)
    pooled = weighted_text_means(states, text_of_chunk, weights, layout.n_texts)
    return pooled, states, text_of_chunk, layout
