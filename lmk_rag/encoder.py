"""LMKEncoder: landmark-pooled embeddings over any Hugging Face encoder.

Pipeline per group of texts: one fast-tokenizer call (offsets on, no special tokens) ->
chunk ends (fixed k, sentences, variable k, or none) -> landmark layout -> whole sequences
or overlapping windows -> length-sorted batches under a token budget -> encoder forward
under ``torch.inference_mode()`` -> pooling at landmark positions.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch

from .backends import check_backend, load_backend, model_key, vectors_tag
from .batching import iter_batches
from .errors import InvalidInputError, InvalidTypeError, NonFiniteVectorError
from .landmarks import (
    Layout,
    TokenizedBatch,
    add_final_landmark,
    boundary_chunk_ends,
    build_layout,
    fixed_chunk_ends,
    split_long_chunks,
)
from .lmk_folder import LMKFolderConfig, apply_adapter, is_lmk_folder
from .memory import pin_mmap_threshold
from .models import (
    DEFAULT_MODEL,
    SpecialTokens,
    is_rotary,
    load_model,
    load_tokenizer,
    resolve_device,
    resolve_dtype,
    resolve_model_path,
    special_tokens,
    trained_max_length,
    weights_digest,
)
from .pooling import (
    NEEDS_MEANS,
    LandmarkWeights,
    Pooling,
    PoolingAccumulator,
    check_landmark_weights,
    check_pooling,
    l2_normalize,
    landmark_weights_of,
)
from .sentences import sentence_starts
from .settings import (
    FROM_MODEL,
    LAYOUTS,
    Backend,
    DType,
    EncoderSettings,
    LayoutName,
    Quantize,
)
from .st_folder import STFolder, is_st_folder, read_st_folder
from .types import Fingerprint, MultiVector
from .windows import Sequences, build_sequences

logger = logging.getLogger("lmk_rag")
_SETTING_NAMES = frozenset(f.name for f in dataclasses.fields(EncoderSettings))

Granularity = int | str | Sequence[int] | None
# Texts per pipeline group: bounds memory on huge inputs while keeping batches well sorted.
_GROUP_SIZE = 4096
# Huge texts are tokenized in pieces of at most this many characters, at most CALL_CHARS per call.
PIECE_CHARS = 100_000
CALL_CHARS = 1_000_000
# Tokens of window-sized sequences from which an encode counts as huge (see memory.py).
HUGE_INPUT_TOKENS = 65_536

# Loaded models shared by encoders of the same settings, least recently used dropped first.
MODEL_CACHE_SIZE = 4
_MODEL_CACHE: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
_MODEL_CACHE_LOCK = threading.Lock()


def check_texts(texts: Any, name: str = "texts") -> list[str]:
    """A list of str, or a clear TypeError naming what was passed. Unordered or keyed
    containers (set, dict) are refused: their order, or what would be encoded, is not obvious."""
    if texts is None:
        raise InvalidTypeError(f"{name} must be a list of str, got None")
    if isinstance(texts, (str, bytes)):
        raise InvalidTypeError(f"{name} must be a list of str, got a bare {type(texts).__name__}; wrap it: [text]")
    if isinstance(texts, (Mapping, Set)) or not hasattr(texts, "__iter__"):
        raise InvalidTypeError(f"{name} must be a list of str, got {type(texts).__name__}")
    items = list(texts)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            hint = ""
            if hasattr(item, "get_content") and hasattr(item, "node_id"):
                hint = (
                    "; to use an lmk-rag index as a LlamaIndex vector store, wrap it: "
                    "from llama_index.vector_stores.lmk import LMKVectorStore; LMKVectorStore(index)"
                )
            raise InvalidTypeError(f"{name}[{i}] must be str, got {type(item).__name__}{hint}")
    return items


def split_at_whitespace(texts: list[str], limit: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Cut texts longer than ``limit`` characters into pieces that end at whitespace (hard cuts
    only where there is none); returns the pieces, each piece's text index and character offset."""
    if all(len(t) <= limit for t in texts):
        n = len(texts)
        return texts, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    pieces: list[str] = []
    owner: list[int] = []
    shift: list[int] = []
    for i, text in enumerate(texts):
        start = 0
        while len(text) - start > limit:
            cut = max(
                text.rfind(" ", start + limit // 2, start + limit), text.rfind("\n", start + limit // 2, start + limit)
            )
            cut = cut if cut > start else start + limit  # no whitespace: a hard cut
            pieces.append(text[start:cut])
            owner.append(i)
            shift.append(start)
            start = cut
        pieces.append(text[start:])
        owner.append(i)
        shift.append(start)
    return pieces, np.asarray(owner, dtype=np.int64), np.asarray(shift, dtype=np.int64)


def find_unencodable(texts: Sequence[str], name: str = "texts") -> InvalidInputError | None:
    """An error naming the first text that is not valid Unicode (a lone surrogate), else None."""
    for i, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return InvalidInputError(
                f"{name}[{i}] is not valid Unicode: a lone surrogate {text[exc.start]!r} at character {exc.start} "
                "(text decoded with errors='surrogateescape'?); clean it, e.g. "
                "text.encode('utf-8', 'replace').decode('utf-8')"
            )
    return None


def check_granularity(granularity: Any) -> int | str | list[int] | None:
    """int k > 0, 'sentence', None (no inner landmarks), or a list of k for variable granularity."""
    allowed = "a positive int k, 'sentence', None, or a list of positive ints (variable k)"
    if granularity is None or granularity == "sentence":
        return granularity
    if isinstance(granularity, bool):
        raise InvalidTypeError(f"granularity must be {allowed}, got {granularity!r}")
    if isinstance(granularity, int):
        if granularity < 1:
            raise InvalidInputError(f"granularity must be {allowed}, got {granularity}")
        return granularity
    if isinstance(granularity, str):
        raise InvalidInputError(f"granularity must be {allowed}, got {granularity!r}")
    if isinstance(granularity, Sequence):
        ks = list(granularity)
        if not ks or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in ks):
            raise InvalidInputError(f"granularity must be {allowed}, got {granularity!r}")
        return ks
    raise InvalidTypeError(f"granularity must be {allowed}, got {type(granularity).__name__}")


