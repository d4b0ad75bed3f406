"""lmk-rag: Landmark (LMK) pooling for dense retrieval and RAG.

``LMKEncoder`` turns texts into one pooled vector each, or one vector per landmark with
the character span it covers; long texts are encoded in overlapping windows, never cut.
"""

from .encoder import LMKEncoder
from .types import Fingerprint, MultiVector

__all__ = ["Fingerprint", "LMKEncoder", "MultiVector", "__version__"]
__version__ = "0.1.0"
