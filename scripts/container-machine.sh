#!/usr/bin/env bash
# What the container check (scripts/container-check.sh) needs from the machine: Debian's podman with runc (crun
# fails on cgroup v1 hybrid hierarchies), debootstrap for the base image, iproute2 for its network namespace, curl,
# docker-compose (Debian's 1.29) for the compose step.
# Installed with apt-get when missing and running as root (as scripts/test-machine.sh does for the suite);
# otherwise one message naming what is missing and the command that installs it, and a non-zero exit.
set -euo pipefail

# program  Debian package
REQUIRED=("podman podman" "runc runc" "debootstrap debootstrap" "ip iproute2" "curl curl" "docker-compose docker-compose")

missing_programs=()
missing_packages=()
for row in "${REQUIRED[@]}"; do
  read -r program package <<<"$row"
  command -v "$program" >/dev/null 2>&1 || { missing_programs+=("$program"); missing_packages+=("$package"); }
done
((${#missing_packages[@]})) || exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "container-machine: installing ${missing_packages[*]} (Debian packages) for the container check" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if apt-get install -y -qq --no-install-recommends "${missing_packages[@]}" >/dev/null; then
    exit 0
  fi
fi
echo "container-machine: the container check needs ${missing_programs[*]} (root, and the Debian packages" \
  "${missing_packages[*]}: sudo apt-get install --no-install-recommends ${missing_packages[*]})" >&2
exit 1
