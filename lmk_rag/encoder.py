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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import numpy as np
import torch

from .encoding.backends import check_backend, load_backend, model_key
from .encoding.batching import iter_batches
from .encoding.inputs import check_finite, check_granularity, check_int, check_optional_int, check_texts
from .encoding.landmarks import (
    Layout,
    TokenizedBatch,
    add_final_landmark,
    build_layout,
    granularity_chunk_ends,
)
from .encoding.memory import pin_mmap_threshold
from .encoding.pooling import (
    NEEDS_MEANS,
    LandmarkWeights,
    Pooling,
    PoolingAccumulator,
    check_landmark_weights,
    check_pooling,
    l2_normalize,
    landmark_weights_of,
)
from .encoding.sentences import sentence_starts
from .encoding.settings import (
    FROM_MODEL,
    LAYOUTS,
    Backend,
    DType,
    EncoderSettings,
    LayoutName,
    Quantize,
    vectors_tag,
)
from .encoding.tokenization import budget_tokens, text_tokenizer, tokenize_texts
from .encoding.windows import (
    Sequences,
    build_sequences,
    check_chunks_fit,
    check_max_length,
    default_overlap,
    largest_chunk,
)
from .errors import InvalidInputError, InvalidTypeError
from .folders.loading import (
    fill_from_folder,
    folder_defaults,
    lmk_version,
    load_folder_config,
    load_shared,
    resolve_base,
    warn_untrained,
)
from .folders.models import (
    DEFAULT_MODEL,
    SpecialTokens,
    is_rotary,
    resolve_device,
    resolve_dtype,
    resolve_model_path,
    special_tokens,
    trained_max_length,
    weights_digest,
)
from .folders.st import is_st_folder, read_st_folder
from .types import Fingerprint, MultiVector

if TYPE_CHECKING:
    from .export import SaveFormat

logger = logging.getLogger(__name__)
_SETTING_NAMES = frozenset(f.name for f in dataclasses.fields(EncoderSettings))

