#!/usr/bin/env bash
# Builds the sandbox's base image from Debian's packages, with no image registry:
# debootstrap a minimal root filesystem, then `docker import` it. Idempotent.
set -euo pipefail

IMAGE="${1:-gaffer-sandbox-base:latest}"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base image $IMAGE is already built"
    exit 0
fi

if ! command -v debootstrap >/dev/null; then
    apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null
fi

# The same Debian release and mirror this machine's apt already uses.
. /etc/os-release
SUITE="${VERSION_CODENAME:-bookworm}"
MIRROR="$(
    { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
      grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } |
    grep -v -- '-security' | head -n1
)" || true
if [ -z "$MIRROR" ]; then
    echo "cannot find a Debian mirror in this machine's apt sources" >&2
    exit 1
fi

# What a worker needs to run a project's tests.
PACKAGES=python3,python3-pytest,python3-venv,git,ripgrep,make,gcc,libc6-dev,procps,ca-certificates

ROOTFS="$(mktemp -d /tmp/gaffer-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
echo "debootstrap $SUITE from $MIRROR into $ROOTFS (a few minutes)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >/dev/null
# Package lists and caches are dead weight in an image that never runs apt.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*
tar -C "$ROOTFS" -c . | docker import --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "built $IMAGE"
