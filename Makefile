# Quick start: `make demo` and `make test`. Both create .venv on first use.
# `make test` runs the suite twice: on the latest Airflow 3 (.venv) and on Airflow 2.11 (.venv-af2).
# It runs its stages side by side (`make -j`), then the system test; each stage prints its seconds.
PYTHON ?= python3
# Stages of `make test` at once (the venvs are created side by side too), and pytest-xdist workers
# per suite (a suite in one process keeps a core ~80% busy and waits on its endpoints' hosts and
# Airflow the rest; docs/development.md has the measurements). WORKERS=0 runs a suite in one process.
JOBS    ?= 4
WORKERS ?= 3
TIMED   := .ci/timed
# Limits of the stages that can hang (seconds; .ci/timed --limit): past its limit a stage prints the stacks of
# its Python processes and fails. Together (venvs, then the suites beside each other, then the system test)
# they end a hung `make test` at 77 minutes, inside CI's 90; the slowest runs seen took about half of each.
VENVS_LIMIT  ?= 900
SUITE_LIMIT  ?= 3000
SYSTEM_LIMIT ?= 720
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# The Airflow 2.11 environment: same package and dev extra, Airflow pinned to 2.11 and every other
# package pinned by .ci/constraints-airflow-2.11.txt (a resolution known to work with 2.11).
AF2_VENV        := .venv-af2
AF2_BIN         := $(AF2_VENV)/bin
AF2_STAMP       := $(AF2_VENV)/.installed-stamp
AF2_CONSTRAINTS := .ci/constraints-airflow-2.11.txt
# the SageMaker Python SDK v2 in a venv of its own (its dependencies clash with Airflow's)
SDK_VENV  := .venv-sdk
SDK_STAMP := $(SDK_VENV)/.installed-stamp
# the SageMaker Python SDK v3 (sagemaker-train, sagemaker-core) and torch, in a venv of their own
SDK3_VENV  := .venv-sdk3
SDK3_STAMP := $(SDK3_VENV)/.installed-stamp

# The system test (tests/system, docs/deployment.md): the package's wheel, installed not editable with
# Airflow 3 and the celery and postgres extras; every pin in .ci/constraints-system.txt.
SYS_VENV        := .venv-system
SYS_BIN         := $(SYS_VENV)/bin
SYS_STAMP       := $(SYS_VENV)/.installed-stamp
SYS_CONSTRAINTS := .ci/constraints-system.txt

# The package's wheel, built once from this checkout (a copy of the files a wheel is made of, so no
# build/lib is left behind) and used by every stage: the packaging and demo tests of both suites
# (AIRFLOW_HETERO_TEST_WHEEL), the system test, the install check. Rebuilt when a source changes.
WHEEL_DIR   := build/wheel
WHEEL_STAMP := $(WHEEL_DIR)/.built-stamp
# (the shell expands it when a recipe runs, after the wheel is built)
WHEEL_FILE  := $$(echo $(CURDIR)/$(WHEEL_DIR)/airflow_hetero-*.whl)
PACKAGE_SRC := pyproject.toml README.md LICENSE $(shell find airflow_hetero -type f -not -path '*/__pycache__/*')
PYTEST_ARGS := -q -p no:cacheprovider --durations=15 $(if $(filter-out 0,$(WORKERS)),-n $(WORKERS) --dist loadfile)

.PHONY: test test-af34 system-af34 stages demo lint typecheck docs pytest pytest-af2 system system-wheel wheel pip-check venvs \
	af2-constraints bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(AF2_STAMP): pyproject.toml $(AF2_CONSTRAINTS)
	test -x $(AF2_BIN)/python || $(PYTHON) -m venv $(AF2_VENV)
	$(AF2_BIN)/python -m pip install -q --upgrade pip
	$(AF2_BIN)/python -m pip install -q -e '.[dev]' 'apache-airflow==2.11.*' -c $(AF2_CONSTRAINTS)
	touch $(AF2_STAMP)

