# Two commands do all the set-up on a fresh machine:
#   make demo   - create .venv, install everything, run the main job on the embedded defaults
#   make test   - the same set-up, then the whole test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test bench

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU torch first, so no multi-GB CUDA build is pulled in by the project's torch>=2.4.
	$(PY) -m pip install -q "torch==2.13.0" || $(PY) -m pip install -q "torch>=2.4" --index-url https://download.pytorch.org/whl/cpu
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) examples/quickstart.py

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) benchmarks/bench_encode.py
	$(PY) benchmarks/bench_layout.py
