"""A LlamaIndex query engine over the sample corpus with LMK embeddings, offline.

``MockLLM`` stands in for a real LLM so the script runs anywhere; set ``llm=`` to any
LlamaIndex LLM for real answers.

    python examples/llamaindex_query_engine.py ["your question"]
"""

from __future__ import annotations

import sys
from pathlib import Path

from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.embeddings.lmk import LMKEmbedding

CORPUS = Path(__file__).parent / "sample_corpus"


def main(question: str) -> None:
    documents = SimpleDirectoryReader(str(CORPUS), required_exts=[".md"]).load_data()
    # Large nodes are fine: LMK encodes long text whole, landmark by landmark.
    index = VectorStoreIndex.from_documents(
        documents, embed_model=LMKEmbedding(), transformations=[SentenceSplitter(chunk_size=1024)]
    )
    engine = index.as_query_engine(llm=MockLLM(max_tokens=16), similarity_top_k=1)
    response = engine.query(question)
    best = response.source_nodes[0]
    print(f"Q: {question}\nsource: {best.node.metadata['file_name']} (score {best.score:.3f})")


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Why do some coasts have huge tides?")
