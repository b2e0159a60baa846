#!/usr/bin/env bash
# The container image's check (`make container-check`, run by .ci/run after the suite), end to end with podman.
# What it asserts is what a user of the image relies on (docs/docker.md#the-container-check):
#
#   1. base image: Debian 12 + python3 + python3-venv from Debian packages (scripts/debian-base.sh: debootstrap
#      + podman import), because no container registry is reachable here. Cached as a tarball under
#      $CONTAINER_CACHE (default /var/cache/scheduler-emulator) and as the podman image; a fresh machine builds it.
#      CHECK_BASE_IMAGE=python:3.11-slim uses a registry image instead.
#   2. `podman build --format docker` from the checkout (docker format: the OCI format has no HEALTHCHECK);
#      the build itself fails when the wheel lacks the Alembic migrations (the Dockerfile's own check).
#   3. run it in a network namespace of its own with only loopback (`ip netns`, podman `--network ns:`): the
#      image's defaults (0.0.0.0:7480, /data) unchanged, and this script's client and HTTP target enter the same
#      namespace, so every packet stays on that loopback. Checks: the process runs as uid 10001 (not root), the
#      image's own HEALTHCHECK reports healthy, the API answers on 7480, the database is at the migrations'
#      head (scripts from the wheel), and with 2 CPUs the one container runs both roles: the API process and
#      its dispatcher child (`--no-api --supervised`).
#   4. a one-time Http job fires at the target: the target got it, history says Completed, the job Completed.
#   5. `podman stop --time 20` (the grace docs/docker.md gives) ends it with exit code 0, then a restart keeps
#      the job and its history (the volume).
#   6. a /data that uid 10001 cannot write makes the container exit non-zero with the emulator's message.
#   7. docker-compose.yml the way the README's CI example runs it: Debian's docker-compose (1.29) against
#      `podman system service` (podman's Docker-compatible API), that service started inside the same
#      loopback-only namespace, so the compose network's bridge and its port forwarding live there too.
#      `up -d --no-deps scheduler` on the image built in 2 (SCHEDULER_IMAGE; --no-build: the namespace has no
#      way to PyPI), the README's bounded curl wait on 127.0.0.1:7480, the compose healthcheck reporting
#      healthy through the Docker API, a job fired at the container's own loopback, `stop` with the file's
#      stop_grace_period ending with exit code 0, `down -v` leaving no container or volume behind.
#
# Host specifics (rootful podman 4.3 from Debian, cgroup v1/hybrid, no systemd):
#   - `--runtime runc`: crun fails on cgroup v1 hybrid hierarchies.
#   - `--ulimit nofile=1024:1024 --ulimit nproc=1024:1024`: podman's default open-files limit can be above the
#     host's hard limit, and runc then fails with "error setting rlimit type 7: operation not permitted".
#   - no systemd: podman cannot schedule the periodic health check, so the script runs it itself with
#     `podman healthcheck run`, which records the result that `podman inspect` shows.
#   - the build uses `--network host` (pip reaches PyPI); runs never do.
#   - the podman service for compose is entered into the namespace with `nsenter --net` only: `ip netns exec`
#     also remounts /sys, which hides the cgroup mounts, and runc then fails ("no cgroup mount found in
#     mountinfo"). Its containers.conf carries the ulimits above (compose cannot pass podman flags).
#   - a host CA bundle is mounted into the build and given to pip as PIP_CERT (CHECK_HOST_CA= turns it off),
#     for hosts whose egress goes through a TLS-intercepting proxy.
#
# Needs: root (netns, debootstrap), podman, runc, debootstrap, iproute2, curl, docker-compose, python3; `make container-check`
# installs them with apt-get when root and missing. Every wait is bounded; any failed check exits non-zero.
set -euo pipefail

cd "$(dirname "$0")/.."

CHECK_IMAGE=${CHECK_IMAGE:-localhost/azure-scheduler-emulator:check}
DEFAULT_BASE=localhost/scheduler-emulator-base:debian12
CHECK_BASE_IMAGE=${CHECK_BASE_IMAGE:-$DEFAULT_BASE}
CHECK_HOST_CA=${CHECK_HOST_CA-/etc/ssl/certs/ca-certificates.crt}
CONTAINER_CACHE=${CONTAINER_CACHE:-/var/cache/scheduler-emulator}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-1800}
HEALTH_TIMEOUT=${HEALTH_TIMEOUT:-90}
FIRE_TIMEOUT=${FIRE_TIMEOUT:-60}
COMPOSE_TIMEOUT=${COMPOSE_TIMEOUT:-180}   # each docker-compose command
STOP_GRACE=20   # docs/docker.md: `docker stop -t 20`, compose stop_grace_period: 20s
CONTAINER=scheduler-emulator-check
VOLUME=scheduler-emulator-check-data
NETNS=scheduler-emulator-check-$$
COMPOSE_PROJECT=scheduler-emulator-check
ULIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
ARM=/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/check-rg/providers/Microsoft.Scheduler
API_VERSION=api-version=2016-03-01
BASE_URL=http://127.0.0.1:7480

