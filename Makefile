# `make demo`, `make check` and `make test` each create .venv and install what they need (CPU torch pinned).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch; on a CUDA machine install CUDA torch into .venv first (see README).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha256sum | cut -c1-12)

.PHONY: demo check test lint docs install clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/dicelab sweep experiments/quickstart.yaml
	$(BIN)/dicelab analyze --experiment quickstart --out reports/quickstart

# Test tiers (docs/development.md). `make check`: lint, import contracts and the unit tier (no Ray, no server
# process), on two xdist workers. `make test`: everything, what CI runs: the tests that start no Ray and no
# server on two xdist workers, then the integration tests one after another in one process (sharing its Ray
# cluster and servers), alone on the machine: Ray's fixed start-up waits time out on a busy 2-core machine.
PYTEST_WORKERS ?= 2

check: $(STAMP)
	$(BIN)/ruff check platform tests benchmarks infra
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not integration and not slow"

test: $(STAMP)
	$(BIN)/ruff check platform tests benchmarks infra
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not integration"
	$(BIN)/python -m pytest -q -m integration

lint: $(STAMP)
	$(BIN)/ruff check platform tests benchmarks infra
	$(BIN)/ruff format --check platform tests benchmarks infra

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or missing page fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .dicelab reports site .pytest_cache .ruff_cache
