"""Text sources for evaluation and training, all offline, with FAQ pages held out.

FAQ documents (any package's FAQ pages) are reserved for an independent evaluation of the
shipped model, so every loader here drops them (:func:`is_faq`). Sources split into
disjoint halves by a stable hash, so training and evaluation never share a document.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

TEXT_SUFFIXES = (".txt", ".md", ".rst")
_FAQ = re.compile(r"\bF\.?A\.?Q\.?s?\b|frequently[ -]asked", re.IGNORECASE)


def is_faq(name: str, text: str = "") -> bool:
    """True for FAQ pages: by name, or a title/heading that says FAQ or 'frequently asked'."""
    if _FAQ.search(Path(name).stem.replace("_", " ").replace("-", " ")):
        return True
    head = "\n".join(text.lstrip().splitlines()[:3])
    return bool(_FAQ.search(head))


@dataclass(frozen=True)
class SourceText:
    """A named plain text (a file, a page, a docstring)."""

    name: str
    text: str


def split_of(name: str) -> str:
    """'train' or 'eval', by a stable hash of the document name (about half each)."""
    return "train" if int(hashlib.sha1(name.encode()).hexdigest(), 16) % 2 == 0 else "eval"


def read_folder(folder: str | Path, suffixes: Iterable[str] = TEXT_SUFFIXES) -> list[SourceText]:
    """Every readable UTF-8 text file under ``folder`` (sorted), FAQ pages dropped."""
    root = Path(folder)
    if not root.is_dir():
        raise InvalidInputError(f"text folder {str(folder)!r} does not exist or is not a folder")
    suffixes = tuple(suffixes)
    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix.lower() not in suffixes:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        name = str(path.relative_to(root))
        if text.strip() and not is_faq(name, text):
            out.append(SourceText(name, text))
    return out


def python_docs() -> list[SourceText]:
    """The Python language reference topics shipped with CPython (``pydoc_data``)."""
    from pydoc_data.topics import topics

    return [SourceText(f"python-docs/{key}", text) for key, text in sorted(topics.items()) if not is_faq(key, text)]


def package_readmes(min_chars: int = 2000) -> list[SourceText]:
    """Long descriptions (READMEs) of the installed Python distributions, FAQ ones dropped.

    lmk-rag's own README is left out: it holds this project's results tables, and with it every
    README edit would change the default training pairs of an editable install."""
    from importlib.metadata import distributions

    seen: set[str] = {"lmk-rag"}
    out = []
    for dist in distributions():
        meta: Any = dist.metadata  # email.message.Message at run time
        name = (meta.get("Name") or "").lower()
        if not name or name in seen:
            continue
        seen.add(name)
        body = meta.get_payload() if hasattr(meta, "get_payload") else None
        body = body or meta.get("Description") or ""
        if len(body) >= min_chars and not is_faq(name, body):
            out.append(SourceText(f"readme/{name}", strip_faq_sections(body)))
    return sorted(out, key=lambda s: s.name)


_HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.MULTILINE)


def strip_faq_sections(markdown: str) -> str:
    """Remove markdown sections titled FAQ / frequently asked questions (and their subsections)."""
    out, skip_level = [], None
    for line in markdown.splitlines(keepends=True):
        m = _HEADING.match(line.rstrip("\n"))
        if m:
            level = len(m.group(1))
            if skip_level is not None and level <= skip_level:
                skip_level = None
            if skip_level is None and _FAQ.search(m.group(2)):
                skip_level = level
        if skip_level is None:
            out.append(line)
    return "".join(out)


def default_haystack(split: str = "eval") -> list[SourceText]:
    """Python reference docs of one split: prose for needle haystacks, offline everywhere."""
    return [s for s in python_docs() if split_of(s.name) == split]


_STDLIB_MODULES = (
    "argparse",
    "asyncio",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "concurrent.futures",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email",
    "enum",
    "fractions",
    "ftplib",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html.parser",
    "http.client",
    "http.server",
    "imaplib",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "logging",
    "mailbox",
    "math",
    "multiprocessing",
    "operator",
    "os",
    "pathlib",
    "pickle",
    "platform",
    "plistlib",
    "pprint",
    "queue",
    "random",
    "re",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "smtplib",
    "socket",
    "sqlite3",
    "ssl",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "tokenize",
    "traceback",
    "turtle",
    "typing",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "venv",
    "warnings",
    "weakref",
    "xml.etree.ElementTree",
    "zipfile",
    "zoneinfo",
)


def stdlib_docstrings(min_chars: int = 1500) -> list[SourceText]:
    """One document per standard-library module: its docstring and its public members' docstrings."""
    import importlib
    import inspect

    out = []
    for name in _STDLIB_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - optional modules (tkinter, ...) may be missing
            continue
        parts = [inspect.getdoc(module) or ""]
        for member_name, member in sorted(vars(module).items()):
            if member_name.startswith("_") or not (inspect.isclass(member) or inspect.isfunction(member)):
                continue
            doc = inspect.getdoc(member)
            if doc and len(doc) > 80:
                parts.append(f"{member_name}: {doc}")
        text = "\n\n".join(p for p in parts if p)
        if len(text) >= min_chars and not is_faq(name, text):
            out.append(SourceText(f"stdlib/{name}", text))
    return out


def training_texts() -> list[SourceText]:
    """The default training corpus: train halves of the Python docs, stdlib docstrings and READMEs.

    A module's docstrings follow its library page's split (``pydocs/library/<module>``, the
    name the sections task uses), so no eval page is paraphrased in training.
    """
    sources = [s for s in python_docs() + package_readmes() if split_of(s.name) == "train"]
    return sources + [
        s for s in stdlib_docstrings() if split_of(f"pydocs/library/{s.name.removeprefix('stdlib/')}") == "train"
    ]