log() { printf '[container-check] %s\n' "$*" >&2; }
podman() { command podman --runtime runc "$@"; }
in_ns() { ip netns exec "$NETNS" "$@"; }

workdir=$(mktemp -d /tmp/scheduler-emulator-check.XXXXXX)
target_pid=
service_pid=
containers=("$CONTAINER" "$CONTAINER-readonly")
cleanup() {
    local rc=$? c
    set +e
    if [[ $rc != 0 ]]; then
        for c in "${containers[@]}"; do
            if podman container exists "$c" 2>/dev/null; then
                log "log of $c (last 30 lines):"
                podman logs --tail 30 "$c" >&2 2>&1
            fi
        done
    fi
    if [[ -n $target_pid ]]; then kill "$target_pid" 2>/dev/null; wait "$target_pid" 2>/dev/null; fi
    if [[ -n $service_pid ]]; then
        if [[ $rc != 0 ]]; then
            log "docker-compose logs scheduler (last 30 lines):"
            compose logs --no-color --tail 30 scheduler >&2 2>&1
        fi
        compose down --volumes --timeout 0 >/dev/null 2>&1
        kill "$service_pid" 2>/dev/null; wait "$service_pid" 2>/dev/null
    fi
    for c in "${containers[@]}"; do podman rm --force --time 0 "$c" >/dev/null 2>&1; done
    podman volume rm --force "$VOLUME" >/dev/null 2>&1
    ip netns delete "$NETNS" 2>/dev/null
    rm -rf "$workdir"
    if [[ $rc == 0 ]]; then log "PASS"; else log "FAIL (exit $rc)"; fi
    exit "$rc"
}
trap cleanup EXIT
fail() { log "FAIL: $*"; exit 1; }
# docker-compose on this checkout's docker-compose.yml, through podman's Docker API (section 7), bounded.
compose() {
    DOCKER_HOST=unix://$workdir/podman.sock SCHEDULER_IMAGE=$CHECK_IMAGE \
        timeout "$COMPOSE_TIMEOUT" docker-compose --project-name "$COMPOSE_PROJECT" --file docker-compose.yml "$@"
}

for tool in podman runc ip nsenter curl docker-compose python3 timeout; do
    command -v "$tool" >/dev/null \
        || fail "$tool is missing (apt-get install -y podman runc debootstrap iproute2 curl docker-compose)"
done
[[ $(id -u) == 0 ]] || fail "the check runs as root (ip netns, rootful podman)"

# Leftovers of an interrupted run.
for c in "${containers[@]}"; do podman rm --force --time 0 "$c" >/dev/null 2>&1 || true; done
podman volume rm --force "$VOLUME" >/dev/null 2>&1 || true
for c in $(podman ps --all --quiet --filter "label=com.docker.compose.project=$COMPOSE_PROJECT"); do
    podman rm --force --time 0 "$c" >/dev/null 2>&1 || true
done
for v in $(podman volume ls --quiet --filter "label=com.docker.compose.project=$COMPOSE_PROJECT"); do
    podman volume rm --force "$v" >/dev/null 2>&1 || true
done
podman network rm --force "${COMPOSE_PROJECT}_default" >/dev/null 2>&1 || true

# A network namespace with only loopback: the containers, the client and the target all live there.
ip netns add "$NETNS"
ip -n "$NETNS" link set lo up
NETWORK=(--network "ns:/run/netns/$NETNS")

