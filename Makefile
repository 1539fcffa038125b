# `make demo`, `make check` and `make test` each create .venv and install what they need (CPU torch pinned).
# torch: the files pip chooses, since pip finds the CPU wheel where it is configured to look (uv does not
# read pip's configuration and would fetch a multi-GB CUDA build), installed by uv (infra/scripts/
# install_torch.py: 25 s instead of 48); the rest with uv, which downloads and installs in parallel (about a
# minute instead of three on 2 cores), byte-compiled at install as pip does (so the first `make demo` does
# not pay for it); pip wherever uv cannot be installed or fails.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch; on a CUDA machine install CUDA torch into .venv first (see README).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha256sum | cut -c1-12)
# dicelab's own bytecode, written here because an environment with PYTHONDONTWRITEBYTECODE set (containers and
# CI images often set it) has no process write it: every Ray worker and every command the tests run would
# compile the modules it imports again (about 0.2 CPU-s a process; the suite starts a few hundred).
# Incremental: only changed files are compiled.
BYTECODE := $(BIN)/python -m compileall -q platform tests benchmarks
# pytest with bytecode writing on: pytest keeps each test module's assertion-rewritten code beside its bytecode
# and reuses it while the test file is unchanged, but writes it only where Python may write bytecode. Without
# it, every pytest worker parses and rewrites all 250 test modules again (about 5 CPU-s of each worker's
# collection, 2026-11-27, the 2-core AMD EPYC).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

# The tools' caches live in .venv (pytest's: pyproject's cache_dir), so that `make test` adds nothing to the
# repository's root but .venv.
TOOL_CACHE := $(VENV)/.cache
RUFF := $(BIN)/ruff  # its cache: pyproject's cache-dir
LINT_IMPORTS := $(BIN)/lint-imports --cache-dir $(TOOL_CACHE)/import-linter

.PHONY: demo check test integration lint docs install clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv || true
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python infra/scripts/install_torch.py "$(TORCH_SPEC)"
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[dev]" \
		|| $(BIN)/python -m pip install --quiet -e ".[dev]"
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BYTECODE)
	$(BIN)/dicelab sweep experiments/quickstart.yaml
	$(BIN)/dicelab analyze --experiment quickstart --out reports/quickstart

# Test tiers (docs/development.md). `make check`: lint, import contracts and the unit tier (no Ray, no server
# process), on two xdist workers. `make test`: everything, what CI runs, in one pytest session on two workers
# a file at a time (a file's tests share one worker's Ray cluster and servers): the longest files first
# (tests/conftest.py LONGEST_FIRST), then the short ones filling in until both workers end, and one collection
# per worker (about 30 CPU-s each) instead of one per tier. `make integration`: the integration tier alone.
PYTEST_WORKERS ?= 2
BY_FILE := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

check: $(STAMP)
	$(BYTECODE)
	$(RUFF) check platform tests benchmarks infra
	$(LINT_IMPORTS)
	$(PYTEST) -q -n $(PYTEST_WORKERS) -m "not integration and not slow"

test: $(STAMP)
	$(BYTECODE)
	$(RUFF) check platform tests benchmarks infra
	$(LINT_IMPORTS)
	$(PYTEST) -q $(BY_FILE)

integration: $(STAMP)
	$(BYTECODE)
	$(PYTEST) -q -m integration $(BY_FILE)

lint: $(STAMP)
	$(RUFF) check platform tests benchmarks infra
	$(RUFF) format --check platform tests benchmarks infra

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or missing page fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .dicelab reports site .pytest_cache .ruff_cache .import_linter_cache
