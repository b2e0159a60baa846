# Two commands for a fresh machine (each installs what it needs into .venv):
#   make run    start the service (SQLite under ./data, http://127.0.0.1:7480); ARGS="--https" etc.
#   make test   run the whole test suite (needs PostgreSQL at 127.0.0.1:5432 for the PostgreSQL half)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test test-machine lint

$(VENV)/.run-deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.test-deps: pyproject.toml $(VENV)/.run-deps
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

run: $(VENV)/.run-deps
	$(VENV)/bin/scheduler-emulator $(ARGS)

# Azurite (the Azure Storage emulator the StorageQueue tests run) and the other npm packages the tests use,
# pinned in package-lock.json; npm itself comes from test-machine.
node_modules/.installed: package.json package-lock.json | test-machine
	npm ci --no-audit --no-fund
	touch $@

# Debian programs the suite runs (docker-compose, Node.js/npm, iproute2): installed with apt-get when missing and
# root, else one message saying what to install; and a PostgreSQL probe (fatal with CI=true).
test-machine:
	@bash scripts/test-machine.sh

# Two workers by default (each test module stays on one worker, so its servers start once; the slowest modules
# start first, see tests/conftest.py); PYTEST_WORKERS=0 for one. The 15 slowest tests are listed at the end, to
# keep the whole run under 12 minutes.
PYTEST_WORKERS ?= 2
test: test-machine $(VENV)/.test-deps node_modules/.installed
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

lint: $(VENV)/.test-deps
	$(VENV)/bin/ruff check src tests migrations
	$(VENV)/bin/mypy src