Granularity = int | str | Sequence[int] | None
# Texts per pipeline group: bounds memory on huge inputs while keeping batches well sorted.
_GROUP_SIZE = 4096
# Tokens of window-sized sequences from which an encode counts as huge (see memory.py).
HUGE_INPUT_TOKENS = 65_536


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
    """Landmark-pooled text embeddings: one vector per text, or one per landmark with the
    characters it covers; long texts are encoded whole, in windows.

    Example:
        ```python
        from lmk_rag import LMKEncoder

        enc = LMKEncoder()                            # the packaged model: all-MiniLM-L6-v2, LMK, k=32
        X = enc.encode(["a text", "another"])         # (2, d) float32, rows L2-normalised
        q = enc.encode_query("how long do tides last?")
        mv = enc.encode_multi(["a long text ..."])[0]
        mv.pooled, mv.vectors, mv.spans               # (d,), (m, d), [(start, end), ...]
        ```

    The keyword arguments are the fields of :class:`~lmk_rag.encoding.settings.EncoderSettings`, each
    described there with its default (a test keeps this signature and those fields alike).
    ``pooling``, ``granularity``, ``landmark_token_id``, the prefixes, ``layout`` and
    ``max_length`` left unset take the model folder's values (an lmk-rag folder, or a
    sentence-transformers folder named by path: its prompts, ``max_seq_length`` and LMK keys).
    ``window_overlap=None`` shares about a quarter of a window, and at least one chunk when a
    window holds three or more; rotary models may set ``max_length`` beyond their trained length,
    absolute-position models may not. An unknown keyword is refused with the list of settings.

    Args:
        model: A local folder or a hub id already in the local cache; ``None`` is the packaged
            default (the shipped LMK model).

    Raises:
        InvalidInputError: A setting out of range, or an unknown keyword (the message lists the
            settings).
        ModelLoadError: The model folder cannot be read (the message says what to change).
        MissingDependencyError: A backend or format that needs an extra (named in the message).
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
        truncate_tokens: int | None = None,
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
        resolved = fill_from_folder(given, recorded)
        landmark_token_id = resolved["landmark_token_id"]
        self.pooling = check_pooling(resolved["pooling"])
        self.landmark_weights = check_landmark_weights(resolved["landmark_weights"])
        self.granularity = check_granularity(resolved["granularity"])
        self.layout = resolved["layout"]
        if self.layout not in LAYOUTS:
            raise InvalidInputError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        # PR #3642's layout keeps the tokenizer's final special token (and pools it).
        self._final_landmark = self.layout == "sentence-transformers"
        if not isinstance(given.normalize, bool):
            raise InvalidTypeError(f"normalize must be a bool, got {type(given.normalize).__name__}")
        self.normalize = given.normalize
        self._window_overlap = check_optional_int("window_overlap", resolved["window_overlap"], 0)
        self.batch_size = check_int("batch_size", given.batch_size, 1)
        self.max_batch_tokens = check_int("max_batch_tokens", given.max_batch_tokens, 1)
        self.truncate_tokens = check_optional_int("truncate_tokens", given.truncate_tokens)
        self.sentence_max_tokens = check_int("sentence_max_tokens", given.sentence_max_tokens, 1)
        self.query_prefix = resolved["query_prefix"]
        self.document_prefix = resolved["document_prefix"]
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
        self.tokenizer, self.model = load_shared(
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
            model_key(self.model_name, self.adapter, self.weights_digest, lmk_version(), given.revision),
        )
        self._text_tokenizer = text_tokenizer(self.tokenizer)
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
        self.max_length = check_max_length(max_length, self.trained_max_length, self.rotary)
        check_chunks_fit(self._largest_chunk, self.max_length, self._prefix_len, self.granularity)
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
    @property
    def _prefix_len(self) -> int:
        return 0 if self.special.cls_id is None else 1

    @property
    def window_overlap(self) -> int:
        """Chunks shared by neighbouring windows (see the constructor)."""
        if self._window_overlap is not None:
            return int(self._window_overlap)
        return default_overlap(self.max_length, self._prefix_len, self._largest_chunk)

    @property
    def _largest_chunk(self) -> int | None:
        return largest_chunk(self.granularity, self.sentence_max_tokens)

    @property
    def fingerprint(self) -> Fingerprint:
        """Settings an index must match: every setting :class:`EncoderSettings` marks
        ``fingerprint``, as resolved here, plus the dimension, landmark id and adapter."""
        recorded = {name: getattr(self, name) for name in EncoderSettings.names("fingerprint") if name != "model"}
        if self.granularity != "sentence":  # the sentence splitter plays no part then
            recorded["sentence_max_tokens"] = recorded["sentence_language"] = None
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
        """One pooled vector per document.

        Args:
            texts: The documents (a list of str; a bare str is refused). Long ones are encoded
                whole, in windows.
            batch_size: Sequences per forward pass (default: the encoder's ``batch_size``).
            show_progress: A progress bar of tokens (default: the encoder's setting).
            normalize: L2-normalise the rows (default: the encoder's ``normalize``).

        Returns:
            A ``(len(texts), d)`` float32 array, in input order.

        Raises:
            InvalidTypeError: ``texts`` is not a list of str.
            InvalidInputError: A text the tokenizer cannot read (named with its position).
        """
        items = check_texts(texts)
        out = [
            enc.pooled
            for enc in self._encode_groups(items, self.document_prefix, False, batch_size, show_progress, normalize)
        ]
        if not out:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return torch.cat(out).numpy()

    def encode_query(self, query: str | Sequence[str], *, normalize: bool | None = None) -> np.ndarray:
        """Query vectors, with the model's ``query_prefix``.

        Args:
            query: One query, or a list of them.
            normalize: L2-normalise (default: the encoder's ``normalize``).

        Returns:
            A ``(d,)`` vector for a str, a ``(n, d)`` array for a list.
        """
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
        """Per-landmark vectors of each document, with the characters each landmark covers.

        Args:
            texts: The documents (a list of str).
            batch_size: Sequences per forward pass (default: the encoder's ``batch_size``).
            show_progress: A progress bar of tokens (default: the encoder's setting).
            normalize: L2-normalise the vectors (default: the encoder's ``normalize``).

        Returns:
            One :class:`~lmk_rag.types.MultiVector` per text: ``pooled`` ``(d,)``, ``vectors``
            ``(m, d)`` and ``spans``, which partition the text in order.
        """
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

    def save(self, path: str | os.PathLike[str], format: SaveFormat = "lmk", *, overwrite: bool = False) -> Path:
        """Write this encoder to the folder ``path``: ``"lmk"`` (lmk-rag's folder: settings and
        adapter), ``"merged"`` (a plain Hugging Face folder, adapter and landmark offset merged
        into the weights), ``"sentence-transformers"`` (loads with
        ``SentenceTransformer(path, trust_remote_code=True)``, no lmk-rag needed) or
        ``"multi-vector"`` (a sentence-transformers ``MultiVectorEncoder`` whose document vectors
        are the landmark vectors). Each loads back with ``LMKEncoder(path)``; see
        :mod:`lmk_rag.export`.

        Args:
            path: The folder to write (made whole beside it, then moved into place).
            format: One of :data:`~lmk_rag.export.SAVE_FORMATS`.
            overwrite: Replace an existing folder (never one this encoder was loaded from).

        Returns:
            The folder written.

        Raises:
            InvalidInputError: An unknown format, or a folder that exists without ``overwrite``.
        """
        from .export import save_encoder

        return save_encoder(self, os.fspath(path) if isinstance(path, os.PathLike) else path, format, overwrite)

    # ------------------------------------------------------------------ pipeline
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text by this model's tokenizer (the context builder's default budget
        unit; see :func:`~lmk_rag.encoding.tokenization.budget_tokens`)."""
        return budget_tokens(self._text_tokenizer, check_texts(texts))

    def tokenize(self, texts: list[str], prefix: str = "") -> TokenizedBatch:
        """Batched fast-tokenizer calls -> flat ids and character offsets into ``texts``
        (:func:`~lmk_rag.encoding.tokenization.tokenize_texts`)."""
        return tokenize_texts(self._text_tokenizer, texts, prefix)

    def chunk(self, batch: TokenizedBatch, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Chunk ends per text for this encoder's granularity."""
        ends, offsets = self._chunk_ends(batch, texts)
        if self._final_landmark:
            return add_final_landmark(ends, offsets, batch.n_tokens)
        return ends, offsets

    def _chunk_ends(self, batch: TokenizedBatch, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return granularity_chunk_ends(
            batch,
            self.granularity,
            whole_window=self.max_length - self._prefix_len - 1 - int(self._final_landmark),
            rng=self._rng,
            sentences=lambda: [sentence_starts(t, self.sentence_language) for t in texts],
            sentence_max_tokens=self.sentence_max_tokens,
        )

    def reseed(self, seed: int | Sequence[int]) -> None:
        """Restart the per-text draw of k of a variable granularity from ``seed`` (training replays
        each step's draw from its (seed, step))."""
        self._rng = np.random.default_rng(seed)

    def lay_out(self, texts: list[str], prefix: str = "") -> tuple[TokenizedBatch, Layout, np.ndarray]:
        """Tokenise, truncate (if ``truncate_tokens``), chunk and lay out ``texts``."""
        batch = self.tokenize(texts, prefix)
        dropped = np.zeros(batch.n_texts, dtype=np.int64)
        if self.truncate_tokens is not None:
            batch, dropped = batch.truncate(self.truncate_tokens)
            if dropped.any():
                logger.warning(
                    "truncate_tokens=%d truncated %d of %d texts (%d tokens dropped); unset truncate_tokens "
                    "to encode long texts whole in windows",
                    self.truncate_tokens,
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
        rows = check_int("batch_size", batch_size, 1) if batch_size is not None else self.batch_size
        progress = self.show_progress if show_progress is None else show_progress
        self.forward(seqs, acc, rows, progress)

        pooled = acc.pooled(self.pooling)
        vectors = None
        if want_vectors:
            vectors = acc.chunk_vectors(self.pooling)
        if self.normalize if normalize is None else normalize:
            pooled = l2_normalize(pooled)
            vectors = l2_normalize(vectors) if vectors is not None else None
        check_finite(pooled, self.dtype)
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
