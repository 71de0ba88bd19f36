#!/bin/bash
# Builds gentrain with the sanitizers in build-check/ (out of tree) and runs
# `make check`, then `make distcheck-lean` there (the release tarball built plainly,
# without sanitizers: configure, make, a few tests, install, installcheck, uninstall;
# counted as one test; GENTRAIN_NO_DISTCHECK=1 leaves it out). Every skipped test is
# listed with the reason it printed. The last line printed is always
# "N passed, N failed[, N skipped]".
# Where the CUDA toolkit is (nvcc in $CUDA_HOME, default /usr/local/cuda), the build
# is configured --with-cuda, so the offload code is compiled too (and, without a GPU,
# the tests check the CPU fallback). GENTRAIN_NO_CUDA=1 skips that.
# Exit status: that of `make check` (non-zero also when configure or make fails).
set -u

cd "$(dirname "$0")/.." || exit 1
SRC=$(pwd)
BUILD="$SRC/build-check"
JOBS=$(nproc 2>/dev/null || echo 2)

export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

fail() {
    echo "run-tests: $*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

if [ -f "$SRC/config.status" ]; then
    fail "the source tree is configured in place; run 'make distclean' in $SRC first"
fi

if [ ! -x "$SRC/configure" ] || [ "$SRC/configure.ac" -nt "$SRC/configure" ] ||
   [ "$SRC/Makefile.am" -nt "$SRC/configure" ] ||
   [ ! -f "$SRC/Makefile.in" ] || [ "$SRC/Makefile.am" -nt "$SRC/Makefile.in" ]; then
    echo "run-tests: ./bootstrap"
    "$SRC/bootstrap" || fail "./bootstrap failed"
fi

mkdir -p "$BUILD" && cd "$BUILD" || fail "cannot create $BUILD"

CONF=(--enable-sanitizers)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -z "${GENTRAIN_NO_CUDA:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then
    CONF+=(--with-cuda="$CUDA_HOME")
fi
# config.status records the arguments as one quoted string.
if [ ! -f Makefile ] || [ ! -f config.status ] || [ "$SRC/configure" -nt config.status ] ||
   [ "$(sed -n 's/^ac_cs_config=//p' config.status)" != "'${CONF[*]}'" ]; then
    echo "run-tests: ../configure ${CONF[*]}"
    ../configure "${CONF[@]}" || fail "configure failed (see $BUILD/config.log)"
fi

echo "run-tests: make -j$JOBS"
make -j"$JOBS" || fail "build failed"

rm -f test-suite.log
touch check-start.stamp
echo "run-tests: make -j$JOBS check"
make -j"$JOBS" check
status=$?

log=test-suite.log
if [ ! -f "$log" ]; then
    # The test programs did not build, or the harness never ran.
    echo "0 passed, 1 failed"
    [ "$status" -ne 0 ] || status=1
    exit "$status"
fi

count() { sed -n "s/^# $1: *\([0-9][0-9]*\).*/\1/p" "$log" | head -n 1; }
pass=$(count PASS); fail_n=$(count FAIL); err=$(count ERROR)
xpass=$(count XPASS); skip=$(count SKIP)
pass=${pass:-0}; fail_n=${fail_n:-0}; err=${err:-0}; xpass=${xpass:-0}; skip=${skip:-0}
failed=$((fail_n + err + xpass))

echo
echo "==================== test-suite.log ($BUILD) ===================="
if [ "$failed" -gt 0 ]; then
    # Summary plus the logs of the failing tests (bounded so CI output stays readable).
    head -n 400 "$log"
else
    sed -n '1,/^# ERROR/p' "$log"
fi
echo "================================================================="

if [ "$status" -eq 0 ] && [ "$failed" -gt 0 ]; then status=1; fi

# Why each skipped test skipped: the line it printed before exit 77 (the last line of
# its log above automake's own result line).
if [ "$skip" -gt 0 ]; then
    echo "skipped tests and why:"
    for trs in $(find tests offload -name '*.trs' -newer check-start.stamp 2>/dev/null | sort); do
        grep -q '^:test-result: SKIP' "$trs" || continue
        tlog=${trs%.trs}.log
        why=$(grep -v '^SKIP: ' "$tlog" 2>/dev/null | grep -i -m 1 'skip' ||
              grep -v '^SKIP: ' "$tlog" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n 1)
        echo "  SKIP ${trs%.trs}: ${why:-(the test printed no reason)}"
    done
fi

# The release tarball, built and installed plainly (not counted when check failed to
# build at all: test-suite.log exists here).
if [ -z "${GENTRAIN_NO_DISTCHECK:-}" ]; then
    echo "run-tests: make distcheck-lean"
    dc_start=$(date +%s)
    if make distcheck-lean > distcheck.log 2>&1; then
        pass=$((pass + 1))
        echo "PASS: make distcheck-lean ($(( $(date +%s) - dc_start )) s; log $BUILD/distcheck.log)"
    else
        failed=$((failed + 1))
        status=1
        echo "FAIL: make distcheck-lean ($(( $(date +%s) - dc_start )) s); the end of $BUILD/distcheck.log:"
        tail -n 40 distcheck.log
    fi
fi

line="$pass passed, $failed failed"
[ "$skip" -gt 0 ] && line="$line, $skip skipped"
echo "$line"
exit "$status"
