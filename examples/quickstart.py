"""Quick start: encode the sample corpus with LMK multi-vectors and answer questions.

Each document gets one vector per landmark (every 32 tokens) with the character span it
covers; a query is scored against every landmark (MaxSim), so the answer comes with the
passage that matched. Runs offline on the packaged model.

    python examples/quickstart.py ["your question"]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lmk_rag import LMKEncoder

CORPUS = Path(__file__).parent / "sample_corpus"
QUESTIONS = [
    "How often should I check my tyre pressure?",
    "Why are there two high tides a day?",
    "What does grey liquid on a sourdough starter mean?",
    "How many copies of the Gutenberg Bible were printed?",
    "How long do solar inverters last?",
]


def main(questions: list[str]) -> None:
    paths = sorted(CORPUS.glob("*.md"))
    texts = [p.read_text(encoding="utf-8") for p in paths]
    encoder = LMKEncoder()
    docs = encoder.encode_multi(texts)
    print(f"encoded {len(docs)} documents into {sum(len(d) for d in docs)} landmark vectors ({encoder})")
    for question in questions:
        q = encoder.encode_query(question)
        scores = [(d.vectors @ q) for d in docs]
        best_doc = int(np.argmax([s.max() for s in scores]))
        best_lmk = int(np.argmax(scores[best_doc]))
        passage = docs[best_doc].passage(texts[best_doc], best_lmk).strip().replace("\n", " ")
        print(f"\nQ: {question}\n-> {paths[best_doc].name} (score {scores[best_doc][best_lmk]:.3f})\n   {passage}")


if __name__ == "__main__":
    main(sys.argv[1:] or QUESTIONS)
