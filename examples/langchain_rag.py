"""A LangChain RAG chain over the sample corpus: whole documents in, landmark passages to the LLM.

No splitter: each file is stored whole in an embedded Qdrant index, and the store's retriever
hands the chain lmk-rag's context, the best passages within a token budget. The script prints
the context the LLM receives. The chat model is a fake, so it runs anywhere; swap in any
LangChain chat model (ChatOpenAI, ChatOllama, ...) for real answers.

    python examples/langchain_rag.py ["your question"]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from langchain_lmk import LMKVectorStore
from lmk_rag.index import QdrantIndex

CORPUS = Path(__file__).parent / "sample_corpus"


def main(question: str, folder: str) -> None:
    docs = [
        Document(page_content=p.read_text(encoding="utf-8"), id=p.name, metadata={"source": p.name})
        for p in sorted(CORPUS.glob("*.md"))
    ]
    store = LMKVectorStore(index=QdrantIndex(path=folder))  # the packaged LMK model, embedded Qdrant
    store.add_documents(docs)  # whole documents, no splitter
    retriever = store.as_retriever(search_kwargs={"max_tokens": 256})  # the context, within 256 tokens

    prompt = ChatPromptTemplate.from_template("Answer from the context.\nContext:\n{context}\n\nQuestion: {question}")
    llm = FakeListChatModel(responses=["(a real chat model would answer here)"])
    seen: list[Document] = []

    def format_docs(found: list[Document]) -> str:
        seen.extend(found)
        return "\n\n".join(f"[{d.metadata['source']}] {d.page_content}" for d in found)

    chain = (
        {"context": retriever | RunnableLambda(format_docs), "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    answer = chain.invoke(question)
    print(f"Q: {question}\nretrieved: {', '.join(dict.fromkeys(d.metadata['source'] for d in seen))}")
    print(f"context the LLM receives: {len(seen)} passages, {sum(d.metadata['tokens'] for d in seen)} tokens")
    for d in seen:
        m = d.metadata
        print(f"--- {m['source']} chars {m['span_start']}-{m['span_end']} ({m['tokens']} tokens)\n{d.page_content}")
    print(f"A: {answer}")
    store.index.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(" ".join(sys.argv[1:]) or "How do I make a sourdough starter?", str(Path(tmp) / "lmk_index"))
