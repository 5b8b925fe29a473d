# The two commands a newcomer needs:  make demo   and   make test   (both do all set-up first).
SHELL := /bin/bash
export BASHGYM_HOME ?= $(CURDIR)/.bashgym
export DAGSTER_HOME ?= $(BASHGYM_HOME)/dagster
VENV := .venv/bin
UI_PORT ?= 3000
# MLFLOW_PORT=N (unset: BASHGYM_MLFLOW_UI_URL's port, else 5000): where `make mlflow` serves, and where the MLflow
# links of every target here point (Dagster's asset metadata, the CLI's output); `make mlflow` also records its
# address in the data folder, so runs started later without it link there too (bashgym_assets/mlflow_ui.py)
ifneq ($(MLFLOW_PORT),)
export BASHGYM_MLFLOW_UI_URL ?= http://127.0.0.1:$(MLFLOW_PORT)
endif

.PHONY: setup demo demo-quick test test-fast notebooks ui mlflow lint bench images clean

setup:            ## install and start everything needed (idempotent)
	@bash scripts/setup.sh

demo: setup       ## materialize the whole pipeline on the bundled sample data and offline defaults
	$(VENV)/bashgym demo

demo-quick: setup ## a smoke run of every stage on tiny budgets (16 scenarios, 2 SFT steps, 3 evaluation scenarios)
	$(VENV)/bashgym demo --quick

# Test files run two at a time (pytest-xdist, one file per worker: a file's module fixtures are built once): the
# suite spends much of its time waiting on containers, browsers and subprocesses, so two workers on a 2-core EPYC
# without AVX-512 finished it in 0.71x the time of one (29 min 47 s against 41 min 54 s, BENCHMARKS.md). At most 4 workers on a bigger machine; PYTEST_WORKERS=0 runs it in-process.
PYTEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n > 4 ? 4 : (n < 2 ? 2 : n) )))

test: setup       ## run the test suite (real Docker containers, real models), PYTEST_WORKERS files at a time
	$(VENV)/pytest -n $(PYTEST_WORKERS) --dist loadfile

# No container, no SmolLM2, nothing marked slow (tests/conftest.py marks every test that asks for the engine)
test-fast: setup  ## the quick inner loop: ~1,260 tests of the plain modules, tiny models and real SQLite
	$(VENV)/pytest -m "not docker and not slow and not model"

notebooks: setup  ## run every notebook in notebooks/ on the data folder; fails on any cell error
	$(VENV)/python -m bashgym_assets.notebooks

ui: setup         ## the Dagster UI on http://127.0.0.1:3000 (both code locations; UI_PORT=... to move it)
	$(VENV)/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(UI_PORT)

# `mlflow server` on the data folder's store, started as ui_check starts it (bashgym_assets/mlflow_ui.py): each
# experiment opens on its runs (or traces), one worker (a local UI, one user), and litellm's bundled price list
# instead of an online fetch that each worker retried offline (issues 32, 40).
mlflow: setup     ## the MLflow UI on http://127.0.0.1:5000 over the same data folder (MLFLOW_PORT=... to move it)
	$(VENV)/python -m bashgym_assets.mlflow_ui $(if $(MLFLOW_PORT),--port $(MLFLOW_PORT))

lint:             ## ruff (check and format), the layers contract (import-linter), mypy on every layer
	$(VENV)/ruff check bashgym_assets tests benchmarks
	$(VENV)/ruff format --check bashgym_assets tests benchmarks
	$(VENV)/lint-imports
	$(VENV)/mypy

images: setup     ## rebuild the sandbox image even if its recipe is unchanged
	$(VENV)/python -m bashgym_assets.images --force

clean:            ## remove the data folder (lake, Dagster instance, MLflow, adapters)
	rm -rf $(BASHGYM_HOME)