$(SDK_STAMP): tests/support/sdk-requirements.txt
	test -x $(SDK_VENV)/bin/python || $(PYTHON) -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/python -m pip install -q -r tests/support/sdk-requirements.txt
	touch $(SDK_STAMP)

$(SDK3_STAMP): tests/support/sdk3-requirements.txt
	test -x $(SDK3_VENV)/bin/python || $(PYTHON) -m venv $(SDK3_VENV)
	$(SDK3_VENV)/bin/python -m pip install -q -r tests/support/sdk3-requirements.txt
	touch $(SDK3_STAMP)

# Airflow and the extras, once; the package itself comes from its wheel (system-wheel), every run.
$(SYS_STAMP): pyproject.toml $(SYS_CONSTRAINTS)
	test -x $(SYS_BIN)/python || $(PYTHON) -m venv $(SYS_VENV)
	$(SYS_BIN)/python -m pip install -q --upgrade pip
	$(SYS_BIN)/python -m pip install -q -c $(SYS_CONSTRAINTS) 'apache-airflow[celery,postgres]' \
		'apache-airflow-providers-common-compat' 'apache-airflow-providers-amazon[aiobotocore]' \
		'apache-airflow-providers-openlineage' \
		'moto[server]' psutil werkzeug pydantic PyYAML pytest pytest-asyncio
	touch $(SYS_STAMP)

$(WHEEL_STAMP): $(STAMP) $(PACKAGE_SRC)
	rm -rf $(WHEEL_DIR)
	$(BIN)/python tests/support/installed.py $(WHEEL_DIR)
	touch $(WHEEL_STAMP)

wheel: $(WHEEL_STAMP)

# The wheel installed into .venv-system, not editable (its dependencies are already there).
system-wheel: $(SYS_STAMP) $(WHEEL_STAMP)
	$(SYS_BIN)/python -m pip install -q --force-reinstall --no-deps $(WHEEL_FILE)
	$(SYS_BIN)/python -m pip check

# A production-shaped Airflow (PostgreSQL, Redis, CeleryExecutor, every component its own process)
# against the offline endpoint; needs postgres/initdb, redis-server and chromium (.ci/run installs them).
system: system-wheel
	HETERO_SYSTEM_TEST=1 $(TIMED) --limit $(SYSTEM_LIMIT) system $(SYS_BIN)/pytest -q -p no:cacheprovider tests/system

