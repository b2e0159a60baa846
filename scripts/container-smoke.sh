#!/usr/bin/env bash
# Smoke test of the container image, end to end, with podman:
#
#   1. base image: Debian 12 + python3 + python3-venv from Debian packages (scripts/debian-base.sh,
#      debootstrap + podman import; cached: skipped when the image exists), because this host reaches
#      Debian's mirror and PyPI but no container registry. SMOKE_BASE_IMAGE=python:3.11-slim uses a
#      registry image instead.
#   2. `podman build --format docker` with BASE_IMAGE set to it (docker format: the OCI format has no
#      HEALTHCHECK and podman would drop it).
#   3. run it with the API published on a loopback port and the data volume mounted; wait until the
#      image's HEALTHCHECK reports healthy; check that the Alembic migrations ran from the wheel.
#   4. create a job collection and a one-time Http job through the published port; the job fires at
#      an HTTP target on the host; check the target got the request, history says Completed and the
#      job is Completed.
#   5. restart the container (graceful SIGTERM stop) and check the job is still there (the volume).
#   6. print the image size; remove container, volume and target (the image is kept, tagged
#      $SMOKE_IMAGE; the version it replaces is removed; the build keeps no intermediate images).
#
# Host specifics (Debian 12 VM, cgroup v1/hybrid, rootful podman 4.3):
#   - `--runtime runc` everywhere: crun fails on this host's hybrid cgroups.
#   - `--ulimit nofile=1024:1024 --ulimit nproc=1024:1024` on build and run: podman's default open-files
#     limit (1048576) is above this host's hard limit (20000) and runc then fails with "error setting
#     rlimit type 7: operation not permitted".
#   - no systemd: podman cannot schedule the periodic health check (it logs "unable to get systemd
#     connection to add healthchecks"), so this script runs it itself with `podman healthcheck run`,
#     which records the result that `podman inspect` shows.
#   - egress goes through a TLS-intercepting proxy whose CA is only in the host's trust store: the
#     host bundle is mounted into the build and given to pip as PIP_CERT (SMOKE_HOST_CA= turns it off).
#   - networking: the default bridge network works here (the host is reachable from the container at
#     the bridge's gateway address, where the target listens). Where bridge networking fails, run with
#     SMOKE_NETWORK=host: the container then shares the host's network, `-p` is not used and the
#     service and the target both use 127.0.0.1.
#
# Needs: root (for debootstrap, only while the base image is missing), podman, runc, curl, python3.
#   apt-get install -y podman runc debootstrap curl
# Every wait is bounded; any failed check exits non-zero. Safe to re-run.
set -euo pipefail

cd "$(dirname "$0")/.."

SMOKE_IMAGE=${SMOKE_IMAGE:-localhost/azure-scheduler-emulator:smoke}
DEFAULT_BASE=localhost/scheduler-emulator-base:debian12
SMOKE_BASE_IMAGE=${SMOKE_BASE_IMAGE:-$DEFAULT_BASE}
SMOKE_NETWORK=${SMOKE_NETWORK:-bridge}
SMOKE_HOST_CA=${SMOKE_HOST_CA-/etc/ssl/certs/ca-certificates.crt}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-1800}
HEALTH_TIMEOUT=${HEALTH_TIMEOUT:-90}
FIRE_TIMEOUT=${FIRE_TIMEOUT:-60}
CONTAINER=scheduler-emulator-smoke
VOLUME=scheduler-emulator-smoke-data
ULIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
ARM=/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/smoke-rg/providers/Microsoft.Scheduler
API_VERSION=api-version=2016-03-01

log() { printf '[smoke] %s\n' "$*" >&2; }
podman() { command podman --runtime runc "$@"; }

