"""``LMKContextPostprocessor``: nodes from any retriever cut down to their best landmark passages."""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.retrievers.lmk.base import passage_to_node

from lmk_rag import LMKEncoder
from lmk_rag.context import DEFAULT_MAX_TOKENS, context
from lmk_rag.errors import InvalidInputError
from lmk_rag.framework_fields import min_score_field, token_counter_field


class LMKContextPostprocessor(BaseNodePostprocessor):
    """Keep your vector store and hand the LLM landmark passages: the nodes a retriever found
    are encoded with LMK and cut down to lmk-rag's context for the query, the best passages
    within ``max_tokens`` tokens. Each passage node keeps its node's metadata, its SOURCE is the
    node's source document, and ``start_char_idx``/``end_char_idx`` are in that document's text
    (when the node knows where it starts).

    **Instantiate**

    ```python
    from llama_index.postprocessor.lmk import LMKContextPostprocessor

    postprocessor = LMKContextPostprocessor(max_tokens=512)
    ```

    **Use with your index**

    ```python
    engine = my_index.as_query_engine(similarity_top_k=10, node_postprocessors=[postprocessor])
    ```"""

    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0, description="Token budget of the passages returned.")
    token_counter: Any = token_counter_field()
    min_score: float | None = min_score_field()
    _encoder: Any = PrivateAttr(default=None)

    def __init__(self, encoder: LMKEncoder | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._encoder = encoder

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex records for this class."""
        return "LMKContextPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise InvalidInputError("LMKContextPostprocessor needs the query (query_bundle) to choose passages")
        if not nodes:
            return []
        if self._encoder is None:
            self._encoder = LMKEncoder()
        texts = [n.node.get_content() for n in nodes]
        names = [str(i) for i in range(len(nodes))]
        encoded = self._encoder.encode_multi(texts)
        passages = context(
            query_bundle.query_str,
            texts,
            encoded,
            self._encoder,
            self.max_tokens,
            ids=names,
            k=len(nodes),
            token_counter=self.token_counter,
            min_score=self.min_score,
        )
        out = []
        for p in passages:
            node = nodes[int(p.id)].node
            source = node.ref_doc_id or node.node_id
            offset = getattr(node, "start_char_idx", None) or 0
            found = passage_to_node(p, source=source, offset=offset)
            found.node.metadata = {**node.metadata}
            out.append(found)
        return out
