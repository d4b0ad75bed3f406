"""lmk-rag: Landmark (LMK) pooling for dense retrieval and RAG.

``LMKEncoder`` turns texts into one pooled vector each, or one vector per landmark with
the character span it covers; long texts are encoded in overlapping windows, never cut.
"""

from ._version import __version__
from .encoder import LMKEncoder
from .errors import (
    DamagedIndexError,
    IncompatibleIndexError,
    IndexNotFoundError,
    IndexUnavailableError,
    InsufficientSpaceError,
    InvalidInputError,
    InvalidTypeError,
    LMKError,
    MissingDependencyError,
    ModelLoadError,
    NonFiniteVectorError,
    PathNotFoundError,
    ReadOnlyIndexError,
)
from .folders.loading import clear_model_cache
from .types import Fingerprint, MultiVector

__all__ = [
    "DamagedIndexError",
    "Fingerprint",
    "IncompatibleIndexError",
    "IndexNotFoundError",
    "IndexUnavailableError",
    "InsufficientSpaceError",
    "InvalidInputError",
    "InvalidTypeError",
    "LMKEncoder",
    "LMKError",
    "MissingDependencyError",
    "ModelLoadError",
    "MultiVector",
    "NonFiniteVectorError",
    "PathNotFoundError",
    "ReadOnlyIndexError",
    "__version__",
    "clear_model_cache",
]
