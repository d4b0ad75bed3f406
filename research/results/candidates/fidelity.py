"""The measurement behind distillation-sweep.md: landmark fidelity and passkey top-1 of one model.

    python docs/results/candidates/fidelity.py MODEL_FOLDER [passkey|needle]

Fidelity = mean cosine between each landmark vector (k=32) and the base model's mean-pooled
embedding of that landmark's chunk alone (what distillation aims at). Top-1 is multi-vector
(MaxSim) retrieval over passkey documents of 512 and 2048 tokens with the model's own queries,
the base model's queries, and either against the base model's chunk embeddings.
"""

import sys

import numpy as np

from lmk_rag import LMKEncoder
from lmk_rag.eval import default_haystack, needle_tasks
from lmk_rag.models import DEFAULT_MODEL

model = sys.argv[1]
kind = sys.argv[2] if len(sys.argv) > 2 else "passkey"
base = LMKEncoder(model=DEFAULT_MODEL, pooling="mean", granularity=None)
enc = LMKEncoder(model=model, granularity=32)
tasks = needle_tasks(default_haystack("eval"), lambda xs: base.tokenize(xs).n_tokens, lengths=[512, 2048], kind=kind)
for t in tasks:
    multi = enc.encode_multi(t.doc_texts)
    counts = np.array([len(m) for m in multi]); starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    V = np.concatenate([m.vectors for m in multi]); spans = np.concatenate([np.asarray(m.spans) for m in multi])
    doc_of = np.repeat(np.arange(len(multi)), counts)
    chunk_texts = [t.doc_texts[d][a:b] for d, (a, b) in zip(doc_of, spans)]
    T = base.encode(chunk_texts)
    cos = (V * T).sum(1)
    def top1(q, vecs):
        s = np.maximum.reduceat(q @ vecs.T, starts, axis=1)
        return (s.argmax(1) == np.arange(len(q))).mean()
    qs, qt = enc.encode_query(t.query_texts), base.encode_query(t.query_texts)
    print(t.name, f"fidelity cos mean {cos.mean():.3f} p10 {np.percentile(cos,10):.3f}",
          f"| top1 student-q/LMK {top1(qs,V):.2f} teacher-q/LMK {top1(qt,V):.2f} teacher-q/teacher-chunks {top1(qt,T):.2f} student-q/teacher-chunks {top1(qs,T):.2f}", flush=True)
