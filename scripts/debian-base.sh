#!/usr/bin/env bash
# Build a Debian 12 (bookworm) base image with Python 3.11 from Debian packages alone, for hosts that
# reach a Debian mirror but no container registry. The result can stand in for python:3.11-slim:
#
#   podman build --build-arg BASE_IMAGE=localhost/scheduler-emulator-base:debian12 ...
#
# debootstrap --variant=minbase with python3 and python3-venv (the Dockerfile makes its venv with
# `python3 -m venv`), trimmed of apt caches, docs, man pages and locales, imported with `podman import`.
# Cached: nothing is done when the image already exists (REBUILD_BASE=1 forces a rebuild).
#
# Needs root, debootstrap and podman:  apt-get install -y debootstrap podman runc
#
# Environment:
#   BASE_IMAGE     image name to create   (default localhost/scheduler-emulator-base:debian12)
#   DEBIAN_MIRROR  mirror URL             (default: the host's first Debian mirror, else deb.debian.org)
#   DEBIAN_SUITE   suite                  (default bookworm)
#   REBUILD_BASE   1 to rebuild even if the image exists
set -euo pipefail

BASE_IMAGE=${BASE_IMAGE:-localhost/scheduler-emulator-base:debian12}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBOOTSTRAP_TIMEOUT=${DEBOOTSTRAP_TIMEOUT:-900}

log() { printf '[debian-base] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Pinned to runc: crun fails on this kind of host (cgroup v1 / hybrid hierarchy).
podman() { command podman --runtime "${PODMAN_RUNTIME:-runc}" "$@"; }

if [[ ${REBUILD_BASE:-0} != 1 ]] && podman image exists "$BASE_IMAGE"; then
    log "$BASE_IMAGE exists; reusing it (REBUILD_BASE=1 rebuilds)"
    exit 0
fi

[[ $(id -u) == 0 ]] || die "debootstrap needs root"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap"

if [[ -z ${DEBIAN_MIRROR:-} ]]; then
    DEBIAN_MIRROR=$(sed -n 's/^URIs:[[:space:]]*\(\S*\/debian\)\/\?$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 || true)
    if [[ -z $DEBIAN_MIRROR ]]; then
        DEBIAN_MIRROR=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    fi
    DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi

workdir=$(mktemp -d /var/tmp/scheduler-emulator-base.XXXXXX)
root="$workdir/root"
cleanup() {
    # debootstrap mounts /proc and /sys inside the target; release anything left by an interrupted run.
    awk -v r="$root" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$workdir"
}
trap cleanup EXIT

log "debootstrap $DEBIAN_SUITE (minbase + python3, python3-venv) from $DEBIAN_MIRROR; takes a few minutes"
if ! timeout "$DEBOOTSTRAP_TIMEOUT" debootstrap --variant=minbase --include=python3,python3-venv \
        "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" >"$workdir/debootstrap.log" 2>&1; then
    tail -n 30 "$workdir/debootstrap.log" >&2
    die "debootstrap failed (log above)"
fi

python_version=$(chroot "$root" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
log "Python $python_version in the base"
chroot "$root" python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' \
    || die "the base needs Python >= 3.11 with venv and ensurepip"

# Trim: downloaded .debs, package lists, docs, man pages, locales. apt still works after `apt-get update`.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
       "$root"/var/log/* "$root"/tmp/* "$root"/var/tmp/*

log "importing as $BASE_IMAGE"
tar --numeric-owner --xattrs -C "$root" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --quiet --message "debootstrap $DEBIAN_SUITE minbase + python3 python3-venv" \
    - "$BASE_IMAGE" >/dev/null
log "done: $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
