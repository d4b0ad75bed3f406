"""From landmark scores to what the LLM reads: passages that fit a token budget.

A search ranks documents and scores every landmark of each against the query. The context
builder (:func:`build_context`, with a :class:`ContextRule`) turns those scores into passages:

1. **Scores per landmark**: the query's similarity to each landmark, z-normalised over all the
   candidates' landmarks, fused with BM25 of the query's words in the landmark's own text
   (``lexical_weight``), blended with the neighbourhood's (``peak_weight``) and, by
   ``rank_weight``, with the document's place in the ranking.
2. **Cover**: the best landmarks become passages of their own, in several documents when the
   ranking is unsure, before any passage widens (``seeds``, ``cover_share`` of the budget): what
   single landmarks would find is not lost to one document's long passage.
3. **Widen**: then the budget goes, best first, to new seeds or to a chosen passage's neighbours,
   which count ``widen_bonus`` more (answers run on), up to ``width`` landmarks a passage.
4. **Boundaries**: ends move out to the nearest sentence or paragraph boundary within
   ``snap_chars`` characters; passages of one document that would touch are one passage.
5. **Budget**: exact token counts; a passage that does not fit loses edge landmarks or is clipped
   at a sentence end, and is dropped instead when under ``min_passage_tokens`` (unless its whole
   document is that short, or it is the context's only passage).

A relevance floor, ``min_score`` (a cosine: the scale of a hit's ``similarity``), lets a passage
start only at a landmark at least that similar to the query, so an off-topic question gets a
short or empty context (:data:`OFF_TOPIC_MIN_SCORE` for the packaged model). The defaults were
chosen on heading-style and question-style dev sets (docs/results.md).
"""

from .builder import OFF_TOPIC_MIN_SCORE, build_context, check_min_score
from .counting import BatchCounter, check_max_tokens, token_counter_of, user_counter
from .encoded import context
from .model import CONTEXT_DOCUMENTS, DEFAULT_MAX_TOKENS, DEFAULT_RULE, Candidate, ContextRule, Passage, ScoredDocument

__all__ = [
    "CONTEXT_DOCUMENTS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_RULE",
    "OFF_TOPIC_MIN_SCORE",
    "BatchCounter",
    "Candidate",
    "ContextRule",
    "Passage",
    "ScoredDocument",
    "build_context",
    "check_max_tokens",
    "check_min_score",
    "context",
    "token_counter_of",
    "user_counter",
]
