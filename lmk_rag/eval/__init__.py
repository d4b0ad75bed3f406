"""Long-document retrieval evaluation: tasks, methods, metrics, reports."""

from ..corpora.texts import default_haystack, is_faq, python_docs, read_folder
from .methods import BM25, ChunkThenEmbed, LandmarkPooling, NativePooling, parse_methods
from .report import write_report
from .runner import EvalRow, evaluate
from .tasks import RetrievalTask, beir_task, needle_tasks

__all__ = [
    "BM25",
    "ChunkThenEmbed",
    "EvalRow",
    "LandmarkPooling",
    "NativePooling",
    "RetrievalTask",
    "beir_task",
    "default_haystack",
    "evaluate",
    "is_faq",
    "needle_tasks",
    "parse_methods",
    "python_docs",
    "read_folder",
    "write_report",
]
