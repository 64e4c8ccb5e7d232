# Every target makes or reuses .venv by itself: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint fmt unit bench install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,ray]'
	touch $(STAMP)

install: $(STAMP)

## Start the embedded dev cluster with the operator and an example RayCluster.
run: $(STAMP)
	$(BIN)/raycluster-operator dev --watch --nodes tpu:v5p:2x2x2:2 --nodes cpu:1 --apply examples/tpu-v5p-2x2x2-local.yaml

## Lint, type-check, check the layers, then run every test.
test: lint unit

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -q

fmt: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/planning.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