workdir=$(mktemp -d /tmp/scheduler-emulator-smoke.XXXXXX)
target_pid=
cleanup() {
    local rc=$?
    set +e
    if [[ $rc != 0 ]] && podman container exists "$CONTAINER" 2>/dev/null; then
        log "container log (last 40 lines):"
        podman logs --tail 40 "$CONTAINER" >&2 2>&1 || true
    fi
    if [[ -n $target_pid ]]; then kill "$target_pid" 2>/dev/null; wait "$target_pid" 2>/dev/null; fi
    podman rm --force --time 0 "$CONTAINER" >/dev/null 2>&1 || true
    podman volume rm --force "$VOLUME" >/dev/null 2>&1 || true
    rm -rf "$workdir"
    if [[ $rc == 0 ]]; then log "PASS"; else log "FAIL (exit $rc)"; fi
    exit "$rc"
}
trap cleanup EXIT
fail() { log "FAIL: $*"; exit 1; }

for tool in podman runc curl python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (apt-get install -y podman runc debootstrap curl)"
done

# Leftovers of an interrupted run.
podman rm --force --time 0 "$CONTAINER" >/dev/null 2>&1 || true
podman volume rm --force "$VOLUME" >/dev/null 2>&1 || true

# --- 1. base image ---------------------------------------------------------------------------------
if [[ $SMOKE_BASE_IMAGE == "$DEFAULT_BASE" ]]; then
    BASE_IMAGE=$SMOKE_BASE_IMAGE scripts/debian-base.sh
fi

# --- 2. build --------------------------------------------------------------------------------------
# --layers=false: a fresh build every run that leaves no intermediate images behind (only the tagged one).
build_args=(--format docker --layers=false "${ULIMITS[@]}" --build-arg "BASE_IMAGE=$SMOKE_BASE_IMAGE" --tag "$SMOKE_IMAGE")
if [[ -n $SMOKE_HOST_CA && -r $SMOKE_HOST_CA ]]; then
    build_args+=(--volume "$SMOKE_HOST_CA:/run/host-ca.pem:ro" --build-arg PIP_CERT=/run/host-ca.pem)
fi
[[ $SMOKE_NETWORK == host ]] && build_args+=(--network host)
previous_id=$(podman image inspect --format '{{.Id}}' "$SMOKE_IMAGE" 2>/dev/null || true)
log "building $SMOKE_IMAGE on $SMOKE_BASE_IMAGE (log: podman build output below on failure)"
if ! timeout "$BUILD_TIMEOUT" podman build "${build_args[@]}" . >"$workdir/build.log" 2>&1; then
    tail -n 40 "$workdir/build.log" >&2
    fail "podman build failed"
fi
grep '^migrations packaged at' "$workdir/build.log" >&2 || true
image_id=$(podman image inspect --format '{{.Id}}' "$SMOKE_IMAGE")
if [[ -n $previous_id && $previous_id != "$image_id" ]]; then
    podman rmi "$previous_id" >/dev/null 2>&1 || true   # the replaced version, unless something uses it
fi
[[ $(podman image inspect --format '{{.Config.User}}' "$SMOKE_IMAGE") == 10001:10001 ]] || fail "image does not run as uid 10001"
healthcheck=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$SMOKE_IMAGE")
[[ $healthcheck == *_emulator/health* ]] || fail "image has no HEALTHCHECK on /_emulator/health: $healthcheck"

# --- 3. run, wait for healthy, migrations ----------------------------------------------------------
run_args=(--detach --name "$CONTAINER" "${ULIMITS[@]}" --volume "$VOLUME:/data")
if [[ $SMOKE_NETWORK == host ]]; then
    api_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    run_args+=(--network host --env SCHEDULER_HOST=127.0.0.1 --env "SCHEDULER_PORT=$api_port")
else
    run_args+=(--publish 127.0.0.1::7480)
fi
log "starting $CONTAINER"
podman run "${run_args[@]}" "$SMOKE_IMAGE" >/dev/null 2>"$workdir/run.err" || { cat "$workdir/run.err" >&2; fail "podman run failed"; }
if [[ $SMOKE_NETWORK != host ]]; then
    api_port=$(podman port "$CONTAINER" 7480/tcp | head -n1 | sed 's/.*://')
