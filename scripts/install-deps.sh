#!/bin/sh
# Installs what gentrain needs to build and test on Debian / Ubuntu.
# Idempotent: does nothing (and needs no network) when every package is present.
# Runs as root, or through sudo when it is available.
# --tests: then also what the optional tests need (scripts/install-test-deps.sh), so
# `make check` runs the tests CI runs; the README's test command passes it.
set -eu

TESTS=no
case "${1:-}" in
    --tests) TESTS=yes ;;
    "") ;;
    *) echo "usage: $0 [--tests]" >&2; exit 2 ;;
esac
# The optional test dependencies, after the build's (never a reason to fail).
finish() {
    if [ "$TESTS" = yes ]; then
        "$(dirname "$0")/install-test-deps.sh" || true
    fi
    exit 0
}

# procps: pgrep/pkill for the tests (minimal container images lack it). g++: the host
# compiler nvcc needs, and the one that runs the CUDA tests on the CPU (--with-cuda).
# clang and libomp-dev: the fuzz targets (libFuzzer; tests/test_fuzz_smoke.sh, make fuzz).
PACKAGES="autoconf automake libtool pkg-config autoconf-archive make gcc g++
libopenmpi-dev openmpi-bin libopenblas-openmp-dev libhdf5-openmpi-dev hdf5-tools procps
clang libomp-dev"

missing=
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all build dependencies are installed"
    finish
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: apt-get not found; install these by hand:$missing" >&2
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: not root and no sudo; as root run: apt-get install$missing" >&2
    exit 1
fi

echo "install-deps: installing$missing"
APT_OPTS="-o DPkg::Lock::Timeout=900"
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get $APT_OPTS update -q
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get $APT_OPTS install -y -q $missing
echo "install-deps: done"
finish
