"""What the routes take and give, as pydantic models: they validate requests (a wrong field is a
422 naming it) and write the OpenAPI schema. Shapes follow what clients already speak: OpenAI's
``/v1/embeddings``, TEI's ``/embed``, and for landmarks Elasticsearch's chunked-inference
``{embedding, text_offset: {start, end}}``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from ..context import DEFAULT_MAX_TOKENS
from ..index.base import SearchMode
from ..passages import DEFAULT_PASSAGE_RULE

#: Text to encode: at least one character that is not white space.
Text = Annotated[str, StringConstraints(pattern=r"\S")]
#: A metadata key every backend keeps (lmk_rag.index.filters.METADATA_KEY_RULE).
MetadataKey = Annotated[str, StringConstraints(pattern=r'^(?!_lmk)[^"\\]+$')]
#: A metadata value as an index stores it: flat; ints within 2**53 (compared exactly; the index
#: refuses the others by name, so an int out of range is never read as a float).
MetadataValue = (
    str | Annotated[int, Field(json_schema_extra={"minimum": -(2**53), "maximum": 2**53})] | float | bool | None
)
TOKEN_INPUT = (
    "token ids are not taken: they would be another tokenizer's; send text (LangChain's OpenAIEmbeddings: "
    "check_embedding_ctx_length=False)"
)


def _texts(value: object) -> object:
    """Refuse token-id input (OpenAI's list-of-int forms) with the reason; pydantic checks the rest."""
    if isinstance(value, list) and value and all(isinstance(v, (int, list)) and not isinstance(v, bool) for v in value):
        raise ValueError(TOKEN_INPUT)
    return value


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


class Strict(BaseModel):
    """Unknown fields are refused by name (a misspelt option is not silently ignored), and values
    are not coerced (``"4"`` is not a number, ``0`` not a boolean)."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")


# ---------------------------------------------------------------------------------- embeddings
class EmbeddingsRequest(Strict):
    """OpenAI's embeddings request. Inputs are never truncated: long ones are encoded in windows."""

    input: Text | Annotated[list[Text], Field(min_length=1)] = Field(description="A text or a list of texts.")
    model: str | None = Field(default=None, description="Accepted for compatibility; the server's model answers.")
    encoding_format: Literal["float", "base64"] = Field(default="float", description="base64: little-endian float32.")
    dimensions: int | None = Field(default=None, description="Only the model's own dimension is supported.")
    user: str | None = Field(default=None, description="Accepted for compatibility; not used.")
    input_type: Literal["document", "query"] = Field(
        default="document", description="query: encode with the model's query prefix (asymmetric models)."
    )

    _no_tokens = field_validator("input", mode="before")(_texts)

    @property
    def texts(self) -> list[str]:
        """The inputs as a list."""
        return _as_list(self.input)


class EmbeddingItem(BaseModel):
    """One vector of an embeddings answer."""

    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(BaseModel):
    """Input tokens by the model's tokenizer."""

    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    """OpenAI's embeddings answer."""

    object: Literal["list"] = "list"
    data: list[EmbeddingItem]
    model: str
    usage: Usage


class ModelCard(BaseModel):
    """One entry of ``GET /v1/models``."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "lmk-rag"


class ModelList(BaseModel):
    """OpenAI's model list: the one model this server runs."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


class EmbedRequest(Strict):
    """TEI's ``/embed`` request. ``truncate: true`` is refused: lmk-rag encodes long inputs in
    windows and never cuts them."""

    inputs: Text | Annotated[list[Text], Field(min_length=1)] = Field(description="A text or a list of texts.")
    normalize: bool = Field(default=True, description="Unit-length vectors.")
    truncate: bool | None = Field(
        default=None,
        description="Must be false or absent: nothing is truncated.",
        json_schema_extra={"enum": [False, None]},
    )
    truncation_direction: Literal["left", "right", "Left", "Right"] | None = Field(default=None)
    prompt_name: Literal["query", "document"] | None = Field(
        default=None, description="query: encode with the model's query prefix; default document."
    )

    _no_tokens = field_validator("inputs", mode="before")(_texts)

    @field_validator("truncate")
    @classmethod
    def _never_truncate(cls, value: bool | None) -> bool | None:
        if value:
            raise ValueError(
                "lmk-rag never truncates: a long input is encoded in windows and every token counts; leave truncate "
                "out (or false)"
            )
        return value

    @property
    def texts(self) -> list[str]:
        """The inputs as a list."""
        return _as_list(self.inputs)


class EmbedLandmarksRequest(Strict):
    """One vector per landmark of each input, with the characters it covers."""

    inputs: Text | Annotated[list[Text], Field(min_length=1)] = Field(description="A text or a list of texts.")
    normalize: bool = Field(default=True, description="Unit-length vectors.")

    _no_tokens = field_validator("inputs", mode="before")(_texts)

    @property
    def texts(self) -> list[str]:
        """The inputs as a list."""
        return _as_list(self.inputs)


class TextOffset(BaseModel):
    """Characters ``[start, end)`` of the input."""

    start: int
    end: int


class LandmarkEmbedding(BaseModel):
    """A landmark's vector and the characters of its input it covers."""

    embedding: list[float]
    text_offset: TextOffset


# ---------------------------------------------------------------------------------- index
class SearchRequest(Strict):
    """A search of the server's index."""

    query: str = Field(min_length=1, description="The question or keywords.")
    k: int = Field(default=4, ge=1, le=1000, description="Documents to return.")
    filter: dict[str, object] | None = Field(default=None, description='Metadata filter, e.g. {"lang": "en"}.')
    mode: SearchMode | None = Field(default=None, description="Search mode; default: the index's.")
    neighbours: int = Field(default=0, ge=0, le=64, description="Landmarks to widen each passage by, each side.")
    passage: Literal["peak", "region"] = Field(
        default=DEFAULT_PASSAGE_RULE, description="Which landmark names the passage."
    )
    with_text: bool = Field(default=False, description="Return each document's whole text too.")


class SearchHit(BaseModel):
    """A document that matched, with the passage that matched best."""

    id: str
    score: float = Field(description="Rank score of this search (hybrid: relative, the best is 1.0).")
    similarity: float = Field(description="The best landmark's cosine to the query: an absolute scale.")
    passage: str
    span: TextOffset
    landmark: int
    landmark_span: TextOffset
    metadata: dict[str, object]
    pages: list[int] = Field(default_factory=list, description="PDF pages of the passage (from 1).")
    page_labels: list[str] = Field(default_factory=list)
    text: str | None = None


class SearchResponse(BaseModel):
    """The hits, best first."""

    hits: list[SearchHit]


class ContextRequest(Strict):
    """The context for an LLM: the best passages within a token budget."""

    query: str = Field(min_length=1, description="The question.")
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1, le=1_000_000, description="Token budget of the context.")
    k: int | None = Field(default=None, ge=1, le=1000, description="Documents to draw from; default 10.")
    filter: dict[str, object] | None = Field(default=None, description='Metadata filter, e.g. {"lang": "en"}.')
    mode: SearchMode | None = Field(default=None, description="Search mode; default: the index's.")
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0, description="Relevance floor (a cosine).")