fi
BASE_URL=http://127.0.0.1:$api_port
log "API published at $BASE_URL"

wait_healthy() {
    local deadline=$((SECONDS + HEALTH_TIMEOUT)) state
    until podman healthcheck run "$CONTAINER" >/dev/null 2>&1; do
        state=$(podman inspect --format '{{.State.Status}}' "$CONTAINER")
        [[ $state == running ]] || fail "container is $state, not running"
        ((SECONDS < deadline)) || fail "health check still failing after ${HEALTH_TIMEOUT}s"
        sleep 1
    done
    state=$(podman inspect --format '{{.State.Health.Status}}' "$CONTAINER" 2>/dev/null \
            || podman inspect --format '{{.State.Healthcheck.Status}}' "$CONTAINER")
    [[ $state == healthy ]] || fail "health check passed but the container shows '$state'"
    log "health check: $state"
}
started=$SECONDS
wait_healthy
log "healthy $((SECONDS - started))s after start"

# HTTP helper: api METHOD PATH [JSON] sets STATUS and BODY.
api() {
    local out
    out=$(curl --silent --show-error --max-time 15 -X "$1" -H 'Content-Type: application/json' \
               ${3:+--data "$3"} --write-out '\n%{http_code}' "$BASE_URL$2") || fail "$1 $2: curl failed"
    STATUS=${out##*$'\n'}
    BODY=${out%$'\n'*}
}
# jget JSON DOTTED.PATH (list indexes as numbers) prints the value ('' when absent).
jget() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
value = json.loads(sys.argv[1])
for key in sys.argv[2].split("."):
    try:
        value = value[int(key)] if isinstance(value, list) else value[key]
    except (KeyError, IndexError, TypeError, ValueError):
        value = None
        break
print("" if value is None else value if isinstance(value, str) else json.dumps(value))
EOF
}

api GET /_emulator/health
log "GET /_emulator/health -> $STATUS $BODY"
[[ $STATUS == 200 && $(jget "$BODY" status) == ok && $(jget "$BODY" database) == sqlite ]] || fail "health endpoint"

migrations=$(podman exec "$CONTAINER" python3 -c '
import sqlite3
from alembic.script import ScriptDirectory
from scheduler_emulator.store.database import migrations_dir
where = migrations_dir()
assert "site-packages" in str(where), where
head = ScriptDirectory(str(where)).get_current_head()
(applied,) = sqlite3.connect("/data/scheduler.db").execute("select version_num from alembic_version").fetchone()
print(f"{applied} {head} {where}")')
read -r applied head where <<<"$migrations"
log "migrations: database at revision $applied, head $head (scripts from $where)"
[[ -n $applied && $applied == "$head" ]] || fail "database revision $applied is not the head $head"

# --- 4. a one-time job fires at a target on the host -----------------------------------------------
if [[ $SMOKE_NETWORK == host ]]; then
    target_bind=127.0.0.1
else
    target_bind=$(podman inspect --format '{{.NetworkSettings.Gateway}}' "$CONTAINER")
    [[ -n $target_bind ]] || target_bind=$(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}}{{end}}')
fi
cat >"$workdir/target.py" <<'EOF'
import http.server, json, sys
requests = open(sys.argv[2], "a", buffering=1)
class Target(http.server.BaseHTTPRequestHandler):
    def answer(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        requests.write(json.dumps({"method": self.command, "path": self.path, "body": body,
                                   "headers": {k.lower(): v for k, v in self.headers.items()}}) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "13")
        self.end_headers()
        self.wfile.write(b"target got it")
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((sys.argv[1], 0), Target)
open(sys.argv[3], "w").write(str(server.server_address[1]))
server.serve_forever()
EOF
python3 "$workdir/target.py" "$target_bind" "$workdir/requests.jsonl" "$workdir/target.port" &
target_pid=$!
for _ in $(seq 50); do [[ -s $workdir/target.port ]] && break; sleep 0.1; done
[[ -s $workdir/target.port ]] || fail "the HTTP target did not start on $target_bind"
target_url="http://$target_bind:$(cat "$workdir/target.port")/smoke/fired"
log "HTTP target on the host: $target_url"

api PUT "$ARM/jobCollections/smoke?$API_VERSION" '{"location": "westus", "properties": {"sku": {"name": "Standard"}}}'
log "PUT job collection -> $STATUS"
[[ $STATUS == 200 || $STATUS == 201 ]] || fail "create job collection: $BODY"

job_body='{"properties": {"action": {"type": "Http", "request": {"uri": "'"$target_url"'", "method": "POST", "body": "hello from the container"},
           "retryPolicy": {"retryType": "None"}}}}'