# --- 1. base image ---------------------------------------------------------------------------------
timer=$SECONDS
if [[ $CHECK_BASE_IMAGE == "$DEFAULT_BASE" ]]; then
    tarball=$CONTAINER_CACHE/scheduler-emulator-base-debian12.tar
    if ! podman image exists "$CHECK_BASE_IMAGE" && [[ -s $tarball ]]; then
        log "loading the cached base image from $tarball"
        podman load --quiet --input "$tarball" >/dev/null || rm -f "$tarball"
    fi
    BASE_IMAGE=$CHECK_BASE_IMAGE scripts/debian-base.sh
    if [[ ! -s $tarball ]]; then
        mkdir -p "$CONTAINER_CACHE"
        podman save --quiet --output "$tarball.partial" "$CHECK_BASE_IMAGE" && mv "$tarball.partial" "$tarball"
        log "base image cached in $tarball"
    fi
fi
log "base image ready in $((SECONDS - timer)) s"

# --- 2. build --------------------------------------------------------------------------------------
# --layers=false: a fresh build every run that leaves no intermediate images behind (only the tagged one).
timer=$SECONDS
build_args=(--format docker --layers=false --network host "${ULIMITS[@]}" --build-arg "BASE_IMAGE=$CHECK_BASE_IMAGE"
            --tag "$CHECK_IMAGE")
if [[ -n $CHECK_HOST_CA && -r $CHECK_HOST_CA ]]; then
    build_args+=(--volume "$CHECK_HOST_CA:/run/host-ca.pem:ro" --build-arg PIP_CERT=/run/host-ca.pem)
fi
previous_id=$(podman image inspect --format '{{.Id}}' "$CHECK_IMAGE" 2>/dev/null || true)
log "building $CHECK_IMAGE on $CHECK_BASE_IMAGE"
if ! timeout "$BUILD_TIMEOUT" podman build "${build_args[@]}" . >"$workdir/build.log" 2>&1; then
    tail -n 40 "$workdir/build.log" >&2
    fail "podman build failed (its last lines above)"
fi
grep '^migrations packaged at' "$workdir/build.log" >&2 || true
image_id=$(podman image inspect --format '{{.Id}}' "$CHECK_IMAGE")
if [[ -n $previous_id && $previous_id != "$image_id" ]]; then
    podman rmi "$previous_id" >/dev/null 2>&1 || true   # the replaced version, unless something uses it
fi
log "built in $((SECONDS - timer)) s"
healthcheck=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$CHECK_IMAGE")
[[ $healthcheck == *_emulator/health* ]] || fail "image has no HEALTHCHECK on /_emulator/health: $healthcheck"

# --- 3. run: non-root, healthy, API on 7480, migrations, both roles --------------------------------
timer=$SECONDS
log "starting $CONTAINER (network namespace $NETNS: loopback only)"
podman run --detach --name "$CONTAINER" "${ULIMITS[@]}" "${NETWORK[@]}" --volume "$VOLUME:/data" "$CHECK_IMAGE" \
    >/dev/null 2>"$workdir/run.err" || { cat "$workdir/run.err" >&2; fail "podman run failed"; }

wait_healthy() {  # NAME: until the image's own HEALTHCHECK passes, and inspect shows "healthy"
    local deadline=$((SECONDS + HEALTH_TIMEOUT)) state
    until podman healthcheck run "$1" >/dev/null 2>&1; do
        state=$(podman inspect --format '{{.State.Status}}' "$1")
        [[ $state == running ]] || fail "$1 is $state, not running"
        ((SECONDS < deadline)) || fail "$1: health check still failing after ${HEALTH_TIMEOUT}s; its command: $(
            podman inspect --format '{{json .Config.Healthcheck.Test}}' "$1" 2>/dev/null | cut -c 1-200); it said: $(
            podman healthcheck run "$1" 2>&1 >/dev/null | tail -c 300; podman inspect --format \
            '{{range .State.Health.Log}}{{.Output}}{{end}}' "$1" 2>/dev/null | tail -n 3 | tr '\n' ' ' | tail -c 300)"
        sleep 1
    done
    state=$(podman inspect --format '{{.State.Health.Status}}' "$1" 2>/dev/null \
            || podman inspect --format '{{.State.Healthcheck.Status}}' "$1")
    [[ $state == healthy ]] || fail "$1: health check passed but the container shows '$state'"
}
wait_healthy "$CONTAINER"
log "healthy by the image's own HEALTHCHECK, $((SECONDS - timer)) s after start"

uid=$(podman exec "$CONTAINER" id -u)
users=$(podman top "$CONTAINER" huser | tail -n +2 | sort -u | tr '\n' ' ')
log "container user: uid $uid; its processes run as host uid(s) $users"
[[ $uid == 10001 && $users == "10001 " ]] || fail "the emulator runs as '$uid' / '$users', not as the non-root uid 10001"

