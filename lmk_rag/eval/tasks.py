"""Retrieval tasks: LongEmbed-style needle/passkey documents from any text, and BEIR folders.

A task is a corpus, queries and graded relevance (qrels). Needle tasks also know where the
answer sits (a character span per query), so methods that return passages can be scored
on whether the passage contains it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..corpora.texts import SourceText, is_faq
from ..encoding.sentences import sentence_starts
from ..errors import InvalidInputError

TokenCounter = Callable[[list[str]], np.ndarray]


@dataclass
class RetrievalTask:
    """A corpus, its queries, qrels ``{qid: {doc_id: grade}}``, optional answer spans."""

    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]
    answers: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    query_meta: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.doc_ids) != len(self.doc_texts) or len(self.query_ids) != len(self.query_texts):
            raise InvalidInputError(f"task {self.name!r}: ids and texts differ in length")
        if len(set(self.doc_ids)) != len(self.doc_ids):
            raise InvalidInputError(f"task {self.name!r}: duplicate document ids")


_NAMES = [
    "Alice",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tariq",
    "Ulla",
    "Viktor",
    "Wanda",
    "Xavier",
    "Yara",
    "Zoltan",
    "Amara",
    "Björn",
    "Carmen",
    "Dev",
    "Esme",
    "Felix",
    "Gaia",
    "Hamid",
    "Iris",
    "Jules",
]
_PASSKEY_ITEMS = ["locker", "safe", "bicycle lock", "garage door", "suitcase", "filing cabinet", "mailbox", "gate"]
_FACTS = {
    "favourite fruit": ["quince", "lychee", "persimmon", "gooseberry", "durian", "kumquat", "pomelo", "rambutan"],
    "first car": ["a green Trabant", "a red Fiat Panda", "a white Volvo 240", "a blue Citroën 2CV", "a yellow Beetle"],
    "secret hobby": ["beekeeping", "glass blowing", "competitive yodelling", "origami cranes", "ice sculpture"],
    "home town": ["Tromsø", "Valparaíso", "Matera", "Hobart", "Ushuaia", "Oamaru", "Kotor", "Lijiang"],
    "lucky number": [str(n) for n in (17, 23, 42, 57, 61, 73, 88, 96)],
}


def _needles(kind: str, n: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """n unique (needle sentence, query, answer) triples."""
    pairs = [(name, item) for name in _NAMES for item in (_PASSKEY_ITEMS if kind == "passkey" else list(_FACTS))]
    if n > len(pairs):
        raise InvalidInputError(f"at most {len(pairs)} {kind} documents per length, asked for {n}")
    rng.shuffle(pairs)
    out = []
    for name, item in pairs[:n]:
        if kind == "passkey":
            code = str(rng.randrange(10000, 99999))
            out.append(
                (f"The passkey for {name}'s {item} is {code}.", f"What is the passkey for {name}'s {item}?", code)
            )
        else:
            value = rng.choice(_FACTS[item])
            out.append((f"{name}'s {item} is {value}.", f"What is {name}'s {item}?", value))
    return out


def _sentence_pool(haystack: Sequence[SourceText]) -> list[str]:
    sentences = []
    for source in haystack:
        text = source.text
        bounds = [0, *sentence_starts(text).tolist(), len(text)]
        for a, b in zip(bounds, bounds[1:]):
            s = " ".join(text[a:b].split())
            if 3 <= len(s.split()) <= 80:
                sentences.append(s)
    if len(sentences) < 50:
        raise InvalidInputError(
            "the haystack has too little prose (fewer than 50 sentences); give a larger text folder"
        )
    return sentences


def needle_tasks(
    haystack: Sequence[SourceText],
    count_tokens: TokenCounter,
    *,
    lengths: Sequence[int] = (256, 512, 1024, 2048, 4096),
    positions: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
    docs_per_length: int = 25,
    kind: str = "passkey",
    seed: int = 0,
) -> list[RetrievalTask]:
    """One task per length: documents of about ``length`` tokens of haystack prose, each with
    one unique fact inserted at a relative position (cycled through ``positions``); each query
    asks for one document's fact. Deterministic for a given seed and haystack."""
    if kind not in ("passkey", "needle"):
        raise InvalidInputError(f"kind must be 'passkey' or 'needle', got {kind!r}")
    if not positions or any(not 0.0 <= p <= 1.0 for p in positions):
        raise InvalidInputError("positions must be relative positions between 0.0 and 1.0")
    pool = _sentence_pool(haystack)
    pool_tokens = count_tokens(pool)
    rng = random.Random(seed)
    tasks = []
    for length in lengths:
        needles = _needles(kind, docs_per_length, rng)
        needle_tokens = count_tokens([n for n, _, _ in needles])
        doc_ids, doc_texts, qids, queries = [], [], [], []
        qrels, answers, meta = {}, {}, {}
        for j, ((needle, query, answer), n_tok) in enumerate(zip(needles, needle_tokens)):
            start = rng.randrange(len(pool))
            picked: list[str] = []
            total, i = int(n_tok), start
            while total < length and len(picked) < len(pool):
                picked.append(pool[i % len(pool)])
                total += int(pool_tokens[i % len(pool)])
                i += 1
            position = positions[j % len(positions)]
            at = round(position * len(picked))
            text = " ".join(picked[:at] + [needle] + picked[at:])
            needle_start = text.index(needle)
            answer_start = needle_start + needle.rindex(answer)
            did, qid = f"{kind}-{length}-d{j}", f"{kind}-{length}-q{j}"
            doc_ids.append(did)
            doc_texts.append(text)
            qids.append(qid)
            queries.append(query)
            qrels[qid] = {did: 1}
            answers[qid] = (did, answer_start, answer_start + len(answer))
            meta[qid] = {"position": float(position), "length": float(length)}
        tasks.append(RetrievalTask(f"{kind}-{length}", doc_ids, doc_texts, qids, queries, qrels, answers, meta))
    return tasks


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def beir_task(folder: str | Path, split: str = "test", name: str | None = None) -> RetrievalTask:
    """A BEIR-format folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

    Optional ``spans.jsonl`` lines ``{"query_id", "doc_id", "start", "end"}`` give answer
    spans for passage scoring. FAQ documents (by title) are dropped.
    """
    root = Path(folder)
    for required in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (root / required).is_file():
            raise InvalidInputError(f"{str(root)!r} is not a BEIR folder: {required} is missing")
    corpus = [d for d in _read_jsonl(root / "corpus.jsonl") if not is_faq(str(d.get("title", "")), d.get("text", ""))]
    doc_ids = [str(d["_id"]) for d in corpus]
    doc_texts = [(d.get("title", "") + "\n\n" + d.get("text", "")).strip() for d in corpus]
    qrels: dict[str, dict[str, int]] = {}
    known = set(doc_ids)
    with (root / f"qrels/{split}.tsv").open(encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or parts[0] in ("query-id", "query_id"):
                continue
            qid, did, grade = parts[0], parts[1], int(float(parts[2]))
            if did in known:
                qrels.setdefault(qid, {})[did] = grade
    queries = {str(q["_id"]): q["text"] for q in _read_jsonl(root / "queries.jsonl")}
    query_ids = [q for q in queries if q in qrels]
    answers = {}
    if (root / "spans.jsonl").is_file():
        for s in _read_jsonl(root / "spans.jsonl"):
            answers[str(s["query_id"])] = (str(s["doc_id"]), int(s["start"]), int(s["end"]))
    return RetrievalTask(
        name or root.name, doc_ids, doc_texts, query_ids, [queries[q] for q in query_ids], qrels, answers
    )
