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

test: $(VENV)/.test-deps
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.test-deps
	$(VENV)/bin/ruff check src tests migrations
	$(VENV)/bin/mypy src