# HTTP helper, inside the namespace: api METHOD PATH [JSON] sets STATUS and BODY.
api() {
    local out
    out=$(in_ns curl --silent --show-error --max-time 15 -X "$1" -H 'Content-Type: application/json' \
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
log "GET $BASE_URL/_emulator/health -> $STATUS $BODY"
[[ $STATUS == 200 && $(jget "$BODY" status) == ok && $(jget "$BODY" database) == sqlite ]] || fail "health endpoint"

migrations=$(podman exec "$CONTAINER" python3 -c '
import sqlite3
from alembic.script import ScriptDirectory
from scheduler_emulator.store.database import migrations_dir
where = migrations_dir()
assert "site-packages" in str(where), where
head = ScriptDirectory(str(where)).get_current_head()
(applied,) = sqlite3.connect("/data/scheduler.db").execute("select version_num from alembic_version").fetchone()
print(f"{applied} {head} {where}")') || fail "the migrations could not be read from the wheel"
read -r applied head where <<<"$migrations"
log "migrations: database at revision $applied, head $head (scripts from $where)"
[[ -n $applied && $applied == "$head" ]] || fail "database revision $applied is not the head $head"

cpus=$(podman exec "$CONTAINER" python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
processes=$(podman top "$CONTAINER" args | tail -n +2)
log "processes ($cpus CPUs):"$'\n'"$processes"
if ((cpus >= 2)); then
    [[ $(grep -c 'scheduler-emulator' <<<"$processes") -ge 2 ]] && grep -q -- '--no-api.*--supervised' <<<"$processes" \
        || fail "with $cpus CPUs the container should run the API and its dispatcher child (--no-api --supervised)"
fi

# --- 4. a one-time job fires at a target on the host (in the namespace) ----------------------------
cat >"$workdir/target.py" <<'EOF'
import http.server, json, sys
requests = open(sys.argv[1], "a", buffering=1)
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
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Target)
open(sys.argv[2], "w").write(str(server.server_address[1]))
server.serve_forever()
EOF
in_ns python3 "$workdir/target.py" "$workdir/requests.jsonl" "$workdir/target.port" &
target_pid=$!
for _ in $(seq 50); do [[ -s $workdir/target.port ]] && break; sleep 0.1; done
[[ -s $workdir/target.port ]] || fail "the HTTP target did not start"
target_url="http://127.0.0.1:$(cat "$workdir/target.port")/check/fired"
log "HTTP target: $target_url"

create_job() {  # COLLECTION JOB BODY-TEXT
    api PUT "$ARM/jobCollections/$1?$API_VERSION" '{"location": "westus", "properties": {"sku": {"name": "Standard"}}}'
    [[ $STATUS == 200 || $STATUS == 201 ]] || fail "create job collection $1: $STATUS $BODY"
    api PUT "$ARM/jobCollections/$1/jobs/$2?$API_VERSION" '{"properties": {"action": {"type": "Http",
        "request": {"uri": "'"$target_url"'", "method": "POST", "body": "'"$3"'"}, "retryPolicy": {"retryType": "None"}}}}'
    [[ $STATUS == 200 || $STATUS == 201 ]] || fail "create job $1/$2: $STATUS $BODY"
    log "PUT one-time job $1/$2 (no startTime: runs now) -> $STATUS"
}
wait_fired() {  # COLLECTION JOB BODY-TEXT: history Completed, the target got the body, the job Completed
    local deadline=$((SECONDS + FIRE_TIMEOUT)) history_status request
    while :; do
        api GET "$ARM/jobCollections/$1/jobs/$2/history?$API_VERSION"
        [[ $STATUS == 200 ]] || fail "history: $STATUS $BODY"
        history_status=$(jget "$BODY" value.0.properties.status)
        [[ -z $history_status ]] || break
        ((SECONDS < deadline)) || fail "no history entry for $1/$2 after ${FIRE_TIMEOUT}s"
        sleep 1
    done
    log "history of $2: $history_status - $(jget "$BODY" value.0.properties.message | tr '\n' ' ' | cut -c 1-120)"
    [[ $history_status == Completed ]] || fail "history says $history_status, not Completed"
    request=$(grep -F "\"body\": \"$3\"" "$workdir/requests.jsonl" | head -n1 || true)
    [[ -n $request ]] || fail "the target did not receive '$3'"
    [[ $(jget "$request" method) == POST && $(jget "$request" headers.x-ms-scheduler-jobid) == "$2" ]] \
        || fail "unexpected request: $request"
    log "target received POST '$3' with x-ms-scheduler-jobid $2"
    api GET "$ARM/jobCollections/$1/jobs/$2?$API_VERSION"
    # The answers' real casing (docs/reference/arm-api.md#enumerations): the job's state is "completed", its
    # history entry's status "Completed".
    [[ $(jget "$BODY" properties.state) == completed ]] || fail "job state is '$(jget "$BODY" properties.state)', not completed"
}
create_job check fire-once "hello from the container"
wait_fired check fire-once "hello from the container"

