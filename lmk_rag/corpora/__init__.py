"""Document collections that training (:mod:`lmk_rag.train`) and evaluation (:mod:`lmk_rag.eval`)
both read: plain-text sources (:mod:`.texts`), reStructuredText pages and their sections
(:mod:`.rst`) and other projects' documentation trees split by domain (:mod:`.domains`).
Every reader leaves FAQ pages out: they are reserved for an independent evaluation."""

from .domains import DOMAINS, SPLITS, Domain, domains_of, read_domain_pages
from .rst import Page, Section, query_sections, read_rst_pages
from .texts import SourceText, default_haystack, is_faq, python_docs, read_folder, split_of, training_texts

__all__ = [
    "DOMAINS",
    "SPLITS",
    "Domain",
    "Page",
    "Section",
    "SourceText",
    "default_haystack",
    "domains_of",
    "is_faq",
    "python_docs",
    "query_sections",
    "read_domain_pages",
    "read_folder",
    "read_rst_pages",
    "split_of",
    "training_texts",
]
