"""LMK training: contrastive + MaxSim + landmark distillation, LoRA or full fine-tuning."""

from .data import Pair, inverse_cloze_pairs, load_pairs, section_pairs, text_windows
from .trainer import TrainConfig, Trainer, train

__all__ = ["TrainConfig", "Trainer", "train", "Pair", "load_pairs", "inverse_cloze_pairs", "section_pairs",
           "text_windows"]
