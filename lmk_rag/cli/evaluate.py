"""``lmk-rag eval``: the long-document retrieval benchmark (tasks x methods -> report)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path

from ..encoding.inputs import is_int_in
from ..errors import InvalidInputError
from ..passages import DEFAULT_PASSAGE_RULE, PASSAGE_RULES
from .options import Command, add_encoder_options, encoder_options, floats, ints

# Set by each evaluation method itself, so not options of `lmk-rag eval`.
_EVAL_OWN = ("pooling", "granularity", "truncate_tokens")


EXAMPLE_EVAL = """examples:
  lmk-rag eval --methods lmk:32,chunk:128,bm25 --task passkey --out report/
  lmk-rag eval --task beir:./my_beir_folder --methods lmk:32,bm25"""


def add_parser(command: Command) -> None:
    """The ``eval`` command and its options."""
    ev = command("eval", run_eval, EXAMPLE_EVAL, help="long-document retrieval benchmark of pooling modes")
    add_encoder_options(ev, exclude=_EVAL_OWN)
    ev.add_argument(
        "--methods",
        default="cls,mean,lmk:32,lmk:128,chunk:32,chunk:128,bm25",
        help="comma-separated: cls, mean, lmk:K, chunk:N, bm25 (METHOD@MODEL for another model), or none "
        "(with --export-beir: only write the tasks)",
    )
    ev.add_argument(
        "--task",
        action="append",
        default=None,
        help="passkey, needle, sections (section headings of long documentation pages as queries), "
        "sections-short (headings vs sections of <= 256 tokens), domains:SPLIT|NAMES (the sections task on "
        "other projects' documentation, one task per domain: SPLIT is train, dev or test; NAMES e.g. "
        "git,postgresql), domains-short:SPLIT|NAMES, faq:SPLIT|NAMES (FAQ questions as queries, their answers "
        "as spans: SPLIT is dev or test; NAMES e.g. debian,git), or beir:FOLDER (repeatable; default passkey)",
    )
    ev.add_argument(
        "--docs-root",
        default=None,
        help="folder holding one `dpkg -x` of each documentation package, for the domains and faq tasks "
        "(default: $LMK_DOCS_ROOT, else / for installed packages)",
    )
    ev.add_argument(
        "--export-beir",
        default=None,
        metavar="DIR",
        help="also write every task as a BEIR folder DIR/TASK (corpus, queries, qrels, answer spans)",
    )
    ev.add_argument(
        "--docs-folder",
        default=None,
        help="reST documentation sources for the sections tasks (default: $LMK_PYTHON_DOCS, else "
        "/usr/share/doc/python3*/html/_sources); the eval half of its pages is used",
    )
    ev.add_argument(
        "--haystack",
        default="python-docs",
        help="folder of text for needle documents, or 'python-docs' (the eval half of CPython's docs)",
    )
    ev.add_argument(
        "--lengths",
        type=ints,
        default=[256, 512, 1024, 2048, 4096],
        help="passkey/needle document lengths in tokens, comma-separated (default 256,...,4096)",
    )
    ev.add_argument(
        "--positions",
        type=floats,
        default=[0.0, 0.25, 0.5, 0.75, 1.0],
        help="where the needle sits, as fractions of the document, comma-separated (default 0,0.25,...,1)",
    )
    ev.add_argument("--docs-per-length", type=int, default=25, help="passkey/needle documents per length (default 25)")
    ev.add_argument("--beir-split", default="test", help="qrels split of beir:FOLDER tasks (default test)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the tasks' sampling and the statistics (default 0)")
    ev.add_argument(
        "--passage",
        default=DEFAULT_PASSAGE_RULE,
        help=f"passage rule of the multi-vector lmk rows (as `lmk-rag search --passage`): one of {PASSAGE_RULES}, "
        "or several joined by commas (`peak,region`: one row per rule from one encoding)",
    )
    ev.add_argument(
        "--baseline",
        default=None,
        help="a method's row name as the report prints it (e.g. mean-truncated@all-MiniLM-L6-v2): every other row "
        "gets its paired difference to it per task and over the tasks, with a 95%% bootstrap interval and a "
        "randomization-test p (nDCG@10, and passage hit@1 where both have it)",
    )
    ev.add_argument(
        "--context-tokens",
        type=ints,
        default=None,
        metavar="B,B,...",
        help="also measure what reaches the LLM: answer recall / hit / full of contexts of B tokens "
        "(e.g. 256,512,1024) from chunk-then-embed (128 and 256 tokens, LangChain's and LlamaIndex's "
        "splitters), BM25 over chunks, and lmk-rag's context builder",
    )
    ev.add_argument(
        "--context-chunk-model",
        default="sentence-transformers/all-MiniLM-L6-v2",
        help="model of the chunk-then-embed context rows (default: the packaged base, all-MiniLM-L6-v2)",
    )
    ev.add_argument("--out", default="eval_report", help="folder for report.md, report.json and plots")
    ev.add_argument("--title", default="lmk-rag eval", help="title of the report")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_eval(args: argparse.Namespace) -> int:
    """Build the tasks, run the methods over them and write the report."""
    argv: Sequence[str] = args.argv
    from ..corpora.domains import domains_of
    from ..corpora.rst import read_rst_pages
    from ..encoder import LMKEncoder
    from ..eval import beir_task, default_haystack, evaluate, needle_tasks, parse_methods, read_folder, write_report
    from ..eval.domains import domain_tasks, export_beir
    from ..eval.sections import section_task, short_section_task
    from ..eval.significance import PairedComparison, compare_to_baseline

    kwargs = encoder_options(args)
    methods = parse_methods(args.methods, passage=args.passage, **kwargs) if args.methods != "none" else []
    counter = LMKEncoder(**kwargs)
    tasks = []
    pages = None
    for spec in args.task or ["passkey"]:
        if spec.startswith("beir:"):
            tasks.append(beir_task(spec[5:], split=args.beir_split))
        elif spec in ("sections", "sections-short"):
            pages = pages if pages is not None else read_rst_pages(args.docs_folder, split="eval")  # parse once
            count = lambda xs: counter.tokenize(xs).n_tokens
            tasks.append(
                section_task(pages, count, seed=args.seed) if spec == "sections" else short_section_task(pages, count)
            )
        elif spec.startswith(("domains:", "domains-short:")):
            kind, _, which = spec.partition(":")
            count = lambda xs: counter.tokenize(xs).n_tokens
            tasks += domain_tasks(
                domains_of(which), count, root=args.docs_root, short=kind == "domains-short", seed=args.seed
            )
        elif spec.startswith("faq:"):
            from ..corpora.faqs import faq_sources_of
            from ..eval.faqs import faq_task

            tasks.append(faq_task(faq_sources_of(spec[4:]), root=args.docs_root, name=f"faq-{spec[4:]}"))
        elif spec in ("passkey", "needle"):
            haystack = default_haystack("eval") if args.haystack == "python-docs" else read_folder(args.haystack)
            tasks += needle_tasks(
                haystack,
                lambda xs: counter.tokenize(xs).n_tokens,
                lengths=args.lengths,
                positions=args.positions,
                docs_per_length=args.docs_per_length,
                kind=spec,
                seed=args.seed,
            )
        else:
            raise InvalidInputError(
                f"unknown task {spec!r}; use passkey, needle, sections, sections-short, domains:SPLIT, "
                "domains-short:SPLIT, faq:SPLIT or beir:FOLDER"
            )
    if args.export_beir:
        for task in tasks:
            print(f"wrote {export_beir(task, Path(args.export_beir) / task.name)}")
    budgets = args.context_tokens or []
    if not all(is_int_in(b, 1) for b in budgets):
        raise InvalidInputError(f"--context-tokens must be positive token budgets, got {budgets}")
    if not methods and not budgets:
        return 0
    rows = evaluate(tasks, methods, progress=not args.no_progress) if methods else []
    if budgets:
        from ..eval.contexts import context_rows

        chunk_encoder = LMKEncoder(args.context_chunk_model, pooling="mean", granularity=None)
        rows += context_rows(tasks, budgets, counter, chunk_encoder, progress=not args.no_progress)
    command = "lmk-rag " + " ".join(shlex.quote(a) for a in argv)
    settings = {k: v for k, v in vars(args).items() if k not in ("run", "argv")}  # the options, for the report
    comparisons: list[PairedComparison] = []
    wrong_baseline: InvalidInputError | None = None
    if args.baseline:
        try:
            comparisons = compare_to_baseline(rows, args.baseline, seed=args.seed)
        except InvalidInputError as e:
            wrong_baseline = e  # the evaluation is not thrown away: the report is written, then the error
    paths = write_report(
        rows,
        args.out,
        title=args.title,
        command=command,
        settings=settings,
        comparisons=comparisons,
    )
    print(paths["markdown"].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if wrong_baseline is not None:
        raise InvalidInputError(f"--baseline: {wrong_baseline} (the report above was written without the comparison)")
    return 0
