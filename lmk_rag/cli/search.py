"""``lmk-rag search``: ranked documents with the matched passage, or (``--context``) the passages to
hand an LLM within a token budget."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..passages import DEFAULT_PASSAGE_RULE, PASSAGE_RULES
from .options import Command, add_index_options, json_filter, open_index_of

EXAMPLE_SEARCH = """examples:
  lmk-rag search "how do I rotate the keys?" --index qdrant:./lmk_index -k 5
  lmk-rag search "E4711 error" --mode hybrid --json
  lmk-rag search "release notes" --filter '{"year": {"$gte": 2024}, "lang": {"$in": ["en", "de"]}}'
  lmk-rag search "how do I rotate the keys?" --context 512   # the passages to hand an LLM"""


def add_parser(command: Command) -> None:
    """The ``search`` command and its options."""
    se = command("search", run_search, EXAMPLE_SEARCH, help="ranked documents with the matched passage")
    se.add_argument("query", help="the question or keywords to search for")
    add_index_options(se, runtime_only=True)
    se.add_argument(
        "-k",
        type=int,
        default=None,
        help="documents to return (default 5); with --context, the documents the passages are drawn from (default 10)",
    )
    se.add_argument(
        "--context",
        type=int,
        default=None,
        metavar="TOKENS",
        help="print the context to hand an LLM instead: the best passages within TOKENS tokens (e.g. 512)",
    )
    se.add_argument(
        "--token-counter",
        default=None,
        metavar="TOKENIZER",
        help="with --context: count TOKENS with this tokenizer (a folder holding your LLM's tokenizer.json); "
        "default: the index's encoder",
    )
    se.add_argument(
        "--min-score",
        type=float,
        default=None,
        metavar="COSINE",
        help="with --context: a passage starts only at a landmark at least this similar to the query (a cosine "
        "in [-1, 1], the scale of a hit's similarity; 0.35 empties most off-topic contexts for the packaged "
        "model); default: no floor",
    )
    se.add_argument(
        "--mode",
        default=None,
        choices=("hybrid", "prefetch", "maxsim", "pooled"),
        help="qdrant: hybrid (default: BM25 and MaxSim candidates fused), prefetch (candidates from the landmark "
        "index, exact MaxSim), maxsim (exact), pooled; chroma: maxsim (default) or pooled",
    )
    se.add_argument(
        "--filter",
        type=json_filter,
        default=None,
        metavar="JSON",
        help='metadata filter as JSON: {"lang": "en"}, ranges {"year": {"$gte": 2020}}, $in/$nin/$ne, $and/$or '
        "(see the docs, Concepts: Metadata filters)",
    )
    se.add_argument("--neighbours", type=int, default=1, help="landmarks of context each side of the passage")
    se.add_argument(
        "--passage",
        default=DEFAULT_PASSAGE_RULE,
        choices=PASSAGE_RULES,
        help="which landmark names the passage: region (default: the one whose neighbourhood matches best) or "
        "peak (the single best landmark); see lmk_rag/passages.py",
    )
    se.add_argument("--json", action="store_true", help="machine-readable output")


_CONTEXT_CHARS = 160


def shown_id(doc_id: str) -> str:
    """A document id as printed: a file's path relative to the working folder when it lies inside
    it (ids are absolute paths; ``--json`` prints them whole)."""
    if not doc_id.startswith("/"):
        return doc_id
    try:
        return Path(doc_id).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return doc_id


def _highlight(hit: Any, tty: bool) -> str:
    """The matched span marked inside up to ``_CONTEXT_CHARS`` of its paragraph on each side, on one
    line: hard-wrapped text keeps its context (only a blank line ends it), cut at whole words."""
    text, (a, b) = hit.text, hit.span
    core = text[a:b]
    if core.strip():  # whitespace at the span's edges is context, so the marks hug the words
        a, b = a + len(core) - len(core.lstrip()), b - (len(core) - len(core.rstrip()))
    lo, hi = max(0, a - _CONTEXT_CHARS), min(len(text), b + _CONTEXT_CHARS)
    before, after = text[lo:a].split("\n\n")[-1], text[b:hi].split("\n\n")[0]
    cut_before = lo > 0 and len(before) == a - lo  # neither the text's nor the paragraph's start
    cut_after = hi < len(text) and len(after) == hi - b
    if cut_before and not text[lo - 1].isspace():
        before = re.sub(r"^\S+", "", before)  # no half word
    if cut_after and not text[hi].isspace():
        after = re.sub(r"\S+$", "", after)
    mark = ("\033[1m", "\033[0m") if tty else ("[[", "]]")
    line = " ".join(f"{before}{mark[0]}{text[a:b]}{mark[1]}{after}".split())
    return f"{'...' if cut_before else ''}{line}{'...' if cut_after else ''}"


