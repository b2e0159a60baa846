# Two commands for a fresh machine (each installs what it needs into .venv):
#   make run    start the service (SQLite under ./data, http://127.0.0.1:7480); ARGS="--https" etc.
#   make test   run the whole test suite (needs PostgreSQL at 127.0.0.1:5432 for the PostgreSQL half)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test lint

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

# Azurite (the Azure Storage emulator the StorageQueue tests run), pinned in package-lock.json. Without
# npm the tests that need it say so: they fail in CI and are skipped locally.
node_modules/.installed: package.json package-lock.json
	@if command -v npm >/dev/null 2>&1; then npm ci --no-audit --no-fund && touch $@; \
	else echo "npm not found: install Node.js 20+ with npm for the StorageQueue tests (Azurite)" >&2; fi

test: $(VENV)/.test-deps node_modules/.installed
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.test-deps
	$(VENV)/bin/ruff check src tests migrations
	$(VENV)/bin/mypy src
