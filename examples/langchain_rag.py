"""A LangChain RAG chain over the sample corpus with LMK embeddings, offline.

The chat model is a fake that echoes its prompt, so the script runs anywhere; swap in any
LangChain chat model (ChatOpenAI, ChatOllama, ...) for real answers.

    python examples/langchain_rag.py ["your question"]
"""

from __future__ import annotations

import sys
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_lmk import LMKEmbeddings

CORPUS = Path(__file__).parent / "sample_corpus"


def main(question: str) -> None:
    docs = [
        Document(page_content=p.read_text(encoding="utf-8"), id=p.name, metadata={"source": p.name})
        for p in sorted(CORPUS.glob("*.md"))
    ]
    # Whole documents, no splitter: long texts are encoded in windows, nothing is cut.
    store = InMemoryVectorStore(LMKEmbeddings())
    store.add_documents(docs)
    retriever = store.as_retriever(search_kwargs={"k": 1})

    prompt = ChatPromptTemplate.from_template("Answer from the context.\nContext: {context}\nQuestion: {question}")
    llm = FakeListChatModel(responses=["(a real chat model would answer here)"])
    sources: list[str] = []

    def format_docs(found: list[Document]) -> str:
        sources.extend(d.metadata["source"] for d in found)
        return "\n\n".join(d.page_content for d in found)

    chain = (
        {"context": retriever | RunnableLambda(format_docs), "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    answer = chain.invoke(question)
    print(f"Q: {question}\nretrieved: {', '.join(sources)}\nA: {answer}")


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "How do I make a sourdough starter?")
