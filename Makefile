# Two commands for a fresh machine (each installs what it needs into .venv):
#   make run    start the service (SQLite under ./data, http://127.0.0.1:7480); ARGS="--https" etc.
#   make test   run the whole test suite (needs PostgreSQL at 127.0.0.1:5432 for the PostgreSQL half)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test test-machine lint bench faults container-check

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

# Three workers by default on 2 cores (each test module stays on one worker, so its servers start once; the
# slowest modules start first, see tests/conftest.py): with two, the machine sat 30-50 % idle for minutes while
# modules waited on real time (a minute's recurrence, leases, restarts). PYTEST_WORKERS=0 for one process. The 15
# slowest tests are listed at the end, to keep the whole run under 12 minutes.
PYTEST_WORKERS ?= 3
# The older SDKs' and the Azure CLI's own environments (.venv-sdks/, .venv-az/) are made first, in parallel, so
# that their first install (the CLI's alone is 75-170 s) is not paid inside the suite.
test: test-machine $(VENV)/.test-deps node_modules/.installed
	$(PY) tests/prepare_clients.py
	$(PY) -m compileall -q src  # each emulator the suite starts then loads bytecode (PYTHONDONTWRITEBYTECODE may be set)
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

lint: $(VENV)/.test-deps
	$(VENV)/bin/ruff check src tests migrations
	$(VENV)/bin/mypy src

# The benchmarks (bench/README.md), for a newcomer in one command: the bench's Python packages into .venv, nginx
# (its HTTP target) with apt-get when missing and root, then bench/run.py with ARGS, e.g. `make bench ARGS=--quick`.
# PostgreSQL must listen on 127.0.0.1:5432 (BENCH_PG to change).
$(VENV)/.bench-deps: bench/requirements.txt $(VENV)/.run-deps
	$(PY) -m pip install --quiet -r bench/requirements.txt
	touch $@

bench: $(VENV)/.bench-deps
	@command -v nginx >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& echo "bench: installing nginx (Debian package), the benchmarks' HTTP target" >&2 \
		&& DEBIAN_FRONTEND=noninteractive apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx >/dev/null; } \
		|| { echo "bench: nginx is needed as the HTTP target: sudo apt-get install nginx" >&2; exit 1; }
	$(PY) bench/run.py $(ARGS)

# The fault tests in their long form (docs/several-processes.md): one API and three dispatchers on a private
# PostgreSQL with 2,400 occurrences over four minutes, four kill -9s, two 12 s SIGSTOPs, the API killed under writes
# and a database restart; 200,000 requests over kept-alive connections; 20 rounds of processes migrating an empty
# database at once; a dispatcher frozen inside and just after a claim. One test at a time (-n 0): the figures they
# print are those of docs/several-processes.md. About ten minutes. PostgreSQL must listen on 127.0.0.1:5432 and
# its server binaries be installed (for the private server).
faults: $(VENV)/.test-deps
	SCHEDULER_FAULTS_LONG=1 $(PY) -m pytest -n 0 -s -p no:cacheprovider tests/e2e/test_faults.py \
		tests/e2e/test_keep_alive_load.py tests/e2e/test_frozen_dispatcher.py tests/store/test_startup_race.py $(PYTEST_ARGS)

# The container image built from this checkout and checked as its users run it (docs/docker.md#the-container-check):
# podman, runc, debootstrap, iproute2, docker-compose with apt-get when missing and root (else one message naming them; fatal),
# then scripts/container-check.sh. Root only (rootful podman, a network namespace). .ci/run runs it after the suite.
# From nothing about 5 minutes on 2 cores (packages, the debootstrap base, the build, the run); the base is cached.
container-check:
	@bash scripts/container-machine.sh
	bash scripts/container-check.sh
