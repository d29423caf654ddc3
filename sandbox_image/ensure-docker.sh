#!/usr/bin/env bash
# Makes sure a Docker daemon answers: installs Debian's docker.io and starts dockerd when
# this machine has none (as root; these machines ship only the docker client).
set -euo pipefail

# The cluster tests put their nodes in network namespaces of their own (iproute2).
if ! command -v ip >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi
if docker info >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "no Docker daemon answers, and only root with apt-get can set one up here" >&2
    exit 1
fi
if ! command -v dockerd >/dev/null; then
    echo "installing docker.io (Debian's package)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
    echo "starting dockerd"
    nohup dockerd >/var/log/gaffer-dockerd.log 2>&1 &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && exit 0
        sleep 1
    done
    echo "dockerd did not start; see /var/log/gaffer-dockerd.log" >&2
    tail -n 20 /var/log/gaffer-dockerd.log >&2 || true
    exit 1
fi
