# Two commands do all the set-up on a fresh machine:
#   make demo   - create .venv, install everything, ingest + search the sample corpus (embedded defaults)
#   make test   - the same set-up, the quality gates (ruff, mypy), the docs build, the wheel check
#                 (a plain install of the built wheel in a clean venv), then the whole test suite
# Inner loop: make test-fast (no gates, no tests marked slow); make check (the gates alone).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo check docs wheel-check test test-fast bench

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU torch first, so no multi-GB CUDA build is pulled in by the project's torch>=2.4.
	$(PY) -m pip install -q "torch==2.13.0" || $(PY) -m pip install -q "torch>=2.4" --index-url https://download.pytorch.org/whl/cpu
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

# The main job on the embedded defaults: ingest the sample corpus into an embedded Qdrant
# index (./lmk_index, packaged model), then ask it a question.
demo: install
	$(VENV)/bin/lmk-rag ingest examples/sample_corpus --index qdrant:./lmk_index
	$(VENV)/bin/lmk-rag search "How long do solar inverters last?" --index qdrant:./lmk_index -k 3

# Quality gates: lint, formatting, the import layering and types over the whole tree, configured in
# pyproject.toml.
check: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict lmk_rag integrations/langchain/langchain_lmk integrations/llama_index/llama_index

# The documentation site (MkDocs Material + mkdocstrings), built strictly: a broken link fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# What `pip install lmk-rag` gives a user: the wheel, no extras, a clean venv (tests/check_wheel.sh).
wheel-check: install
	PYTHON=$(PYTHON) bash tests/check_wheel.sh

test: check docs wheel-check
	$(PY) -m pytest -q --durations=25

test-fast: install
	$(PY) -m pytest -q -m "not slow"

bench: install
	$(PY) benchmarks/bench_encode.py
	$(PY) benchmarks/bench_layout.py
	$(PY) benchmarks/bench_train.py
