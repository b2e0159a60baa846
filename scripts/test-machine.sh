#!/usr/bin/env bash
# What the test suite needs from the machine, beyond the Python packages (.venv) and npm packages (node_modules)
# that `make test` installs itself. Called by `make test` before every run (each check is a `command -v`, so it
# costs nothing once everything is there).
#
# - Programs from Debian packages (table below): installed with apt-get when missing and running as root
#   (`apt-get update` first); otherwise the run stops here with one message naming each missing program and the
#   command that installs it.
# - PostgreSQL at 127.0.0.1:5432 (or $SCHEDULER_TEST_PG) is the machine's, never installed here: with CI=true an
#   unreachable server stops the run here; locally the PostgreSQL half of the suite is skipped, so this only warns.
set -euo pipefail

# program  Debian package  what needs it
REQUIRED=(
  "docker-compose docker-compose tests/test_compose.py validates docker-compose.yml with the real compose (no daemon needed)"
  "node nodejs Azurite (StorageQueue tests) and the JavaScript SDK tests"
  "npm npm installs Azurite and the JavaScript SDK from package-lock.json"
  "ip iproute2 tests that run the emulator in a network namespace with only loopback"
  "chromium chromium the dashboard's browser tests (tests/e2e/test_dashboard.py, driven by Playwright)"
)

missing_programs=()
missing_packages=()
for row in "${REQUIRED[@]}"; do
  read -r program package _ <<<"$row"
  if ! command -v "$program" >/dev/null 2>&1; then
    missing_programs+=("$program")
    missing_packages+=("$package")
  fi
done

if ((${#missing_packages[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "test-machine: installing ${missing_packages[*]} (Debian packages) for the test suite" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing_packages[@]}" >/dev/null
  else
    {
      echo "test-machine: the test suite needs ${missing_programs[*]}, which is not on PATH."
      echo "  Install it with: sudo apt-get update && sudo apt-get install --no-install-recommends ${missing_packages[*]}"
      echo "  (or your system's equivalent packages), then run make test again. Why each is needed:"
      for row in "${REQUIRED[@]}"; do
        read -r program package why <<<"$row"
        for m in "${missing_programs[@]}"; do [[ $m == "$program" ]] && echo "    $program ($package): $why"; done
      done
    } >&2
    exit 1
  fi
fi

# PostgreSQL: probed with bash's /dev/tcp so that no client needs to be installed.
pg_url=${SCHEDULER_TEST_PG:-postgresql://postgres@127.0.0.1:5432/test}
pg_hostport=${pg_url#*://}
pg_hostport=${pg_hostport#*@}
pg_hostport=${pg_hostport%%/*}
pg_host=${pg_hostport%:*}
pg_port=${pg_hostport##*:}
[[ $pg_port == "$pg_hostport" ]] && pg_port=5432
if ! timeout 3 bash -c "exec 3<>/dev/tcp/$pg_host/$pg_port" 2>/dev/null; then
  message="test-machine: PostgreSQL is not reachable at $pg_host:$pg_port (set SCHEDULER_TEST_PG=postgresql://user@host:port/db); the suite runs every API and multi-process test on it"
  if [[ ${CI:-} =~ ^(1|true|yes)$ ]]; then
    echo "$message" >&2
    exit 1
  fi
  echo "$message — its tests will be skipped" >&2
fi