lint: $(STAMP)
	$(TIMED) ruff $(BIN)/ruff check .
	$(TIMED) lint-imports $(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(TIMED) mypy $(BIN)/mypy airflow_hetero

docs: $(STAMP)
	$(TIMED) docs $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

pytest: $(STAMP) $(SDK_STAMP) $(SDK3_STAMP) $(WHEEL_STAMP)
	AIRFLOW_HETERO_TEST_WHEEL=$(WHEEL_FILE) $(TIMED) --limit $(SUITE_LIMIT) pytest $(BIN)/pytest $(PYTEST_ARGS) \
		--airflow-free-share airflow3

# The test files that involve no Airflow (tests/support/airflow_free.py) run once: each suite runs its share.
pytest-af2: $(AF2_STAMP) $(WHEEL_STAMP)
	AIRFLOW_HETERO_TEST_WHEEL=$(WHEEL_FILE) $(TIMED) --limit $(SUITE_LIMIT) pytest-af2 $(AF2_BIN)/pytest $(PYTEST_ARGS) \
		--airflow-free-share airflow2

# A new user's install, resolved (not installed) next to Airflow 2.11 and the latest Airflow 3 by the
# oldest pip the README names, in a fresh venv that ignores this machine's pip settings (PyPI only).
pip-check: $(WHEEL_STAMP)
	$(TIMED) --limit $(SUITE_LIMIT) pip-check .ci/pip-check $(PYTHON) $(WHEEL_FILE)

venvs: $(STAMP) $(AF2_STAMP) $(SDK_STAMP) $(SDK3_STAMP) $(SYS_STAMP)

# Every stage but the system test, side by side; then the system test, on a machine no longer busy
# with the suites (it starts a whole Airflow and times its runs).
stages: pytest pytest-af2 pip-check lint typecheck docs system-wheel

test:
	$(TIMED) --limit $(VENVS_LIMIT) venvs $(MAKE) --no-print-directory -j$(JOBS) venvs
	$(TIMED) stages $(MAKE) --no-print-directory -j$(JOBS) --output-sync=target stages
	$(TIMED) system-stage $(MAKE) --no-print-directory system

# Airflow 3.4 (issue 36): the newest 3.4 on the package index in a venv of its own, and the tests that differ
# between Airflow versions (DAG runs, plugins, the parse path, durable jobs, traces, lineage, the goldens). Not a
# stage of `make test`: a beta's own bugs must not block a landing (docs/compatibility.md says what it found).
AF34_VENV    := .venv-af34
AF34_BIN     := $(AF34_VENV)/bin
AF34_STAMP   := $(AF34_VENV)/.installed-stamp
AF34_AIRFLOW ?= apache-airflow==3.4.0b2
AF34_TESTS   ?= tests/dags tests/plugins tests/package/test_parse_path.py tests/golden tests/lineage

$(AF34_STAMP): pyproject.toml
	test -x $(AF34_BIN)/python || $(PYTHON) -m venv $(AF34_VENV)
	$(AF34_BIN)/python -m pip install -q --upgrade pip
	$(AF34_BIN)/python -m pip install -q -e '.[dev]' '$(AF34_AIRFLOW)'
	touch $(AF34_STAMP)

test-af34: $(AF34_STAMP)
	$(TIMED) --limit $(SUITE_LIMIT) pytest-af34 $(AF34_BIN)/pytest $(PYTEST_ARGS) $(AF34_TESTS)

# The system test on Airflow 3.4: `make system` with a venv of its own, pinned by every line of
# $(SYS_CONSTRAINTS) but Airflow's own three packages, and by $(AF34_AIRFLOW) (the same providers, celery, moto).
SYS34_VENV := .venv-system-af34
SYS34_PINS := $(SYS34_VENV)/constraints.txt

system-af34:
	mkdir -p $(SYS34_VENV)
	{ grep -v -E '^apache-airflow(-core|-task-sdk)?==' $(SYS_CONSTRAINTS); echo '$(AF34_AIRFLOW)'; } > $(SYS34_PINS).new
	cmp -s $(SYS34_PINS).new $(SYS34_PINS) && rm $(SYS34_PINS).new || mv $(SYS34_PINS).new $(SYS34_PINS)
	$(MAKE) --no-print-directory system SYS_VENV=$(SYS34_VENV) SYS_CONSTRAINTS=$(SYS34_PINS)

# Re-resolve the Airflow 2.11 pins (after changing dependencies): a fresh resolution, frozen.
af2-constraints:
	rm -rf $(AF2_VENV)
	$(PYTHON) -m venv $(AF2_VENV)
	$(AF2_BIN)/python -m pip install -q --upgrade pip
	$(AF2_BIN)/python -m pip install -q -e '.[dev]' 'apache-airflow==2.11.*'
	{ sed -n '1,2p' $(AF2_CONSTRAINTS); $(AF2_BIN)/pip freeze | grep -v -e '^-e' -e 'airflow[-_]hetero'; } > $(AF2_CONSTRAINTS).new
	mv $(AF2_CONSTRAINTS).new $(AF2_CONSTRAINTS)
	touch $(AF2_STAMP)

demo: $(STAMP)
	$(BIN)/airflow-hetero demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) $(AF2_VENV) $(AF34_VENV) $(SYS34_VENV) $(SDK_VENV) $(SDK3_VENV) $(SYS_VENV) $(WHEEL_DIR) .mypy_cache .ruff_cache .pytest_cache