def run_search(args: argparse.Namespace) -> int:
    """``lmk-rag search QUERY``: ranked documents with the matched passage highlighted (``--json``:
    every field), or with ``--context`` the passages to hand an LLM."""
    import json

    if args.context is not None:
        return run_context(args)
    if args.token_counter is not None:
        raise InvalidInputError("--token-counter counts a context's budget: add --context TOKENS")
    if args.min_score is not None:
        raise InvalidInputError("--min-score is a context's relevance floor: add --context TOKENS")
    index = open_index_of(args, must_exist=True)
    try:
        k = 5 if args.k is None else args.k
        hits = index.search(
            args.query, k=k, filter=args.filter, mode=args.mode, neighbours=args.neighbours, passage=args.passage
        )
    finally:
        index.close()
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": h.id,
                        "score": h.score,
                        "similarity": h.similarity,
                        "landmark": h.landmark,
                        "span": list(h.span),
                        "landmark_span": list(h.landmark_span),
                        "passage": h.passage,
                        "pages": list(h.pages),
                        "page_labels": list(h.page_labels),
                        "metadata": h.metadata,
                    }
                    for h in hits
                ],
                indent=2,
            )
        )
        return 0
    tty = sys.stdout.isatty()
    for rank, hit in enumerate(hits, 1):
        print(
            f"{rank}. {shown_id(hit.id)}  score {hit.score:.3f}  similarity {hit.similarity:.3f}  "
            f"chars {hit.span[0]}-{hit.span[1]}{shown_pages(hit.page_labels)}"
        )
        print("   " + _highlight(hit, tty))
    if not hits:
        print("no results")
    return 0


def shown_pages(labels: tuple[str, ...]) -> str:
    """``  p. 12`` / ``  pp. 12-13`` for a passage of a paged document (a PDF); "" otherwise."""
    if not labels:
        return ""
    return f"  p. {labels[0]}" if len(labels) == 1 else f"  pp. {labels[0]}-{labels[-1]}"


def run_context(args: argparse.Namespace) -> int:
    """``search --context TOKENS``: the passages an LLM should read, best first, within the budget."""
    import json

    from ..context import check_max_tokens, check_min_score
    from ..encoding.tokenization import load_token_counter

    check_max_tokens(args.context)  # before the model loads
    check_min_score(args.min_score)
    if args.token_counter is not None:
        load_token_counter(args.token_counter)  # a tokenizer that cannot be loaded: said before the model loads
    index = open_index_of(args, must_exist=True)
    try:
        passages = index.context(
            args.query,
            args.context,
            k=args.k,
            filter=args.filter,
            mode=args.mode,
            token_counter=args.token_counter,
            min_score=args.min_score,
        )
    finally:
        index.close()
    if args.json:
        print(
            json.dumps(
                [
                    {**dataclasses.asdict(p), "pages": list(p.pages), "page_labels": list(p.page_labels)}
                    for p in passages
                ],
                indent=2,
            )
        )
        return 0
    total = sum(p.tokens for p in passages)
    print(f"context for {args.query!r}: {len(passages)} passages, {total} of {args.context} tokens")
    for rank, p in enumerate(passages, 1):
        print(
            f"\n[{rank}] {shown_id(p.id)}  chars {p.span[0]}-{p.span[1]}{shown_pages(p.page_labels)}  "
            f"{p.tokens} tokens  score {p.score:.2f}"
        )
        print(p.text.strip())
    if not passages:
        print("no results")
    return 0
