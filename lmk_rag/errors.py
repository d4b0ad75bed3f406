"""The errors lmk-rag raises on purpose, one hierarchy under :class:`LMKError`.

Each class also derives from the built-in exception a caller would expect (``ValueError`` for a
bad value, ``TypeError`` for a wrong type, ``OSError`` for a model that cannot be read, ...), so
``except ValueError`` keeps working. The command line prints an ``LMKError`` as one line (exit 2)
and anything else, a bug, with its traceback (exit 1).
"""

from __future__ import annotations


class LMKError(Exception):
    """Base class: something the user can change (an argument, a path, a model, a server)."""


class InvalidInputError(LMKError, ValueError):
    """An argument has a value that is not allowed; the message names it and what is."""


class InvalidTypeError(LMKError, TypeError):
    """An argument has the wrong type; the message names it and the type expected."""


class IncompatibleIndexError(InvalidInputError):
    """An index was built with other encoder settings than the ones it is opened with."""


class PathNotFoundError(LMKError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class IndexNotFoundError(PathNotFoundError):
    """No lmk-rag index exists at the location given to a read-only command."""


class IndexUnavailableError(LMKError, RuntimeError):
    """An index cannot be opened or reached: server down, folder locked or not a folder."""


class DamagedIndexError(IndexUnavailableError):
    """An index's files cannot be read as written (truncated, overwritten): it must be rebuilt."""


class InsufficientSpaceError(IndexUnavailableError):
    """The disk of an embedded index has too little free space to open or write it safely."""


class ReadOnlyIndexError(IndexUnavailableError):
    """A write to an index that can only be read (read-only media, another user's folder)."""


class ModelLoadError(LMKError, OSError):
    """A model folder or hub id cannot be loaded (missing, empty, unsafe weights)."""


class MissingDependencyError(LMKError, ImportError):
    """An optional extra is needed; the message says which ``pip install`` brings it."""


class NonFiniteVectorError(LMKError, FloatingPointError):
    """The encoder produced NaN or infinite values (fp16 overflow, broken weights)."""


__all__ = [
    "DamagedIndexError",
    "IncompatibleIndexError",
    "IndexNotFoundError",
    "IndexUnavailableError",
    "InsufficientSpaceError",
    "InvalidInputError",
    "InvalidTypeError",
    "LMKError",
    "MissingDependencyError",
    "ModelLoadError",
    "NonFiniteVectorError",
    "PathNotFoundError",
    "ReadOnlyIndexError",
]
