"""Schemathesis over the server's OpenAPI schema: generated requests, valid and invalid, to every
route never get a 5xx (a bounded number of examples per route and mode)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

EXAMPLES = 8


@pytest.fixture(scope="module")
def served_schema(encoder, tmp_path_factory):
    from lmk_rag.index import QdrantIndex
    from lmk_rag.serve import ServeSettings, create_app
    from tests.serve.conftest import DOCUMENTS

    index = QdrantIndex(path=tmp_path_factory.mktemp("fuzz") / "index", encoder=encoder)
    index.add(list(DOCUMENTS.values()), ids=list(DOCUMENTS))
    app = create_app(encoder, index, ServeSettings(max_inputs=16))
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_generated_request_gets_a_server_error(served_schema, mode):
    operations = [result.ok() for result in served_schema.get_all_operations()]
    assert {op.label for op in operations} >= {"POST /v1/embeddings", "POST /embed", "POST /context", "POST /documents"}
    calls: list[int] = []
    fuzzed = set()
    for operation in operations:

        @given(operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def call(case):
            response = case.call()
            calls.append(response.status_code)
            case.validate_response(response, checks=[not_a_server_error])

        try:
            call()
        except Unsatisfiable:  # no invalid request exists for a route without a body (GET /health)
            assert mode is GenerationMode.NEGATIVE and operation.method.upper() in ("GET", "DELETE")
            continue
        fuzzed.add(operation.label)
    assert {op.label for op in operations if op.method.upper() == "POST"} <= fuzzed
    assert calls and all(status < 500 for status in calls)
