# The two commands a newcomer needs:  make demo   and   make test   (both do all set-up first).
SHELL := /bin/bash
export BASHGYM_HOME ?= $(CURDIR)/.bashgym
export DAGSTER_HOME ?= $(BASHGYM_HOME)/dagster
VENV := .venv/bin
UI_PORT ?= 3000
MLFLOW_PORT ?= 5000

.PHONY: setup demo demo-quick test test-fast notebooks ui mlflow lint bench images clean

setup:            ## install and start everything needed (idempotent)
	@bash scripts/setup.sh

demo: setup       ## materialize the whole pipeline on the bundled sample data and offline defaults
	$(VENV)/bashgym demo

demo-quick: setup ## a smoke run of every stage on tiny budgets (16 scenarios, 2 SFT steps, 3 evaluation scenarios)
	$(VENV)/bashgym demo --quick

test: setup       ## run the test suite (real Docker containers, real models)
	$(VENV)/pytest

# No container, no SmolLM2, nothing marked slow (tests/conftest.py marks every test that asks for the engine)
test-fast: setup  ## the quick inner loop: ~1,260 tests of the plain modules, tiny models and real SQLite
	$(VENV)/pytest -m "not docker and not slow and not model"

notebooks: setup  ## run every notebook in notebooks/ on the data folder; fails on any cell error
	$(VENV)/python -m bashgym_assets.notebooks

ui: setup         ## the Dagster UI on http://127.0.0.1:3000 (both code locations; UI_PORT=... to move it)
	$(VENV)/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(UI_PORT)

# One worker (a local UI, one user), and litellm's bundled price list instead of an online fetch that each worker
# retried offline (95 s to the first page with 4 workers: issue 32).
mlflow: setup     ## the MLflow UI on http://127.0.0.1:5000 over the same data folder (MLFLOW_PORT=... to move it)
	@uri="$$($(VENV)/python -c 'import sys; from bashgym_assets.config import get_settings, redact_uri; s = get_settings(); sys.exit(f"BASHGYM_MLFLOW_TRACKING_URI is already a tracking server ({redact_uri(s.mlflow_tracking_uri)}): open that one") if s.mlflow_tracks_on_server else print(s.mlflow_tracking_uri)')" || exit 1; \
	LITELLM_LOCAL_MODEL_COST_MAP=True $(VENV)/mlflow ui --backend-store-uri "$$uri" \
	  --default-artifact-root $(BASHGYM_HOME)/mlflow/artifacts -h 127.0.0.1 -p $(MLFLOW_PORT) --workers 1

lint:             ## ruff (check and format), the layers contract (import-linter), mypy on core and engines
	$(VENV)/ruff check bashgym_assets tests benchmarks
	$(VENV)/ruff format --check bashgym_assets tests benchmarks
	$(VENV)/lint-imports
	$(VENV)/mypy

images: setup     ## rebuild the sandbox image even if its recipe is unchanged
	$(VENV)/python -m bashgym_assets.images --force

clean:            ## remove the data folder (lake, Dagster instance, MLflow, adapters)
	rm -rf $(BASHGYM_HOME)