# --- 5. stop with the documented grace, restart, state kept in the volume --------------------------
podman stop --time "$STOP_GRACE" "$CONTAINER" >/dev/null
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$CONTAINER")
log "podman stop --time $STOP_GRACE: exit code $exit_code"
[[ $exit_code == 0 ]] || fail "the service did not stop cleanly on SIGTERM within ${STOP_GRACE}s (exit $exit_code)"
podman start "$CONTAINER" >/dev/null 2>"$workdir/run.err" || { cat "$workdir/run.err" >&2; fail "restart failed"; }
wait_healthy "$CONTAINER"
api GET "$ARM/jobCollections/check/jobs/fire-once?$API_VERSION"
[[ $STATUS == 200 && $(jget "$BODY" properties.state) == completed ]] || fail "after restart, the job: $STATUS $BODY"
api GET "$ARM/jobCollections/check/jobs/fire-once/history?$API_VERSION"
[[ $STATUS == 200 && $(jget "$BODY" value.0.properties.status) == Completed ]] || fail "after restart, history: $STATUS $BODY"
log "after the restart the job and its history are still there (volume $VOLUME)"

# --- 6. a volume the image's user cannot write -----------------------------------------------------
# The main container still listens on 7480 in the shared namespace: stop it first, or this one refuses the port
# before it looks at /data.
podman stop --time 20 "$CONTAINER" >/dev/null 2>&1 || true
readonly_dir=$workdir/readonly-data
mkdir -m 0755 "$readonly_dir"   # owned by root: uid 10001 may read, not write
set +e
timeout 60 podman run --name "$CONTAINER-readonly" "${ULIMITS[@]}" "${NETWORK[@]}" --volume "$readonly_dir:/data" \
    "$CHECK_IMAGE" >"$workdir/readonly.log" 2>&1
readonly_rc=$?
set -e
log "with /data not writable by uid 10001: exit $readonly_rc, said: $(grep -m1 -i 'writable' "$workdir/readonly.log" || tail -n1 "$workdir/readonly.log")"
[[ $readonly_rc != 0 && $readonly_rc != 124 ]] || fail "the container did not refuse to start on an unwritable /data (exit $readonly_rc)"
grep -q 'is not writable by this user' "$workdir/readonly.log" || fail "no clear message for an unwritable /data: $(tail -n 5 "$workdir/readonly.log")"

# --- 7. docker-compose.yml, as the README's CI example runs it, against podman's Docker API ---------
timer=$SECONDS
printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n[engine]\nruntime = "runc"\n' \
    >"$workdir/containers.conf"
CONTAINERS_CONF=$workdir/containers.conf nsenter --net="/run/netns/$NETNS" \
    podman system service --time 0 "unix://$workdir/podman.sock" >"$workdir/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 100); do
    curl --silent --max-time 2 --unix-socket "$workdir/podman.sock" http://podman/_ping >/dev/null 2>&1 && break
    kill -0 "$service_pid" 2>/dev/null || { cat "$workdir/service.log" >&2; fail "podman system service exited"; }
    sleep 0.1
