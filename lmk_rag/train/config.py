"""The settings of a training run, each written once with its description.

:class:`TrainConfig` is the single source: :func:`~lmk_rag.train.train` takes it, the saved
folder records it, and ``lmk-rag train``'s options are generated from its fields (the help
text, the default and the type come from here), as the encoder options come from
:class:`~lmk_rag.encoding.settings.EncoderSettings`.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from ..encoding.inputs import check_int, check_optional_int, is_int_in
from ..encoding.pooling import LANDMARK_WEIGHTS, check_landmark_weights
from ..errors import InvalidInputError
from ..folders.models import DEFAULT_MODEL

LR_DECAYS = ("constant", "linear")


def meta(
    help: str, *, cli: bool = True, choices: tuple[str, ...] | None = None, flag: str | None = None
) -> dict[str, object]:
    """A :class:`TrainConfig` field's description and how ``lmk-rag train`` offers it (``flag`` names an
    inverted switch such as ``--no-progress`` for a field that defaults to True)."""
    return {"help": help, "cli": cli, "choices": choices, "flag": flag}


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    cli: bool = True,
    choices: tuple[str, ...] | None = None,
    flag: str | None = None,
) -> Any:
    """A field of :class:`TrainConfig` with an immutable default (lists: ``field(default_factory=...,
    metadata=meta(...))``)."""
    return field(default=default, metadata=meta(help, cli=cli, choices=choices, flag=flag))


@dataclass
class TrainConfig:
    """One training run: data, objectives, parameters, schedule and where to write the model."""

    output: str = option(help="folder to write; LMKEncoder(model=folder) loads it")
    base_model: str = option(DEFAULT_MODEL, "model folder or hub id of the encoder to teach")
    pairs: str | None = option(None, "JSONL of {query, positive[, negative][, answer]}")
    texts: list[str] = field(
        default_factory=list, metadata=meta("folder of raw text for inverse-cloze pairs, or 'default' (repeatable)")
    )
    sections: list[str] = field(
        default_factory=list,
        metadata=meta(
            "reST docs folder, or 'default' (the Python docs, see lmk-rag eval --docs-folder): section heading "
            "-> passage pairs and inverse-cloze text from the train half of its pages (repeatable)",
        ),
    )
    domains: list[str] = field(
        default_factory=list,
        metadata=meta(
            "'train' or names of train-split documentation domains (lmk_rag.corpora.domains; dev and test "
            "domains are refused): the same pairs from other projects' docs (repeatable)",
        ),
    )
    docs_root: str | None = option(None, "where the domain packages are extracted (default: $LMK_DOCS_ROOT)")
    max_pages_per_domain: int = option(400, "pages read per domain (a stable sample)")
    granularities: list[int] = field(
        default_factory=lambda: [32, 64, 128], metadata=meta("chunk sizes k drawn per text, comma-separated")
    )
    steps: int = option(400, "optimizer steps")
    batch_size: int = option(16, "pairs per step")
    grad_accum: int = option(1, "batches accumulated per step")
    lr: float = option(5e-4, "peak learning rate")
    warmup_steps: int = option(0, "linear warm-up steps")
    lr_decay: str = option("constant", "after warm-up", choices=LR_DECAYS)
    temperature: float = option(0.05, "InfoNCE temperature")
    contrastive_weight: float = option(1.0, "weight of InfoNCE on pooled vectors")
    maxsim_weight: float = option(1.0, "weight of InfoNCE on MaxSim scores")
    distill_weight: float = option(1.0, "weight of landmark distillation toward the base model's chunk embeddings")
    distill_only_steps: int = option(0, "first steps train landmark distillation alone (no queries, no negatives)")
    distill_batch_size: int | None = option(None, "batch size of the distillation-only steps (default: batch_size)")
    distill_queries: bool = option(False, "distil the queries' landmark states too, not only the documents'")
    score_distill_weight: float = option(
        0.0,
        "in contrastive steps, pull each query's MaxSim scores over the batch towards the base model's "
        "chunk-then-embed scores (KL); 0 = off",
    )
    landmark_weight: float = option(
        0.0,
        "in contrastive steps, for pairs that know where their answer lies (sections, inverse cloze, a JSONL "
        "'answer' span): the landmarks covering it against the page's other landmarks; 0 = off",
    )
    full_finetune: bool = option(False, "train all weights instead of LoRA")
    lora_r: int = option(16, "LoRA rank")
    lora_alpha: int = option(
        32, "LoRA alpha (updates scale by alpha / rank); with init_from, the folder's rank and alpha"
    )
    window_min_tokens: int = option(192, "shortest training passage (tokens)")
    window_max_tokens: int = option(448, "longest training passage (tokens)")
    ict_keep_prob: float = option(0.5, "share of inverse-cloze pairs whose query sentence stays in the passage")
    seed: int = option(0, "seed of sampling and initialisation")
    checkpoint_every: int = option(50, "steps between resumable checkpoints")
    max_seconds: float | None = option(
        None, "stop after this much wall time and save what was trained (the output records the step reached)"
    )
    stop_at_step: int | None = option(
        None, "stop at this step and save, keeping the learning-rate schedule of steps (replays a time-boxed run)"
    )
    init_from: str | None = option(
        None, "start from the LoRA weights and landmark offset of an LMK folder this trainer wrote (same base)"
    )
    landmark_weights: str | None = option(
        None,
        "how the single vector weighs a text's landmarks, in training and in the saved folder: equal, or by each "
        "chunk's tokens (not landmark_weight, a loss weight); None: the init_from folder's, else equal",
        choices=LANDMARK_WEIGHTS,
    )
    device: str = option("cpu", "cpu, cuda, cuda:N or mps")
    bf16: bool = option(False, "bf16 autocast: faster on GPUs and on CPUs with AVX512-BF16/AMX (weights stay fp32)")
    show_progress: bool = option(True, "show a progress bar", flag="--no-progress")

    def __post_init__(self) -> None:
        from ..corpora.domains import domains_of

        for spec in self.domains:
            held_out = [d.name for d in domains_of(spec) if d.split != "train"]
            if held_out:
                raise InvalidInputError(
                    f"domains {held_out} are dev/test domains: training may only read train domains "
                    "(see lmk_rag.corpora.domains.DOMAINS), so the dev/test results stay out-of-domain"
                )
        if not self.pairs and not self.texts and not self.sections and not self.domains:
            raise InvalidInputError(
                "give training data: pairs='file.jsonl', texts=[folders or 'default'] and/or "
                "sections=[reST docs folders or 'default']"
            )
        if self.lr_decay not in LR_DECAYS:
            raise InvalidInputError(f"lr_decay must be one of {LR_DECAYS}, got {self.lr_decay!r}")
        if self.distill_only_steps > 0 and self.distill_weight <= 0:
            raise InvalidInputError("distill_only_steps > 0 needs distill_weight > 0: those steps train nothing else")
        if self.init_from is not None and self.full_finetune:
            raise InvalidInputError("init_from continues a LoRA run; with full_finetune pass the folder as base_model")
        check_optional_int("stop_at_step", self.stop_at_step, maximum=self.steps, what=" (at most steps)")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise InvalidInputError(f"max_seconds must be > 0 (or None for no limit), got {self.max_seconds}")
        for name in ("score_distill_weight", "landmark_weight"):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.landmark_weights is not None:
            check_landmark_weights(self.landmark_weights)
        check_int("warmup_steps", self.warmup_steps, 0)
        check_optional_int("distill_batch_size", self.distill_batch_size, what=" (None: batch_size)")
        for name in ("steps", "batch_size", "grad_accum", "checkpoint_every", "lora_r", "lora_alpha"):
            check_int(name, getattr(self, name))
        if self.batch_size < 2:
            raise InvalidInputError("batch_size must be >= 2: in-batch negatives need company")
        if not 8 <= self.window_min_tokens <= self.window_max_tokens:
            raise InvalidInputError(
                "need 8 <= window_min_tokens <= window_max_tokens, got "
                f"{self.window_min_tokens} and {self.window_max_tokens}"
            )
        if not self.granularities or not all(is_int_in(k, 1) for k in self.granularities):
            raise InvalidInputError("granularities must be positive ints, e.g. [32, 64, 128]")


def config_fields() -> list[tuple[dataclasses.Field[object], object]]:
    """Each field of :class:`TrainConfig` with its resolved type (for the command line's options)."""
    hints = typing.get_type_hints(TrainConfig)
    return [(f, hints[f.name]) for f in dataclasses.fields(TrainConfig)]
