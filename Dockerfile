# Container image of azure-scheduler-emulator.
#
#   docker build -t azure-scheduler-emulator .
#   docker run -d -p 7480:7480 -v scheduler-data:/data azure-scheduler-emulator
#   (podman: `podman build --format docker ...`; the OCI format has no HEALTHCHECK and podman drops it)
#
# - Listens on 0.0.0.0:7480 inside the container (SCHEDULER_HOST=0.0.0.0: the container boundary
#   replaces the loopback-only default). Arguments after the image name are passed to
#   `scheduler-emulator` (e.g. `--https`, `--log-level debug`); every flag is also an env var SCHEDULER_<NAME>.
# - State (SQLite database, generated TLS certificate) lives in the volume /data, owned by the
#   non-root user `scheduler` (uid/gid 10001). A bind-mounted host folder must be writable by 10001.
# - Health: GET /_emulator/health (200 when the store answers, 503 when it does not).
# - Stopping: SIGTERM; attempts in flight get SCHEDULER_SHUTDOWN_GRACE (10 s) to finish, so allow a
#   stop timeout of about 20 s (`docker stop -t 20`; compose: stop_grace_period).
#
# BASE_IMAGE may be any Debian-like image with Python >= 3.11 as `python3` and the venv module
# (python:3.11-slim, or Debian 12 with python3 and python3-venv); both stages use it, so the venv built
# in the first stage finds the same interpreter in the second.
#
# The build stage installs from PyPI. Behind a mirror or a TLS-intercepting proxy, pass pip's own
# settings as build arguments (they are only set when given): PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
# PIP_TRUSTED_HOST, PIP_CERT (a CA bundle path readable during the build, e.g. mounted with
# `podman build -v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.pem:ro --build-arg PIP_CERT=/run/host-ca.pem`).
ARG BASE_IMAGE=python:3.11-slim

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS build

ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8

# The venv lives at its final path so that its scripts' #! lines stay valid after the copy.
RUN python3 -m venv /opt/scheduler-emulator

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY migrations ./migrations

# Build the wheel (hatchling, fetched into an isolated build env), install it with its dependencies,
# then drop pip and setuptools: the final image installs nothing.
RUN /opt/scheduler-emulator/bin/pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/scheduler-emulator/bin/pip install /wheels/*.whl \
 && /opt/scheduler-emulator/bin/pip uninstall --yes pip setuptools

# Fail the build, not the first start, if the wheel lacks the Alembic migrations or a dependency.
RUN /opt/scheduler-emulator/bin/python -c "import pathlib, scheduler_emulator.app as app; \
m = pathlib.Path(app.__file__).parent / 'migrations'; \
assert (m / 'env.py').is_file() and any((m / 'versions').glob('*.py')), f'no migrations in {m}'; \
print('migrations packaged at', m)" \
 && /opt/scheduler-emulator/bin/scheduler-emulator --help > /dev/null

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="azure-scheduler-emulator" \
      org.opencontainers.image.description="Emulator of the retired Azure Scheduler (Microsoft.Scheduler) ARM API that really runs jobs" \
      org.opencontainers.image.licenses="MIT"

RUN groupadd --gid 10001 scheduler \
 && useradd --uid 10001 --gid scheduler --home-dir /data --no-create-home --no-log-init \
            --shell /usr/sbin/nologin scheduler \
 && mkdir -p /data \
 && chown scheduler:scheduler /data

COPY --from=build /opt/scheduler-emulator /opt/scheduler-emulator

# PATH is spelled out (not appended to) because an imported base image may not define one.
ENV PATH=/opt/scheduler-emulator/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SCHEDULER_HOST=0.0.0.0 \
    SCHEDULER_PORT=7480 \
    SCHEDULER_DATA_DIR=/data

USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 7480

# Asks the service itself (no curl in the image): same port and scheme as it serves; with HTTPS the
# self-signed certificate is not checked. Any error or a 503 makes the check fail.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "-c", "import os, ssl, urllib.request as u; e = os.environ.get; tls = e('SCHEDULER_HTTPS', '').lower() in ('1', 'true', 'yes', 'on') or bool(e('SCHEDULER_CERT')); u.urlopen(('https' if tls else 'http') + '://127.0.0.1:' + e('SCHEDULER_PORT', '7480') + '/_emulator/health', timeout=4, context=ssl._create_unverified_context() if tls else None)"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["scheduler-emulator"]
CMD []