api PUT "$ARM/jobCollections/smoke/jobs/fire-once?$API_VERSION" "$job_body"
log "PUT one-time job (no startTime, no recurrence: runs now) -> $STATUS"
[[ $STATUS == 200 || $STATUS == 201 ]] || fail "create job: $BODY"

deadline=$((SECONDS + FIRE_TIMEOUT))
while :; do
    api GET "$ARM/jobCollections/smoke/jobs/fire-once/history?$API_VERSION"
    [[ $STATUS == 200 ]] || fail "history: $STATUS $BODY"
    history_status=$(jget "$BODY" value.0.properties.status)
    [[ -z $history_status ]] || break
    ((SECONDS < deadline)) || fail "no history entry after ${FIRE_TIMEOUT}s"
    sleep 1
done
log "history: $history_status - $(jget "$BODY" value.0.properties.message | head -c 200)"
[[ $history_status == Completed ]] || fail "history says $history_status, not Completed"

[[ -s $workdir/requests.jsonl ]] || fail "the target received nothing"
request=$(head -n1 "$workdir/requests.jsonl")
log "target received: $(jget "$request" method) $(jget "$request" path), body '$(jget "$request" body)', x-ms-scheduler-jobid $(jget "$request" headers.x-ms-scheduler-jobid)"
[[ $(jget "$request" method) == POST && $(jget "$request" body) == "hello from the container" \
   && $(jget "$request" headers.x-ms-scheduler-jobid) == fire-once ]] || fail "unexpected request: $request"

api GET "$ARM/jobCollections/smoke/jobs/fire-once?$API_VERSION"
job_state=$(jget "$BODY" properties.state)
log "job state: $job_state, executionCount $(jget "$BODY" properties.status.executionCount)"
[[ $job_state == Completed ]] || fail "job state is $job_state, not Completed"

# --- 5. restart: graceful stop, state kept in the volume -------------------------------------------
podman stop --time 25 "$CONTAINER" >/dev/null
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$CONTAINER")
log "stopped with SIGTERM: exit code $exit_code"
[[ $exit_code == 0 ]] || fail "the service did not stop cleanly on SIGTERM (exit $exit_code)"
podman start "$CONTAINER" >/dev/null 2>"$workdir/run.err" || { cat "$workdir/run.err" >&2; fail "restart failed"; }
if [[ $SMOKE_NETWORK != host ]]; then
    api_port=$(podman port "$CONTAINER" 7480/tcp | head -n1 | sed 's/.*://')
    BASE_URL=http://127.0.0.1:$api_port
fi
wait_healthy
api GET "$ARM/jobCollections/smoke/jobs/fire-once/history?$API_VERSION"
[[ $STATUS == 200 && $(jget "$BODY" value.0.properties.status) == Completed ]] || fail "after restart: $STATUS $BODY"
log "after restart the job and its history are still there (volume $VOLUME)"

# --- 6. size ---------------------------------------------------------------------------------------
size=$(podman image inspect --format '{{.Size}}' "$SMOKE_IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' "$SMOKE_BASE_IMAGE" 2>/dev/null || echo 0)
log "image $SMOKE_IMAGE: $(awk -v s="$size" -v b="$base_size" 'BEGIN { printf "%.0f MB (base %.0f MB, emulator venv %.0f MB)", s / 1e6, b / 1e6, (s - b) / 1e6 }')"