class ContextPassage(BaseModel):
    """A passage of the context: ``text`` is characters ``span`` of document ``id``."""

    id: str
    span: TextOffset
    text: str
    score: float
    tokens: int
    metadata: dict[str, object]
    pages: list[int] = Field(default_factory=list)
    page_labels: list[str] = Field(default_factory=list)


class ContextResponse(BaseModel):
    """The passages, best first, and the tokens they take."""

    passages: list[ContextPassage]
    tokens: int


class DocumentIn(Strict):
    """A whole document to store (replacing one with the same id)."""

    id: str | None = Field(default=None, min_length=1, description="Default: a new id.")
    text: Text
    metadata: dict[MetadataKey, MetadataValue] = Field(default_factory=dict)


class DocumentsRequest(Strict):
    """Documents to upsert, encoded and stored together."""

    documents: list[DocumentIn] = Field(min_length=1)


class DocumentsResponse(BaseModel):
    """The ids stored, in the order given."""

    ids: list[str]


class StoredDocumentOut(BaseModel):
    """A stored document."""

    id: str
    text: str
    metadata: dict[str, object]


class Deleted(BaseModel):
    """The id deleted."""

    deleted: str


class ErrorDetail(BaseModel):
    """What went wrong, what to change, and the field at fault."""

    message: str
    type: str
    param: str | None
    code: int


class ErrorResponse(BaseModel):
    """Every error answer (OpenAI's shape)."""

    error: ErrorDetail


#: The error answers any route may give, for the OpenAPI schema.
ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (401, "Missing or wrong API key"),
        (404, "No such route or document, or no index"),
        (405, "Method not allowed"),
        (413, "Body or inputs over the limits"),
        (422, "A field is wrong; `param` names it"),
        (429, "Too many requests in flight"),
        (503, "Shutting down"),
    )
}


#: Every field name of the request models (an error's location is told apart from union tags by them).
FIELD_NAMES = {
    name
    for model in (
        EmbeddingsRequest,
        EmbedRequest,
        EmbedLandmarksRequest,
        SearchRequest,
        ContextRequest,
        DocumentsRequest,
        DocumentIn,
    )
    for name in model.model_fields
}
