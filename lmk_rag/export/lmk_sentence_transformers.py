"""LMK (landmark) pooling as sentence-transformers modules, for folders that lmk-rag exports.

``LMKEncoder.save(path, format="sentence-transformers" | "multi-vector")`` copies this file into
the folder; ``SentenceTransformer(path, trust_remote_code=True)`` (or ``MultiVectorEncoder``)
imports it from there. It needs torch, transformers, tokenizers and sentence-transformers only,
never lmk-rag, and loads safetensors weights only.

Per text: the content tokens are cut into chunks of ``landmark_interval`` tokens and laid out as
``[CLS] c1 [LMK] c2 [LMK] ... cn [LMK]`` (plus one more landmark, the tokenizer's final
special token, when ``layout == "sentence-transformers"``, as PR #3642 of sentence-transformers
does). Landmarks are known by the positions where they were inserted, never by their ids: text
that contains a literal "[SEP]" is tokenised as text. The sentence vector is the mean of the
landmark states (``pooling_mode="lmk"``), of all tokens (``"mean"``) or the first (``"cls"``);
with ``landmark_weights="tokens"`` each landmark state weighs as much as its chunk's content
tokens (at least 1), as lmk-rag's ``LMKEncoder(landmark_weights="tokens")`` reads it.

Long texts: with ``window_long_texts`` (what ``format="sentence-transformers"`` exports of
LMK-pooled models record) a text longer than ``lmk_window_length`` is encoded whole in windows of
whole chunks, as lmk-rag does: each window starts with CLS, neighbouring windows share
``lmk_window_overlap`` chunks, and each landmark is taken from the window where it sits most
centrally; the pooled vector is the mean over all of them, so the folder gives lmk-rag's vectors at
any length. Otherwise (the multi-vector format, mean or CLS pooling) a text longer than
``max_seq_length`` keeps the content tokens that fit (whole chunks, each with its landmark) and a
warning names how many tokens were dropped, which equals ``LMKEncoder(..., truncate_tokens=N)``.
"""

from __future__ import annotations

import bisect
import logging
import random
from typing import Any

import torch
from tokenizers import Tokenizer
from transformers import AutoModel, AutoTokenizer

try:
    from sentence_transformers.base.modules import InputModule, Module
except ImportError:  # sentence-transformers 5.x
    from sentence_transformers.models import InputModule, Module  # type: ignore[no-redef]

logger = logging.getLogger(__name__)

LAYOUTS = ("lmk", "sentence-transformers")
POOLING_MODES = ("lmk", "mean", "cls")
LANDMARK_WEIGHTS = ("equal", "tokens")


def content_capacity(max_seq_length: int, interval: int, prefix: int, trailing: int) -> int:
    """Most content tokens whose layout (chunks of ``interval`` + one landmark each, the
    ``prefix`` CLS and ``trailing`` extra landmarks) fits in ``max_seq_length`` positions."""
    room = max_seq_length - prefix - trailing
    full, rest = divmod(max(room, 0), interval + 1)
    return full * interval + max(rest - 1, 0)


