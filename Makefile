# kopf-dra: `make run` starts the system on the local control plane; `make test` checks everything.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CONTROL_PLANE_DIR ?= $(HOME)/.cache/kopf-dra/local
export KOPF_DRA_STATE_DIR ?= $(CONTROL_PLANE_DIR)

.PHONY: help venv lint fmt test unit integration e2e bench control-plane control-plane-up \
        control-plane-down run clean

help:
	@echo "make run               start the local control plane (and the kopf-dra suite)"
	@echo "make test              lint, then unit + integration tests on the local control plane"
	@echo "make lint              ruff, mypy --strict, import-linter"
	@echo "make control-plane-up  start the local control plane in the background"
	@echo "make control-plane-down  stop it"
	@echo "make bench             run the benchmarks under bench/"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

venv: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check operators tests bench
	$(VENV)/bin/ruff format --check operators tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

fmt: $(STAMP)
	$(VENV)/bin/ruff format operators tests bench
	$(VENV)/bin/ruff check --fix operators tests bench

control-plane: $(STAMP)
	@hack/controlplane/build.sh >/dev/null

unit: $(STAMP)
	$(VENV)/bin/pytest -q tests/unit

integration: $(STAMP) control-plane
	$(VENV)/bin/pytest -q tests/integration

test: lint control-plane
	$(VENV)/bin/pytest -q tests

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

control-plane-up: control-plane
	@$(VENV)/bin/kopf-dra control-plane up

control-plane-down: $(STAMP)
	@$(VENV)/bin/kopf-dra control-plane down

run: control-plane-up

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
