"""Long-document retrieval evaluation: tasks, methods, metrics, reports."""

from .corpora import default_haystack, is_faq, python_docs, read_folder
from .methods import BM25, ChunkThenEmbed, LandmarkPooling, NativePooling, parse_methods
from .report import write_report
from .runner import EvalRow, evaluate
from .tasks import RetrievalTask, beir_task, needle_tasks

__all__ = [
    "RetrievalTask", "needle_tasks", "beir_task", "read_folder", "python_docs", "default_haystack", "is_faq",
    "NativePooling", "LandmarkPooling", "ChunkThenEmbed", "BM25", "parse_methods", "evaluate", "EvalRow",
    "write_report",
]