def _check_int(name: str, value: Any, minimum: int, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        extra = " or None" if allow_none else ""
        raise InvalidInputError(f"{name} must be an int >= {minimum}{extra}, got {value!r}")
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

    The keyword arguments are the fields of :class:`~lmk_rag.settings.EncoderSettings`, each
    described there with its default (a test keeps this signature and those fields alike).
    ``pooling``, ``granularity``, ``landmark_token_id``, the prefixes, ``layout`` and
    ``max_length`` left unset take the model folder's values (an lmk-rag folder, or a
    sentence-transformers folder named by path: its prompts, ``max_seq_length`` and LMK keys).
    ``window_overlap=None`` shares about a quarter of a window, and at least one chunk when a
    window holds three or more; rotary models may set ``max_length`` beyond their trained length,
    absolute-position models may not. An unknown keyword is refused with the list of settings.

    Args:
        model: local folder or hub id; ``None`` is the packaged default.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        pooling: Pooling | None = None,
        granularity: Granularity = FROM_MODEL,
        normalize: bool = True,
        device: str = "auto",
        dtype: DType = "fp32",
        backend: Backend = "torch",
        quantize: Quantize | None = None,
        max_length: int | None = None,
        max_tokens: int | None = None,
        window_overlap: int | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = 16384,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        layout: LayoutName | None = None,
        landmark_token_id: int | None = None,
        landmark_weights: LandmarkWeights | None = None,
        sentence_max_tokens: int = 64,
        sentence_language: str = "en",
        seed: int = 0,
        show_progress: bool = False,
        trust_remote_code: bool = False,
        allow_pickle: bool = False,
        revision: str | None = None,
        **unknown: NoReturn,
    ) -> None:
        options = {name: value for name, value in locals().items() if name in _SETTING_NAMES}
        if isinstance(model, os.PathLike):
            options["model"] = os.fspath(model)
        given = EncoderSettings.from_options({**options, **unknown})
        self.settings = given
        path, self.model_name = resolve_model_path(given.model)
        folder = load_folder_config(path)
        # Folders named by path are read; the packaged default stands for a hub id, whose defaults stay.
        by_path = self.model_name != DEFAULT_MODEL
        st = read_st_folder(path) if folder is None and by_path and is_st_folder(path) else None
        self.st_folder = st
        # Local folders only: a name in SHIPPED_ADAPTERS or a hub id stands for weights that do not change.
        self.weights_digest = weights_digest(path) if by_path and self.model_name == path else None
        recorded = folder_defaults(folder, st)

        def unset_or(name: str, fallback: Any) -> Any:
            value = getattr(given, name)
            if value is not None:
                return value
            found = recorded.get(name)
            return fallback if found is None else found

        granularity = given.granularity
        if isinstance(granularity, str) and granularity == FROM_MODEL:
            granularity = recorded.get("granularity", 32)
        landmark_token_id = unset_or("landmark_token_id", None)
        self.pooling = check_pooling(unset_or("pooling", "lmk"))
        self.landmark_weights = check_landmark_weights(unset_or("landmark_weights", "equal"))
        self.granularity = check_granularity(granularity)
        self.layout = unset_or("layout", "lmk")
        if self.layout not in LAYOUTS:
            raise InvalidInputError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        # PR #3642's earlier revisions laid texts out as lmk-rag does; only the current one keeps
        # the tokenizer's final special token (and pools it).
        self._final_landmark = self.layout == "sentence-transformers" and (
            st is None or st.kind != "lmk-pr" or st.keeps_final_special
        )
        if not isinstance(given.normalize, bool):
            raise InvalidTypeError(f"normalize must be a bool, got {type(given.normalize).__name__}")
        self.normalize = given.normalize
        self._window_overlap = _check_int("window_overlap", given.window_overlap, 0, allow_none=True)
        self.batch_size = _check_int("batch_size", given.batch_size, 1)
        self.max_batch_tokens = _check_int("max_batch_tokens", given.max_batch_tokens, 1)
        self.max_tokens = _check_int("max_tokens", given.max_tokens, 1, allow_none=True)
        self.sentence_max_tokens = _check_int("sentence_max_tokens", given.sentence_max_tokens, 1)
        self.query_prefix = unset_or("query_prefix", "")
        self.document_prefix = unset_or("document_prefix", "")
        for name, value in (
            ("query_prefix", self.query_prefix),
            ("document_prefix", self.document_prefix),
            ("sentence_language", given.sentence_language),
        ):
            if not isinstance(value, str):
                raise InvalidTypeError(f"{name} must be str, got {type(value).__name__}")
        self.sentence_language = given.sentence_language
        self.show_progress = given.show_progress
        self._rng = np.random.default_rng(given.seed)

        self.device = resolve_device(given.device)
        self.dtype = resolve_dtype(given.dtype)
        self.backend, self.quantize = check_backend(given.backend, given.quantize)
        if self.backend != "torch" and self.device.type != "cpu":
            raise InvalidInputError(
                f"backend={self.backend!r} runs on the CPU; use backend='torch' on {self.device.type}"
            )
        # A trained folder's offset (and LoRA, if any) applies after full fine-tuning too ("base_model": ".").
        self.adapter = path if folder is not None else None
        base = st.model_path if st is not None else (path if folder is None else resolve_base(path, folder))
        self.tokenizer, self.model = _load_shared(
            base,
            self.device,
            self.dtype,
            given.trust_remote_code,
            given.allow_pickle,
            given.revision,
            self.adapter,
            landmark_token_id,
        )
        self._runner = load_backend(
            self.model,
            self.backend,
            self.quantize,
            self.dtype,
            model_key(self.model_name, self.adapter, self.weights_digest, _lmk_version(), given.revision),
        )
        self._text_tokenizer = _text_tokenizer(self.tokenizer)
        self.special: SpecialTokens = special_tokens(self.tokenizer, landmark_token_id)
        self.dimension = int(self.model.config.hidden_size)
        self.trained_max_length = trained_max_length(self.model.config, self.tokenizer)
        self.rotary = is_rotary(self.model.config)
        max_length = given.max_length
        if max_length is None and recorded.get("max_length") is not None:
            # The folder's window (e.g. a sentence-transformers max_seq_length), within what the model allows.
            max_length = recorded["max_length"]
            if not self.rotary:
                max_length = min(max_length, self.trained_max_length)
        self.max_length = self._check_max_length(max_length)
        self._check_chunks_fit()
        trained = folder is not None or (st is not None and st.is_lmk)
        if self.pooling in ("lmk", "lmk+mean") and not trained:
            warn_untrained(self.model_name)
        logger.info(
            "encoder: model %s%s, pooling=%s, granularity=%s, window %d tokens (overlap %d chunks), %s on %s",
            self.model_name,
            f" (LMK-trained folder {path})" if folder is not None else f" ({path})",
            self.pooling,
            self.granularity,
            self.max_length,
            self.window_overlap,
            str(self.dtype).removeprefix("torch."),
            self.device,
        )

    # ------------------------------------------------------------------ settings
    def _check_max_length(self, max_length: int | None) -> int:
        if max_length is None:
            return self.trained_max_length
        _check_int("max_length", max_length, 4)
        if max_length > self.trained_max_length and not self.rotary:
            raise InvalidInputError(
                f"max_length={max_length} exceeds this model's {self.trained_max_length} positions, and its "
                "position embeddings are absolute, so it cannot extrapolate; leave max_length unset "
                "(long texts are encoded in windows) or use a rotary-position model"
            )
        if max_length > self.trained_max_length:
            logger.info(
                "max_length=%d is beyond the trained %d positions (rotary extrapolation)",
                max_length,
                self.trained_max_length,
            )
        return max_length

    @property
    def _prefix_len(self) -> int:
        return 0 if self.special.cls_id is None else 1

    def _check_chunks_fit(self) -> None:
        largest = self._largest_chunk()
        if largest is None:
            return
        room = self.max_length - self._prefix_len - 1
        if largest > room:
            name = "sentence_max_tokens" if self.granularity == "sentence" else "granularity"
            raise InvalidInputError(
                f"{name}={largest} does not fit a window of max_length={self.max_length} "
                f"(room for {room} tokens plus CLS and landmark); use at most {room}"
            )

    def _largest_chunk(self) -> int | None:
        """Content tokens of the longest chunk this granularity makes (None: one chunk per window)."""
        g = self.granularity
        if g == "sentence":
            return self.sentence_max_tokens
        if isinstance(g, list):
            return max(g)
        return g if isinstance(g, int) else None

    @property
    def window_overlap(self) -> int:
        """Chunks shared by neighbouring windows (see the constructor)."""
        if self._window_overlap is not None:
            return self._window_overlap
        k = self._largest_chunk()
        if k is None:
            return 0
        capacity = self.max_length - self._prefix_len
        per_window = capacity // (k + 1)
        return max(1 if per_window >= 3 else 0, capacity // 4 // (k + 1))

    @property
    def fingerprint(self) -> Fingerprint:
        """Settings an index must match: every setting :class:`EncoderSettings` marks
        ``fingerprint``, as resolved here, plus the dimension, landmark id and adapter."""
        recorded = {name: getattr(self, name) for name in EncoderSettings.names("fingerprint") if name != "model"}
        if self.granularity != "sentence":  # the sentence splitter plays no part then
            recorded["sentence_max_tokens"] = recorded["sentence_language"] = None
        recorded["max_tokens"] = self.max_tokens or 0  # 0: no cap (None would read as "not recorded")
        return Fingerprint(
            model=self.model_name,
            dimension=self.dimension,
            landmark_token_id=self.special.landmark_id,
            adapter=self.adapter_name,
            weights=self.weights_digest,
            backend=vectors_tag(self.backend, self.quantize),
            **recorded,
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

    def encode_query(self, query: str | Sequence[str], *, normalize: bool | None = None) -> np.ndarray:
        """A query -> (d,); a list of queries -> (n, d). Applies ``query_prefix``."""
        single = isinstance(query, str)
        items: list[str] = [query] if isinstance(query, str) else check_texts(query, "query")
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
            assert enc.vectors is not None  # asked for: want_vectors=True
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

    def save(self, path: str | os.PathLike[str], format: str = "lmk", *, overwrite: bool = False) -> Path:
        """Write this encoder to the folder ``path``: ``"lmk"`` (lmk-rag's folder: settings and
        adapter), ``"merged"`` (a plain Hugging Face folder, adapter and landmark offset merged
        into the weights), ``"sentence-transformers"`` (loads with
        ``SentenceTransformer(path, trust_remote_code=True)``, no lmk-rag needed) or
        ``"multi-vector"`` (a sentence-transformers ``MultiVectorEncoder`` whose document vectors
        are the landmark vectors). Each loads back with ``LMKEncoder(path)``; see
        :mod:`lmk_rag.export`."""
        from .export import save_encoder

        return save_encoder(self, os.fspath(path) if isinstance(path, os.PathLike) else path, format, overwrite)

    # ------------------------------------------------------------------ pipeline
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text by this model's tokenizer, without special tokens (the context
        builder's default budget unit)."""
        items = check_texts(texts)
        return [len(e.ids) for e in self._text_tokenizer.encode_batch(items, add_special_tokens=False)]

    def tokenize(self, texts: list[str], prefix: str = "") -> TokenizedBatch:
        """Batched fast-tokenizer calls -> flat ids and character offsets into ``texts``.

        Texts longer than :data:`PIECE_CHARS` are cut at whitespace into pieces, and pieces are
        tokenized :data:`CALL_CHARS` characters at a time, so the tokenizer's own per-token
        objects never hold more than that much text at once (a 20 MB file does not need GBs).
        Word-level pre-tokenizers split at whitespace anyway, so the tokens are the same.
        """
        inputs = [prefix + t for t in texts] if prefix else texts
        warn_unknown_words(texts, self._text_tokenizer)
        pieces, owner, shift = split_at_whitespace(inputs, PIECE_CHARS)
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        calls = np.searchsorted(np.cumsum(lengths), np.arange(CALL_CHARS, int(lengths.sum()), CALL_CHARS))
        parts_ids, parts_offs, parts_counts = [], [], []
        for lo, hi in zip(np.concatenate([[0], calls]), np.concatenate([calls, [len(pieces)]])):
            if hi <= lo:
                continue
            try:
                encodings = self._text_tokenizer.encode_batch(pieces[lo:hi], add_special_tokens=False)
            except Exception as exc:  # the tokenizer's message names neither the text nor the cause
                bad = find_unencodable(texts)
                if bad is not None:
                    raise bad from exc
                raise
            counts = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
            total = int(counts.sum())
            parts_ids.append(np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=total))
            offs = np.fromiter(
                chain.from_iterable(chain.from_iterable(e.offsets for e in encodings)), dtype=np.int64, count=2 * total
            ).reshape(-1, 2)
            parts_offs.append(offs + np.repeat(shift[lo:hi], counts)[:, None])
            parts_counts.append(counts)
            del encodings
        ids = np.concatenate(parts_ids) if parts_ids else np.zeros(0, dtype=np.int64)
        offs = np.concatenate(parts_offs) if parts_offs else np.zeros((0, 2), dtype=np.int64)
        piece_counts = np.concatenate(parts_counts) if parts_counts else np.zeros(0, dtype=np.int64)
        counts = np.bincount(owner, weights=piece_counts, minlength=len(texts)).astype(np.int64)
        starts, ends = offs[:, 0], offs[:, 1]
        if prefix:
            starts = np.maximum(starts - len(prefix), 0)
            ends = np.maximum(ends - len(prefix), 0)
        text_lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return TokenizedBatch(ids, starts, ends, offsets, text_lengths)

    def chunk(self, batch: TokenizedBatch, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Chunk ends per text for this encoder's granularity."""
        ends, offsets = self._chunk_ends(batch, texts)
        if self._final_landmark:
            return add_final_landmark(ends, offsets, batch.n_tokens)
        return ends, offsets

    def _chunk_ends(self, batch: TokenizedBatch, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        g = self.granularity
        n = batch.n_tokens
        if g is None:
            return fixed_chunk_ends(n, self.max_length - self._prefix_len - 1 - int(self._final_landmark))
        if isinstance(g, int):
            return fixed_chunk_ends(n, g)
        if isinstance(g, list):
            return fixed_chunk_ends(n, self._rng.choice(np.asarray(g), size=len(n)))
        bounds = [sentence_starts(t, self.sentence_language) for t in texts]
        ends, offsets = boundary_chunk_ends(batch, bounds)
        return split_long_chunks(ends, offsets, self.sentence_max_tokens)

    def lay_out(self, texts: list[str], prefix: str = "") -> tuple[TokenizedBatch, Layout, np.ndarray]:
        """Tokenise, truncate (if ``max_tokens``), chunk and lay out ``texts``."""
        batch = self.tokenize(texts, prefix)
        dropped = np.zeros(batch.n_texts, dtype=np.int64)
        if self.max_tokens is not None:
            batch, dropped = batch.truncate(self.max_tokens)
            if dropped.any():
                logger.warning(
                    "max_tokens=%d truncated %d of %d texts (%d tokens dropped); unset max_tokens "
                    "to encode long texts whole in windows",
                    self.max_tokens,
                    int((dropped > 0).sum()),
                    len(texts),
                    int(dropped.sum()),
                )
        ends, chunk_offsets = self.chunk(batch, texts)
        layout = build_layout(batch, ends, chunk_offsets, self.special.landmark_id, self.special.cls_id)
        return batch, layout, dropped

    def _encode_groups(
        self,
        texts: list[str],
        prefix: str,
        want_vectors: bool,
        batch_size: int | None,
        show_progress: bool | None,
        normalize: bool | None,
    ) -> Iterator[_Encoded]:
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
        batch, layout, dropped = self.lay_out(texts, prefix)
        seqs = build_sequences(layout, self.max_length, self.window_overlap)
        text_of_chunk = np.repeat(np.arange(layout.n_texts), np.diff(layout.chunk_offsets))
        need_means = self.pooling in NEEDS_MEANS
        weights = landmark_weights_of(layout.chunk_sizes, self.landmark_weights)
        acc = PoolingAccumulator(layout.n_texts, text_of_chunk, self.dimension, need_means, weights)
        rows = _check_int("batch_size", batch_size, 1) if batch_size is not None else self.batch_size
        progress = self.show_progress if show_progress is None else show_progress
        self.forward(seqs, acc, rows, progress)

        pooled = acc.pooled(self.pooling)
        vectors = None
        if want_vectors:
            vectors = acc.chunk_vectors(self.pooling)
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

    def forward(self, seqs: Sequences, acc: PoolingAccumulator, batch_size: int, show_progress: bool) -> None:
        """Run the encoder over all sequences, batch by batch, feeding the accumulator."""
        from tqdm.auto import tqdm

        batches = iter_batches(
            seqs, batch_size, self.max_batch_tokens, self.special.pad_id, self.special.cls_id is not None
        )
        bar = tqdm(
            total=int(seqs.lengths.sum()),
            unit="tok",
            unit_scale=True,
            desc="encode",
            leave=False,
            disable=not show_progress,
        )
        if len(seqs.text) and seqs.windows_per_text.max() > 1 and seqs.lengths.sum() >= HUGE_INPUT_TOKENS:
            pin_mmap_threshold()  # a huge input: keep resident memory flat (see memory.py)
        with torch.inference_mode(), bar:
            for b in batches:
                if self._runner is not None:  # an exported model (ONNX Runtime, OpenVINO)
                    hidden = self._runner(b.input_ids, b.attention_mask)
                else:
                    hidden = self.model(
                        input_ids=b.input_ids.to(self.device),
                        attention_mask=b.attention_mask.to(self.device),
                    ).last_hidden_state
                acc.add(hidden, b.index)
                bar.update(b.n_tokens)


def _check_finite(x: torch.Tensor, dtype: torch.dtype) -> None:
    if not torch.isfinite(x).all():
        hint = " (fp16 overflows on some models: try dtype='bf16' or 'fp32')" if dtype == torch.float16 else ""
        raise NonFiniteVectorError(f"the encoder produced non-finite vectors{hint}")


_WARNED_UNTRAINED: set[str] = set()


def _lmk_version() -> str:
    from . import __version__

    return __version__


def warn_unknown_words(texts: Sequence[str], tokenizer: Any) -> None:
    """Warn when words are longer than a WordPiece tokenizer reads (100 characters for BERT):
    each becomes one unknown token, so a base64 blob, a hash or a 200k-character run of minified
    code is silently unsearchable."""
    model = getattr(tokenizer, "model", None)
    limit = getattr(model, "max_input_chars_per_word", None)
    if not isinstance(limit, int) or type(model).__name__ != "WordPiece":
        return
    pattern = re.compile(r"[^\W_]{" + str(limit + 1) + ",}")
    long_words = [m for text in texts for m in pattern.finditer(text)]
    if long_words:
        chars = sum(m.end() - m.start() for m in long_words)
        sample = long_words[0].group()[:24]
        logger.warning(
            "%d characters in %d words longer than %d characters (e.g. %r...) become one unknown token each and "
            "cannot be found by search (base64, hashes, minified code); split or drop them before indexing",
            chars,
            len(long_words),
            limit,
            sample,
        )


def warn_untrained(model_name: str) -> None:
    """Say once per model that it pools landmarks without having been trained to."""
    if model_name in _WARNED_UNTRAINED:
        return
    _WARNED_UNTRAINED.add(model_name)
    logger.warning(
        "model %s has no LMK training, so pooling='lmk' reads landmark states it never learned to fill "
        "(all-MiniLM-L6-v2 as it comes: 0.63 nDCG@10 on long pages, 0.87 trained); leave model unset for the "
        "packaged LMK model, use pooling='mean', or train one with `lmk-rag train`",
        model_name,
    )


def load_folder_config(path: str) -> LMKFolderConfig | None:
    """The LMK settings of a folder written by ``lmk-rag train``, or None for a plain model."""
    return LMKFolderConfig.load(Path(path)) if is_lmk_folder(path) else None


def folder_defaults(folder: LMKFolderConfig | None, st: STFolder | None) -> dict[str, Any]:
    """Settings a model folder records (an LMK folder, else a sentence-transformers folder's
    LMK keys, prompts and max_seq_length); the encoder takes them for settings left unset."""
    if folder is not None:
        recorded = {
            "pooling": folder.pooling,
            "granularity": folder.granularity,
            "landmark_token_id": folder.landmark_token_id,
            "query_prefix": folder.query_prefix,
            "document_prefix": folder.document_prefix,
            "layout": folder.layout,
            "max_length": folder.max_length,
            "landmark_weights": folder.landmark_weights,
        }
        return {k: v for k, v in recorded.items() if v is not None or k == "granularity"}
    if st is None:
        return {}
    recorded = {
        "query_prefix": st.query_prefix,
        "document_prefix": st.document_prefix,
        "max_length": st.max_seq_length,
    }
    if st.is_lmk:
        recorded.update(pooling="lmk", landmark_token_id=st.landmark_token_id, landmark_weights=st.landmark_weights)
        recorded["granularity"] = st.granularity if st.granularity is not None else 32
    return {k: v for k, v in recorded.items() if v is not None}


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


def _load_shared(
    path: str,
    device: torch.device,
    dtype: torch.dtype,
    trust_remote_code: bool,
    allow_pickle: bool,
    revision: str | None,
    adapter: str | None = None,
    landmark_id: int | None = None,
) -> tuple[Any, Any]:
    """Load (tokenizer, model) once per settings; encoders with the same settings share them.
    The landmark id is part of the key: an adapter's offset is added to that token's embedding."""
    key = (path, str(device), str(dtype), trust_remote_code, allow_pickle, revision, adapter, landmark_id)
    with _MODEL_CACHE_LOCK:
        if key in _MODEL_CACHE:
            _MODEL_CACHE.move_to_end(key)
            return _MODEL_CACHE[key]
        tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code, revision=revision)
        model = load_model(
            path,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_pickle=allow_pickle,
            revision=revision,
        )
        if adapter is not None:
            lmk = special_tokens(tokenizer, landmark_id).landmark_id
            model = apply_adapter(model, Path(adapter), lmk)
        _MODEL_CACHE[key] = (tokenizer, model)
        while len(_MODEL_CACHE) > MODEL_CACHE_SIZE:
            _MODEL_CACHE.popitem(last=False)  # encoders still holding it keep it alive
        return _MODEL_CACHE[key]


def clear_model_cache() -> None:
    """Forget every cached model: memory is freed once no LMKEncoder holds it any more."""
    with _MODEL_CACHE_LOCK:
        _MODEL_CACHE.clear()