class LMKTransformer(InputModule):
    """A Hugging Face encoder whose inputs get a landmark token after every chunk of tokens."""

    config_file_name = "sentence_bert_config.json"
    # Plain class attributes, as sentence-transformers declares them on its Module.
    config_keys = [  # noqa: RUF012
        "max_seq_length",
        "landmark_interval",
        "train_landmark_interval",
        "lmk_token_id",
        "layout",
        "lmk_window_length",
        "lmk_window_overlap",
        "window_long_texts",
    ]
    save_in_root = True

    def __init__(
        self,
        model_name_or_path: str,
        max_seq_length: int = 512,
        landmark_interval: int = 32,
        train_landmark_interval: int | list[int] | None = None,
        lmk_token_id: int | None = None,
        layout: str = "lmk",
        lmk_window_length: int | None = None,
        lmk_window_overlap: int | None = None,
        window_long_texts: bool = False,
        model_kwargs: dict[str, Any] | None = None,
        processor_kwargs: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if not isinstance(landmark_interval, int) or landmark_interval < 1:
            raise ValueError(f"landmark_interval must be a positive int, got {landmark_interval!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        kwargs = dict(model_kwargs or {})
        kwargs["use_safetensors"] = True  # never unpickle weights
        self.auto_model = AutoModel.from_pretrained(model_name_or_path, **kwargs)
        self.tokenizer = AutoTokenizer.from_pretrained(model_name_or_path, **(processor_kwargs or {}))
        self.max_seq_length = int(max_seq_length)
        self.landmark_interval = landmark_interval
        self.train_landmark_interval = train_landmark_interval
        self.layout = layout
        # lmk-rag's window for long texts, kept for LMKEncoder (this module truncates at max_seq_length).
        self.lmk_window_length, self.lmk_window_overlap = lmk_window_length, lmk_window_overlap
        self.window_long_texts = bool(window_long_texts) and layout == "lmk" and bool(lmk_window_length)
        tok = self.tokenizer
        if lmk_token_id is None:
            lmk_token_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        if lmk_token_id is None:
            raise ValueError("the tokenizer has neither SEP nor EOS; set lmk_token_id in sentence_bert_config.json")
        self.lmk_token_id = int(lmk_token_id)
        self.cls_token_id = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        self.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else self.lmk_token_id
        # A private copy that tokenizes special-token strings found in text as text.
        self._text_tokenizer = Tokenizer.from_str(tok.backend_tokenizer.to_str())
        self._text_tokenizer.no_truncation()
        self._text_tokenizer.no_padding()
        self._text_tokenizer.encode_special_tokens = True

    def _interval(self) -> int:
        train = self.train_landmark_interval
        if not self.training or train is None:
            return self.landmark_interval
        return random.choice(train) if isinstance(train, list) else int(train)

    def preprocess(self, inputs: Any, prompt: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """Tokenize texts with landmarks inserted (lmk-rag's layout), as sentence-transformers
        features (ids, mask, landmark positions)."""
        texts = list(inputs)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"inputs[{i}] must be str, got {type(text).__name__}")
        if prompt:
            texts = [prompt + text for text in texts]
        encodings = self._text_tokenizer.encode_batch(texts, add_special_tokens=False)
        prefix = [] if self.cls_token_id is None else [self.cls_token_id]
        trailing = 1 if self.layout == "sentence-transformers" else 0
        rows, landmarks, owners = [], [], []
        dropped = 0
        for text_index, enc in enumerate(encodings):
            k = self._interval()
            ids = list(enc.ids)
            chunks = [ids[start : start + k] for start in range(0, max(len(ids), 1), k)]
            window = self.lmk_window_length if self.window_long_texts else None
            if window is not None and len(prefix) + sum(len(c) + 1 for c in chunks) > window:
                for seq, marks, sizes in _windows(chunks, prefix, self.lmk_token_id, window, self.lmk_window_overlap):
                    rows.append(seq)
                    landmarks.append((marks, sizes))
                    owners.append(text_index)
                continue
            keep = content_capacity(self.max_seq_length, k, len(prefix), trailing)
            if len(ids) > keep:
                dropped += len(ids) - keep
                ids = ids[:keep]
            seq = list(prefix)
            marks, sizes = [], []
            for start in range(0, max(len(ids), 1), k):
                chunk = ids[start : start + k]
                seq.extend(chunk)
                marks.append(len(seq))
                sizes.append(max(len(chunk), 1))
                seq.append(self.lmk_token_id)
            if trailing:
                marks.append(len(seq))
                sizes.append(1)
                seq.append(self.lmk_token_id)
            rows.append(seq)
            landmarks.append((marks, sizes))
            owners.append(text_index)
        if dropped:
            logger.warning(
                "%d tokens beyond max_seq_length=%d were dropped; lmk-rag's LMKEncoder encodes long texts "
                "whole in overlapping windows",
                dropped,
                self.max_seq_length,
            )
        width = max(len(r) for r in rows) if rows else 0
        input_ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        lmk_mask = torch.zeros((len(rows), width), dtype=torch.bool)
        lmk_tokens = torch.zeros((len(rows), width), dtype=torch.float32)  # content tokens per landmark
        for i, (seq, (marks, sizes)) in enumerate(zip(rows, landmarks)):
            input_ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            attention_mask[i, : len(seq)] = 1  # from lengths: pad may equal the landmark id
            lmk_mask[i, marks] = True
            lmk_tokens[i, marks] = torch.tensor(sizes, dtype=torch.float32)
        features = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "lmk_mask": lmk_mask,
            "lmk_tokens": lmk_tokens,
        }
        if len(rows) != len(texts):  # windows: which text each row belongs to, for the pooling
            features["lmk_text"] = torch.tensor(owners, dtype=torch.long)
        return features

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Run the encoder; adds ``token_embeddings``."""
        out = self.auto_model(input_ids=features["input_ids"], attention_mask=features["attention_mask"])
        features["token_embeddings"] = out.last_hidden_state
        return features

    def get_embedding_dimension(self) -> int:
        """The encoder's hidden size."""
        return int(self.auto_model.config.hidden_size)

    get_word_embedding_dimension = get_embedding_dimension

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write the weights (safetensors), tokenizer and this module's config to ``output_path``."""
        self.auto_model.save_pretrained(output_path, safe_serialization=True)
        self.save_tokenizer(output_path)
        self.save_config(output_path)

    @classmethod
    def load(  # type: ignore[override]
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        model_kwargs: dict[str, Any] | None = None,
        processor_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> LMKTransformer:
        """Load the module sentence-transformers saved at ``model_name_or_path``."""
        where: dict[str, Any] = dict(
            subfolder=subfolder,
            token=token,
            cache_folder=cache_folder,
            revision=revision,
            local_files_only=local_files_only,
        )
        config = cls.load_config(model_name_or_path, **where)
        folder = cls.load_dir_path(model_name_or_path, **where) or model_name_or_path
        return cls(folder, **config, model_kwargs=model_kwargs, processor_kwargs=processor_kwargs)


def _windows(
    chunks: list[list[int]], prefix: list[int], lmk: int, window: int, overlap: int | None
) -> list[tuple[list[int], list[int], list[int]]]:
    """One long text's windows, as lmk-rag lays them (``lmk_rag.encoding.landmarks.plan_windows`` and
    ``assign_landmarks``): whole chunks, at most ``window`` positions with the CLS ``prefix``,
    ``overlap`` chunks shared, each landmark owned by the window where it sits most centrally (in
    tokens; ties to the first). Returns (ids, owned landmark positions, their content tokens)."""
    lengths = [len(c) + 1 for c in chunks]
    capacity = window - len(prefix)
    if max(lengths) > capacity:
        raise ValueError(f"a chunk of {max(lengths) - 1} tokens does not fit a window of {window}")
    cum = [0]
    for n in lengths:
        cum.append(cum[-1] + n)
    plan, a = [], 0
    while True:
        b = max(a + 1, min(len(lengths), bisect.bisect_right(cum, cum[a] + capacity) - 1))
        plan.append((a, b))
        if b >= len(lengths):
            break
        a = max(a + 1, b - (overlap or 0))
    owner = []
    for c in range(len(lengths)):
        best, best_w = -1, -1
        for w, (a, b) in enumerate(plan):
            if a <= c < b:
                centrality = min(cum[c] - cum[a], cum[b] - cum[c + 1])
                if centrality > best:
                    best, best_w = centrality, w
        owner.append(best_w)
    out = []
    for w, (a, b) in enumerate(plan):
        seq, marks, sizes = list(prefix), [], []
        for c in range(a, b):
            seq.extend(chunks[c])
            if owner[c] == w:
                marks.append(len(seq))
                sizes.append(max(len(chunks[c]), 1))
            seq.append(lmk)
        out.append((seq, marks, sizes))
    return out


class LMKPooling(Module):
    """Mean of the landmark states, equal or token-weighted (or of all tokens, or the first
    token) -> sentence_embedding."""

    config_keys = ["word_embedding_dimension", "pooling_mode", "normalize", "landmark_weights"]  # noqa: RUF012

    def __init__(
        self,
        word_embedding_dimension: int,
        pooling_mode: str = "lmk",
        normalize: bool = True,
        landmark_weights: str = "equal",
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if pooling_mode not in POOLING_MODES:
            raise ValueError(f"pooling_mode must be one of {POOLING_MODES}, got {pooling_mode!r}")
        if landmark_weights not in LANDMARK_WEIGHTS:
            raise ValueError(f"landmark_weights must be one of {LANDMARK_WEIGHTS}, got {landmark_weights!r}")
        self.word_embedding_dimension = word_embedding_dimension
        self.pooling_mode = pooling_mode
        self.normalize = normalize
        self.landmark_weights = landmark_weights

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Pool the token states at the landmark positions (or CLS / mean): ``sentence_embedding``."""
        states = features["token_embeddings"].float()
        if self.pooling_mode == "cls":
            pooled = states[:, 0]
        else:
            if self.pooling_mode == "mean":
                mask = features["attention_mask"]
            elif self.landmark_weights == "tokens":
                mask = features["lmk_tokens"]
            else:
                mask = features["lmk_mask"]
            weights = mask.to(states.dtype).unsqueeze(-1)
            owners = features.get("lmk_text")
            if owners is None:
                pooled = (states * weights).sum(1) / weights.sum(1).clamp(min=1)
            else:  # a long text's windows: the mean over all its landmarks, each counted once
                if self.pooling_mode != "lmk":
                    raise ValueError("texts encoded in windows are pooled from their landmarks: use pooling_mode='lmk'")
                n = int(owners.max()) + 1
                sums = torch.zeros(n, states.shape[-1], dtype=states.dtype, device=states.device)
                totals = torch.zeros(n, 1, dtype=states.dtype, device=states.device)
                sums.index_add_(0, owners, (states * weights).sum(1))
                totals.index_add_(0, owners, weights.sum(1))
                pooled = sums / totals.clamp(min=1)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        features["sentence_embedding"] = pooled
        return features

    def get_sentence_embedding_dimension(self) -> int:
        """The pooled vector's dimension."""
        return self.word_embedding_dimension

    get_embedding_dimension = get_sentence_embedding_dimension

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write this module's config to ``output_path``."""
        self.save_config(output_path)


class LMKMultiVectorMask(Module):
    """For ``MultiVectorEncoder``: keep only the landmark states (queries and documents alike),
    L2-normalised, so a document's vectors are its landmark vectors."""

    config_keys = ["normalize"]  # noqa: RUF012
    forward_kwargs = {"task"}  # noqa: RUF012

    def __init__(self, normalize: bool = True) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.normalize = normalize

    def forward(self, features: dict[str, Any], task: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """Keep only the landmark states as the document's vectors (normalised if asked)."""
        states = features["token_embeddings"].float()
        if self.normalize:
            states = torch.nn.functional.normalize(states, p=2, dim=-1)
        features["token_embeddings"] = states
        features["attention_mask"] = features["lmk_mask"]
        return features

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write this module's config to ``output_path``."""
        self.save_config(output_path)