done
api_version=$(curl --silent --max-time 5 --unix-socket "$workdir/podman.sock" http://podman/version) \
    || fail "podman system service does not answer on $workdir/podman.sock"
log "$(docker-compose version --short 2>/dev/null | sed 's/^/docker-compose /') against podman $(jget "$api_version" Version) (Docker API $(jget "$api_version" ApiVersion)), namespace $NETNS"

# The README's command (docker compose -f .../docker-compose.yml up -d --build --no-deps scheduler), with the
# image of section 2 instead of --build.
compose up --detach --no-build --no-deps scheduler >"$workdir/compose-up.log" 2>&1 \
    || { cat "$workdir/compose-up.log" >&2; fail "docker-compose up -d --no-deps scheduler failed"; }
compose_container=$(compose ps --quiet scheduler) || fail "docker-compose ps scheduler failed"
[[ -n $compose_container ]] || fail "docker-compose up started no scheduler container"
# The README's wait (timeout 120 ... until curl -fsS .../_emulator/health), on the published 127.0.0.1:7480.
in_ns timeout "$HEALTH_TIMEOUT" sh -c 'until curl -fsS --max-time 5 http://127.0.0.1:7480/_emulator/health >/dev/null 2>&1; do sleep 2; done' \
    || fail "docker-compose: http://127.0.0.1:7480/_emulator/health not answering 200 after ${HEALTH_TIMEOUT}s (the README's URL); the service's container port 7480 is published at '$(compose port scheduler 7480 2>&1)'"
log "docker-compose: the README's wait passed $((SECONDS - timer)) s after the podman service started"
# The compose file's healthcheck, as `docker compose ps` and `up --wait` see it (the Docker API's State.Health).
wait_healthy "$compose_container"
inspected=$(curl --silent --max-time 5 --unix-socket "$workdir/podman.sock" "http://podman/containers/$compose_container/json")
[[ $(jget "$inspected" State.Health.Status) == healthy ]] \
    || fail "docker-compose: the Docker API shows health '$(jget "$inspected" State.Health.Status)': $(jget "$inspected" State.Health.Log)"
log "docker-compose: the compose healthcheck reports healthy (Docker API); ports $(compose port scheduler 7480)"

# A job fired by the compose-run emulator, at its own loopback (the compose network's bridge has no target).
api PUT "$ARM/jobCollections/compose?$API_VERSION" '{"location": "westus", "properties": {"sku": {"name": "Standard"}}}'
[[ $STATUS == 200 || $STATUS == 201 ]] || fail "docker-compose: create job collection: $STATUS $BODY"
api PUT "$ARM/jobCollections/compose/jobs/fire-self?$API_VERSION" '{"properties": {"action": {"type": "Http",
    "request": {"uri": "http://127.0.0.1:7480/_emulator/health", "method": "GET"}, "retryPolicy": {"retryType": "None"}}}}'
[[ $STATUS == 200 || $STATUS == 201 ]] || fail "docker-compose: create job: $STATUS $BODY"
deadline=$((SECONDS + FIRE_TIMEOUT))
while :; do
    api GET "$ARM/jobCollections/compose/jobs/fire-self/history?$API_VERSION"
    [[ $STATUS == 200 ]] || fail "docker-compose: history: $STATUS $BODY"
    history_status=$(jget "$BODY" value.0.properties.status)
    [[ -z $history_status ]] || break
    ((SECONDS < deadline)) || fail "docker-compose: no history entry for compose/fire-self after ${FIRE_TIMEOUT}s"
    sleep 1
done
log "docker-compose: history of fire-self: $history_status - $(jget "$BODY" value.0.properties.message | tr '\n' ' ' | cut -c 1-100)"
[[ $history_status == Completed ]] || fail "docker-compose: history says $history_status, not Completed"

# stop (the file's stop_grace_period: 20s), then down -v.
compose stop scheduler >"$workdir/compose-stop.log" 2>&1 || { cat "$workdir/compose-stop.log" >&2; fail "docker-compose stop failed"; }
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$compose_container")
log "docker-compose stop: exit code $exit_code"
[[ $exit_code == 0 ]] || fail "docker-compose stop: the service did not stop cleanly within its stop_grace_period (exit $exit_code)"
compose down --volumes >"$workdir/compose-down.log" 2>&1 || { cat "$workdir/compose-down.log" >&2; fail "docker-compose down -v failed"; }
leftover=$(podman ps --all --quiet --filter "label=com.docker.compose.project=$COMPOSE_PROJECT"; \
           podman volume ls --quiet --filter "label=com.docker.compose.project=$COMPOSE_PROJECT")
[[ -z $leftover ]] || fail "docker-compose down -v left: $leftover"
log "docker-compose: up, healthy, a job fired, stopped and down -v in $((SECONDS - timer)) s"

size=$(podman image inspect --format '{{.Size}}' "$CHECK_IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' "$CHECK_BASE_IMAGE" 2>/dev/null || echo 0)
log "image $CHECK_IMAGE: $(awk -v s="$size" -v b="$base_size" 'BEGIN { printf "%.0f MB (base %.0f MB, emulator venv %.0f MB)", s / 1e6, b / 1e6, (s - b) / 1e6 }')"
