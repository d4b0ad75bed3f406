"""A LlamaIndex query engine over the sample corpus: whole documents in, landmark passages to the LLM.

The usual LlamaIndex code (``VectorStoreIndex.from_documents`` with a ``StorageContext``), over
``LMKVectorStore``: each file is stored whole in an embedded Qdrant index (no splitter to tune),
and the query engine hands the LLM lmk-rag's context, the best passages within a token budget,
each passage headed by its file_path (as stock LlamaIndex shows it), the other file metadata kept
out of the prompt. The script prints the context the LLM receives.
``MockLLM`` stands in for a real LLM so it runs anywhere; set ``llm=`` to any LlamaIndex LLM for
real answers.

    python examples/llamaindex_query_engine.py ["your question"]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import MetadataMode
from llama_index.vector_stores.lmk import LMKVectorStore

from lmk_rag.index import QdrantIndex

CORPUS = Path(__file__).parent / "sample_corpus"


def main(question: str, folder: str) -> None:
    documents = SimpleDirectoryReader(str(CORPUS), required_exts=[".md"]).load_data()
    store = LMKVectorStore(QdrantIndex(path=folder), max_tokens=256)  # packaged LMK model, embedded Qdrant
    index = VectorStoreIndex.from_documents(  # each file stored whole; its path is its id
        documents,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=store.embed_model,  # the store encodes; LlamaIndex need not embed chunks
    )
    engine = index.as_query_engine(llm=MockLLM(max_tokens=16), similarity_top_k=8)  # any LlamaIndex LLM
    response = engine.query(question)
    nodes = response.source_nodes
    shown = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]  # what the prompt holds
    tokens = store.index.encoder.count_tokens(shown)
    passages = store.index.encoder.count_tokens([n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes])
    print(f"Q: {question}\nsource: {nodes[0].node.metadata['file_name']} (score {nodes[0].score:.3f})")
    print(
        f"context the LLM receives: {len(nodes)} passages, {sum(passages)} tokens "
        f"({sum(tokens)} with their file_path lines)"
    )
    for n, text, t in zip(nodes, shown, tokens):
        start, end = getattr(n.node, "start_char_idx", None), getattr(n.node, "end_char_idx", None)
        print(f"--- {n.node.metadata['file_name']} chars {start}-{end} ({t} tokens)\n{text}")
    store.index.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(" ".join(sys.argv[1:]) or "Why do some coasts have huge tides?", str(Path(tmp) / "lmk_index"))
