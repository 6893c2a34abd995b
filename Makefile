# Quick start: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# the SageMaker Python SDK v2 in a venv of its own (its dependencies clash with Airflow's)
SDK_VENV  := .venv-sdk
SDK_STAMP := $(SDK_VENV)/.installed-stamp

.PHONY: test demo lint typecheck docs pytest bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(SDK_STAMP): tests/local/sdk-requirements.txt
	test -x $(SDK_VENV)/bin/python || $(PYTHON) -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/python -m pip install -q -r tests/local/sdk-requirements.txt
	touch $(SDK_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy airflow_hetero

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

pytest: $(STAMP) $(SDK_STAMP)
	$(BIN)/pytest -q

test: lint typecheck docs pytest

demo: $(STAMP)
	$(BIN)/airflow-hetero demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) $(SDK_VENV) .mypy_cache .ruff_cache .pytest_cache
