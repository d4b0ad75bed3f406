"""From landmark scores to what the LLM reads: passages that fit a token budget.

A search ranks documents and scores every landmark of each against the query. The context
builder turns those scores into passages:

1. **Scores per landmark**: the query's similarity to each landmark, z-normalised over all the
   candidates' landmarks, fused with a lexical score of the landmark's own text (BM25 of the
   query's words over the candidates' landmarks; ``lexical_weight``), so an exact term the
   embedding blurs still pulls its passage up.
2. **Seeds**: every landmark is ranked by its score blended with its neighbourhood's
   (:func:`lmk_rag.passages.passage_scores`), and, through ``rank_weight``, by its document's
   place in the ranking. Seeds are taken best first; several peaks of one document become several
   passages.
3. **Growth**: each seed grows to ``width`` landmarks, one at a time toward the better-scoring
   neighbour; regions of one document that overlap or touch are merged, so no text is repeated.
4. **Boundaries**: a passage's ends move out to the nearest sentence or paragraph boundary
   within ``snap_chars`` characters, so the LLM reads whole sentences.
5. **Budget**: passages are added until ``max_tokens`` is reached; the last one is clipped at a
   token (and, where one is near, a sentence) boundary. A budget smaller than one landmark still
   gives one clipped passage.

The defaults (width 4, lexical weight 0.2, rank weight 0.9, 200 characters of snapping) were
chosen on the six out-of-domain *dev* documentation domains among 72 candidates, by answer recall
of a 512-token context, from the Qdrant index's hybrid ranking: 0.466 against 0.402 for the best
chunk-then-embed row (LangChain's splitter), ahead on all six domains and at 256 and 1024 tokens
too (``research/results/context-dev``; ``lmk-rag eval --context-tokens``).
"""

from .builder import build_context
from .counting import BatchCounter, check_max_tokens, token_counter_of, user_counter
from .model import CONTEXT_DOCUMENTS, DEFAULT_RULE, Candidate, ContextRule, Passage, ScoredDocument

__all__ = [
    "CONTEXT_DOCUMENTS",
    "DEFAULT_RULE",
    "BatchCounter",
    "Candidate",
    "ContextRule",
    "Passage",
    "ScoredDocument",
    "build_context",
    "check_max_tokens",
    "token_counter_of",
    "user_counter",
]
