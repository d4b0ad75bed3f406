"""A LlamaIndex query engine over the sample corpus: whole documents in, landmark passages to the LLM.

No splitter: each file is stored whole in an embedded Qdrant index, and the retriever hands the
engine lmk-rag's context, the best passages within a token budget. The script prints the context
the LLM receives. ``MockLLM`` stands in for a real LLM so it runs anywhere; set ``llm=`` to any
LlamaIndex LLM for real answers.

    python examples/llamaindex_query_engine.py ["your question"]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from llama_index.core import SimpleDirectoryReader
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.retrievers.lmk import LMKRetriever, ingest_documents

from lmk_rag.index import QdrantIndex

CORPUS = Path(__file__).parent / "sample_corpus"


def main(question: str, folder: str) -> None:
    documents = SimpleDirectoryReader(str(CORPUS), required_exts=[".md"], filename_as_id=True).load_data()
    index = QdrantIndex(path=folder)  # the packaged LMK model, embedded Qdrant
    ingest_documents(index, documents)  # whole documents, no splitter; ids from the file paths
    retriever = LMKRetriever(index, max_tokens=256)  # the context, within 256 tokens
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=16))
    response = engine.query(question)
    nodes = response.source_nodes
    tokens = index.encoder.count_tokens([n.node.get_content() for n in nodes])
    print(f"Q: {question}\nsource: {nodes[0].node.metadata['file_name']} (score {nodes[0].score:.3f})")
    print(f"context the LLM receives: {len(nodes)} passages, {sum(tokens)} tokens")
    for n, t in zip(nodes, tokens):
        start, end = getattr(n.node, "start_char_idx", None), getattr(n.node, "end_char_idx", None)
        print(f"--- {n.node.metadata['file_name']} chars {start}-{end} ({t} tokens)\n{n.node.get_content()}")
    index.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(" ".join(sys.argv[1:]) or "Why do some coasts have huge tides?", str(Path(tmp) / "lmk_index"))
