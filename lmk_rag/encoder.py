"""LMKEncoder: landmark-pooled embeddings over any Hugging Face encoder.

Pipeline per group of texts: one fast-tokenizer call (offsets on, no special tokens) ->
chunk ends (fixed k, sentences, variable k, or none) -> landmark layout -> whole sequences
or overlapping windows -> length-sorted batches under a token budget -> encoder forward
under ``torch.inference_mode()`` -> pooling at landmark positions.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Union

import numpy as np
import torch

from .batching import iter_batches
from .landmarks import (
    TokenizedBatch,
    boundary_chunk_ends,
    build_layout,
    fixed_chunk_ends,
    split_long_chunks,
)
from .lmk_folder import LMKFolderConfig, apply_adapter, is_lmk_folder
from .models import (
    SpecialTokens,
    is_rotary,
    load_model,
    load_tokenizer,
    resolve_device,
    resolve_dtype,
    resolve_model_path,
    special_tokens,
    trained_max_length,
)
from .pooling import PoolingAccumulator, check_pooling, l2_normalize
from .sentences import sentence_starts
from .types import Fingerprint, MultiVector
from .windows import build_sequences

logger = logging.getLogger("lmk_rag")

Granularity = Union[int, str, Sequence[int], None]
# Texts per pipeline group: bounds memory on huge inputs while keeping batches well sorted.
_GROUP_SIZE = 4096

_MODEL_CACHE: dict[tuple[Any, ...], tuple[Any, torch.nn.Module]] = {}
_MODEL_CACHE_LOCK = threading.Lock()


def check_texts(texts: Any, name: str = "texts") -> list[str]:
    """A list of str, or a clear TypeError naming what was passed."""
    if texts is None:
        raise TypeError(f"{name} must be a list of str, got None")
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be a list of str, got a bare {type(texts).__name__}; wrap it: [text]")
    if not isinstance(texts, Sequence) and not hasattr(texts, "__iter__"):
        raise TypeError(f"{name} must be a list of str, got {type(texts).__name__}")
    items = list(texts)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}] must be str, got {type(item).__name__}")
    return items


def check_granularity(granularity: Granularity) -> Granularity:
    """int k > 0, 'sentence', None (no inner landmarks), or a list of k for variable granularity."""
    allowed = "a positive int k, 'sentence', None, or a list of positive ints (variable k)"
    if granularity is None or granularity == "sentence":
        return granularity
    if isinstance(granularity, bool):
        raise TypeError(f"granularity must be {allowed}, got {granularity!r}")
    if isinstance(granularity, int):
        if granularity < 1:
            raise ValueError(f"granularity must be {allowed}, got {granularity}")
        return granularity
    if isinstance(granularity, str):
        raise ValueError(f"granularity must be {allowed}, got {granularity!r}")
    if isinstance(granularity, Sequence):
        ks = list(granularity)
        if not ks or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in ks):
            raise ValueError(f"granularity must be {allowed}, got {granularity!r}")
        return ks
    raise TypeError(f"granularity must be {allowed}, got {type(granularity).__name__}")


def _check_int(name: str, value: Any, minimum: int, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        extra = " or None" if allow_none else ""
        raise ValueError(f"{name} must be an int >= {minimum}{extra}, got {value!r}")
    return value


@dataclass(frozen=True)
class _Encoded:
    pooled: torch.Tensor
    vectors: torch.Tensor | None
    spans: np.ndarray
    chunk_offsets: np.ndarray
    n_tokens: np.ndarray
    dropped: np.ndarray
    windows: np.ndarray


class LMKEncoder:
    """Landmark-pooled text embeddings.

    >>> enc = LMKEncoder()                       # packaged all-MiniLM-L6-v2, lmk, k=32
    >>> X = enc.encode(["a text", "another"])    # (2, d) float32, rows L2-normalised
    >>> mv = enc.encode_multi(["a long text"])[0]
    >>> mv.pooled, mv.vectors, mv.spans          # (d,), (m, d), [(start, end), ...]

    Args:
        model: local folder or hub id; ``None`` is the packaged default.
        pooling: ``"lmk"`` (mean of landmark states), ``"mean"`` (all tokens) or ``"cls"``.
        granularity: tokens per landmark chunk (int), ``"sentence"``, a list of ints drawn
            per text with ``seed`` (variable, for training), or ``None`` for the model's
            native ``[CLS] text [SEP]`` layout (one landmark per window).
        normalize: L2-normalise output rows.
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` (or ``"cuda:N"``), ``"mps"``.
        dtype: ``"fp32"``, ``"fp16"`` or ``"bf16"``.
        max_length: window length in tokens (default: the model's trained limit); rotary
            models may go beyond it (extrapolation), absolute-position models may not.
        max_tokens: optional cap on content tokens per text; longer texts are truncated,
            a warning is logged and :class:`MultiVector` reports ``dropped_tokens``.
        window_overlap: chunks of context shared by neighbouring windows of long texts; the
            default (None) shares about a quarter of a window, and at least one chunk when a
            window holds three or more, so large k does not re-encode every chunk many times.
        batch_size / max_batch_tokens: rows per batch, and padded tokens per batch.
        query_prefix / document_prefix: instruction prefixes (e5/bge style models).
        landmark_token_id: landmark id when the tokenizer has neither SEP nor EOS.
        sentence_max_tokens: with ``granularity="sentence"``, longer sentences are split
            every this many tokens.
        trust_remote_code / allow_pickle: opt-ins for custom model code and non-safetensors weights.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        pooling: str | None = None,
        granularity: Granularity | str = "default",
        normalize: bool = True,
        device: str | torch.device = "auto",
        dtype: str | torch.dtype = "fp32",
        max_length: int | None = None,
        max_tokens: int | None = None,
        window_overlap: int | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = 16384,
        query_prefix: str = "",
        document_prefix: str = "",
        landmark_token_id: int | None = None,
        sentence_max_tokens: int = 64,
        sentence_language: str = "en",
        seed: int = 0,
        show_progress: bool = False,
        trust_remote_code: bool = False,
        allow_pickle: bool = False,
        revision: str | None = None,
    ) -> None:
        path, self.model_name = resolve_model_path(model)
        folder = load_folder_config(path)
        if pooling is None:
            pooling = folder.pooling if folder else "lmk"
        if isinstance(granularity, str) and granularity == "default":
            granularity = folder.granularity if folder else 32
        if landmark_token_id is None and folder is not None:
            landmark_token_id = folder.landmark_token_id
        self.pooling = check_pooling(pooling)
        self.granularity = check_granularity(granularity)
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
        self.normalize = normalize
        self._window_overlap = _check_int("window_overlap", window_overlap, 0, allow_none=True)
        self.batch_size = _check_int("batch_size", batch_size, 1)
        self.max_batch_tokens = _check_int("max_batch_tokens", max_batch_tokens, 1)
        self.max_tokens = _check_int("max_tokens", max_tokens, 1, allow_none=True)
        self.sentence_max_tokens = _check_int("sentence_max_tokens", sentence_max_tokens, 1)
        for name, value in (("query_prefix", query_prefix), ("document_prefix", document_prefix)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be str, got {type(value).__name__}")
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.sentence_language = sentence_language
        self.show_progress = show_progress
        self._rng = np.random.default_rng(seed)

        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.adapter = path if folder is not None and folder.base_model != "." else None
        base = path if folder is None else resolve_base(path, folder)
        self.tokenizer, self.model = _load_shared(
            base, self.device, self.dtype, trust_remote_code, allow_pickle, revision, self.adapter, landmark_token_id
        )
        self._text_tokenizer = _text_tokenizer(self.tokenizer)
        self.special: SpecialTokens = special_tokens(self.tokenizer, landmark_token_id)
        self.dimension = int(self.model.config.hidden_size)
        self.trained_max_length = trained_max_length(self.model.config, self.tokenizer)
        self.rotary = is_rotary(self.model.config)
        self.max_length = self._check_max_length(max_length)
        self._check_chunks_fit()

    # ------------------------------------------------------------------ settings
    def _check_max_length(self, max_length: int | None) -> int:
        if max_length is None:
            return self.trained_max_length
        _check_int("max_length", max_length, 4)
        if max_length > self.trained_max_length and not self.rotary:
            raise ValueError(
                f"max_length={max_length} exceeds this model's {self.trained_max_length} positions, and its "
                "position embeddings are absolute, so it cannot extrapolate; leave max_length unset "
                "(long texts are encoded in windows) or use a rotary-position model"
            )
        if max_length > self.trained_max_length:
            logger.info(
                "max_length=%d is beyond the trained %d positions (rotary extrapolation)",
                max_length, self.trained_max_length,
            )
        return max_length

    @property
    def _prefix_len(self) -> int:
        return 0 if self.special.cls_id is None else 1

    def _check_chunks_fit(self) -> None:
        g = self.granularity
        if g is None:
            return
        largest = self.sentence_max_tokens if g == "sentence" else max(g) if isinstance(g, list) else g
        room = self.max_length - self._prefix_len - 1
        if largest > room:
            name = "sentence_max_tokens" if g == "sentence" else "granularity"
            raise ValueError(
                f"{name}={largest} does not fit a window of max_length={self.max_length} "
                f"(room for {room} tokens plus CLS and landmark); use at most {room}"
            )

    @property
    def window_overlap(self) -> int:
        """Chunks shared by neighbouring windows (see the constructor)."""
        if self._window_overlap is not None:
            return self._window_overlap
        g = self.granularity
        k = self.sentence_max_tokens if g == "sentence" else max(g) if isinstance(g, list) else g
        if k is None:
            return 0
        capacity = self.max_length - self._prefix_len
        per_window = capacity // (k + 1)
        return max(1 if per_window >= 3 else 0, capacity // 4 // (k + 1))

    @property
    def fingerprint(self) -> Fingerprint:
        """Settings an index must match: model, dimension, pooling, granularity, ..."""
        return Fingerprint(
            model=self.model_name,
            dimension=self.dimension,
            pooling=self.pooling,
            granularity=self.granularity,
            landmark_token_id=self.special.landmark_id,
            normalize=self.normalize,
            query_prefix=self.query_prefix,
            document_prefix=self.document_prefix,
            adapter=self.adapter_name,
        )

    @property
    def adapter_name(self) -> str | None:
        """Name of the LMK adapter merged into the model (None for a plain model)."""
        if self.adapter is None:
            return None
        from pathlib import Path

        return Path(self.adapter).name

    def __repr__(self) -> str:
        return (
            f"LMKEncoder(model={self.model_name!r}, pooling={self.pooling!r}, "
            f"granularity={self.granularity!r}, max_length={self.max_length}, device={str(self.device)!r})"
        )

    # ------------------------------------------------------------------ public API
    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        show_progress: bool | None = None,
        normalize: bool | None = None,
    ) -> np.ndarray:
        """Documents -> (n, d) float32 array, one pooled vector per text, input order kept."""
        items = check_texts(texts)
        out = [
            enc.pooled
            for enc in self._encode_groups(items, self.document_prefix, False, batch_size, show_progress, normalize)
        ]
        if not out:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return torch.cat(out).numpy()

    def encode_query(
        self, query: str | Sequence[str], *, normalize: bool | None = None
    ) -> np.ndarray:
        """A query -> (d,); a list of queries -> (n, d). Applies ``query_prefix``."""
        single = isinstance(query, str)
        items = [query] if single else check_texts(query, "query")
        out = [enc.pooled for enc in self._encode_groups(items, self.query_prefix, False, None, False, normalize)]
        matrix = torch.cat(out).numpy() if out else np.zeros((0, self.dimension), dtype=np.float32)
        return matrix[0] if single else matrix

    def encode_multi(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        show_progress: bool | None = None,
        normalize: bool | None = None,
    ) -> list[MultiVector]:
        """Documents -> one :class:`MultiVector` each: pooled, per-landmark vectors, spans."""
        items = check_texts(texts)
        results: list[MultiVector] = []
        for enc in self._encode_groups(items, self.document_prefix, True, batch_size, show_progress, normalize):
            vectors = enc.vectors.numpy()
            pooled = enc.pooled.numpy()
            for i in range(len(enc.n_tokens)):
                lo, hi = enc.chunk_offsets[i], enc.chunk_offsets[i + 1]
                results.append(
                    MultiVector(
                        pooled=pooled[i],
                        vectors=vectors[lo:hi],
                        spans=[(int(a), int(b)) for a, b in enc.spans[lo:hi]],
                        n_tokens=int(enc.n_tokens[i]),
                        dropped_tokens=int(enc.dropped[i]),
                        n_windows=int(enc.windows[i]),
                    )
                )
        return results

    # ------------------------------------------------------------------ pipeline
    def tokenize(self, texts: list[str], prefix: str = "") -> TokenizedBatch:
        """One batched fast-tokenizer call -> flat ids and character offsets into ``texts``."""
        inputs = [prefix + t for t in texts] if prefix else texts
        encodings = self._text_tokenizer.encode_batch(inputs, add_special_tokens=False)
        counts = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
        total = int(counts.sum())
        ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=total)
        offs = np.fromiter(
            chain.from_iterable(chain.from_iterable(e.offsets for e in encodings)), dtype=np.int64, count=2 * total
        ).reshape(-1, 2)
        starts, ends = offs[:, 0], offs[:, 1]
        if prefix:
            starts = np.maximum(starts - len(prefix), 0)
            ends = np.maximum(ends - len(prefix), 0)
        text_lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return TokenizedBatch(ids, starts, ends, offsets, text_lengths)

    def chunk(self, batch: TokenizedBatch, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Chunk ends per text for this encoder's granularity."""
        g = self.granularity
        n = batch.n_tokens
        if g is None:
            return fixed_chunk_ends(n, self.max_length - self._prefix_len - 1)
        if isinstance(g, int):
            return fixed_chunk_ends(n, g)
        if isinstance(g, list):
            return fixed_chunk_ends(n, self._rng.choice(np.asarray(g), size=len(n)))
        bounds = [sentence_starts(t, self.sentence_language) for t in texts]
        ends, offsets = boundary_chunk_ends(batch, bounds)
        return split_long_chunks(ends, offsets, self.sentence_max_tokens)

    def layout(self, texts: list[str], prefix: str = ""):
        """Tokenise, truncate (if ``max_tokens``), chunk and lay out ``texts``."""
        batch = self.tokenize(texts, prefix)
        dropped = np.zeros(batch.n_texts, dtype=np.int64)
        if self.max_tokens is not None:
            batch, dropped = batch.truncate(self.max_tokens)
            if dropped.any():
                logger.warning(
                    "max_tokens=%d truncated %d of %d texts (%d tokens dropped); unset max_tokens "
                    "to encode long texts whole in windows",
                    self.max_tokens, int((dropped > 0).sum()), len(texts), int(dropped.sum()),
                )
        ends, chunk_offsets = self.chunk(batch, texts)
        layout = build_layout(batch, ends, chunk_offsets, self.special.landmark_id, self.special.cls_id)
        return batch, layout, dropped

    def _encode_groups(self, texts, prefix, want_vectors, batch_size, show_progress, normalize):
        for start in range(0, len(texts), _GROUP_SIZE):
            yield self._encode_group(
                texts[start : start + _GROUP_SIZE], prefix, want_vectors, batch_size, show_progress, normalize
            )

    def _encode_group(
        self,
        texts: list[str],
        prefix: str,
        want_vectors: bool,
        batch_size: int | None,
        show_progress: bool | None,
        normalize: bool | None,
    ) -> _Encoded:
        batch, layout, dropped = self.layout(texts, prefix)
        seqs = build_sequences(layout, self.max_length, self.window_overlap)
        text_of_chunk = np.repeat(np.arange(layout.n_texts), np.diff(layout.chunk_offsets))
        need_means = self.pooling == "mean"
        acc = PoolingAccumulator(layout.n_texts, text_of_chunk, self.dimension, need_means)
        rows = _check_int("batch_size", batch_size, 1) if batch_size is not None else self.batch_size
        progress = self.show_progress if show_progress is None else show_progress
        self.forward(seqs, acc, rows, progress)

        pooled = acc.pooled(self.pooling)
        vectors = None
        if want_vectors:
            vectors = acc.chunk_means() if need_means else acc.landmark_vectors()
        if self.normalize if normalize is None else normalize:
            pooled = l2_normalize(pooled)
            vectors = l2_normalize(vectors) if vectors is not None else None
        _check_finite(pooled, self.dtype)
        return _Encoded(
            pooled=pooled,
            vectors=vectors,
            spans=layout.spans,
            chunk_offsets=layout.chunk_offsets,
            n_tokens=batch.n_tokens,
            dropped=dropped,
            windows=seqs.windows_per_text if len(seqs.text) else np.zeros(0, dtype=np.int64),
        )

    def forward(self, seqs, acc: PoolingAccumulator, batch_size: int, show_progress: bool) -> None:
        """Run the encoder over all sequences, batch by batch, feeding the accumulator."""
        from tqdm.auto import tqdm

        batches = iter_batches(
            seqs, batch_size, self.max_batch_tokens, self.special.pad_id, self.special.cls_id is not None
        )
        bar = tqdm(total=int(seqs.lengths.sum()), unit="tok", unit_scale=True, desc="encode", disable=not show_progress)
        with torch.inference_mode(), bar:
            for b in batches:
                hidden = self.model(
                    input_ids=b.input_ids.to(self.device),
                    attention_mask=b.attention_mask.to(self.device),
                ).last_hidden_state
                acc.add(hidden, b.index)
                bar.update(b.n_tokens)


def _check_finite(x: torch.Tensor, dtype: torch.dtype) -> None:
    if not torch.isfinite(x).all():
        hint = " (fp16 overflows on some models: try dtype='bf16' or 'fp32')" if dtype == torch.float16 else ""
        raise FloatingPointError(f"the encoder produced non-finite vectors{hint}")


def load_folder_config(path: str) -> LMKFolderConfig | None:
    """The LMK settings of a folder written by ``lmk-rag train``, or None for a plain model."""
    return LMKFolderConfig.load(Path(path)) if is_lmk_folder(path) else None


def resolve_base(path: str, folder: LMKFolderConfig) -> str:
    """Where the base weights of an LMK folder live."""
    if folder.base_model == ".":
        return path
    return resolve_model_path(folder.base_model)[0]


def _text_tokenizer(tokenizer: Any) -> Any:
    """A private copy of the Rust tokenizer that treats special-token strings in text as text."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    backend.encode_special_tokens = True
    return backend


def _load_shared(path, device, dtype, trust_remote_code, allow_pickle, revision, adapter=None, landmark_id=None):
    """Load (tokenizer, model) once per settings; encoders with the same settings share them."""
    key = (path, str(device), str(dtype), trust_remote_code, allow_pickle, revision, adapter)
    with _MODEL_CACHE_LOCK:
        if key not in _MODEL_CACHE:
            tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code, revision=revision)
            model = load_model(
                path, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                allow_pickle=allow_pickle, revision=revision,
            )
            if adapter is not None:
                from pathlib import Path

                lmk = special_tokens(tokenizer, landmark_id).landmark_id
                model = apply_adapter(model, Path(adapter), lmk)
            _MODEL_CACHE[key] = (tokenizer, model)
        return _MODEL_CACHE[key]
