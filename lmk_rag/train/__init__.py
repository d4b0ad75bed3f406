"""LMK training: contrastive + MaxSim + landmark distillation, LoRA or full fine-tuning."""

from .config import TrainConfig
from .data import Pair, inverse_cloze_pairs, load_pairs, save_pairs, section_pairs, text_windows
from .merge import merge_lmk_folders
from .trainer import Trainer, train

__all__ = [
    "Pair",
    "TrainConfig",
    "Trainer",
    "inverse_cloze_pairs",
    "load_pairs",
    "merge_lmk_folders",
    "save_pairs",
    "section_pairs",
    "text_windows",
    "train",
]
