#!/usr/bin/env bash
# scripts/gpu-check.sh --build-only in this --with-cuda build tree, and what the GPU
# programs do where a GPU is missing or broken. So a GPU's first minutes are not spent
# finding that a program does not link, or that a broken driver reads as "no GPU":
#  1. --build-only links every program of `make gpu-programs` into a bundle folder
#     (exit 0, each one there and executable).
#  2. A deliberately shortened object list (GPU_TRAIN_HOST without the SIMD files that
#     src/kernels/simd/half.c needs, as the script linked before it asked make) fails it: exit 1,
#     the linker's undefined reference shown, gpu_train named as not built.
#  3. No NVIDIA driver and no device here (the test says so and skips this part when
#     there is one): the bundle's test_ops and gpu_train exit 77 with a "skip: no GPU"
#     line naming what is missing; gpu-check on the bundle exits 77 saying so.
#  4. A broken start: a stub libcuda.so.1 (built here) on LD_LIBRARY_PATH that loads
#     and fails cuInit. test_ops and gpu_train FAIL (exit 1) with the runtime's message;
#     gpu-check exits 1 with the message and FAILED in its table, and reruns the failed
#     program with CUDA_LAUNCH_BLOCKING=1; gentrain (offload = auto) trains on the CPU
#     and its offload line says why, not "no GPU"; with offload = required it refuses.
# Environment: top_srcdir, top_builddir, GENTRAIN (the --with-cuda gentrain).
set -u
: "${top_srcdir:?top_srcdir must point at the source tree}"
: "${top_builddir:?top_builddir must point at the build tree}"
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
progs=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$top_builddir" \
    gpu-programs 2>/dev/null | sed -n 's/^GPU_CHECK_PROGS=//p')
if [ -z "$progs" ]; then
    echo "skip: this build was not configured --with-cuda (no GPU programs)"
    exit 77
fi

. "$top_srcdir/tests/lib.sh"
test_tmpdir gpu_check_build
export TMPDIR=$tmp
CHECK=(timeout 600 bash "$top_srcdir/scripts/gpu-check.sh")

# ------------------------------------------------------------- 1. the bundle
GPU_CHECK_BUILD=$top_builddir GPU_CHECK_BUNDLE=$tmp/bundle run_ok build "${CHECK[@]}" --build-only
show "$tmp/build.out"
n=0
for p in $progs; do [ -x "$tmp/bundle/$p" ] && n=$((n + 1)); done
check "build: all $(echo $progs | wc -w) programs ($progs) in the bundle ($n)" \
    test $n -eq "$(echo $progs | wc -w)" -a $n -ge 2
check "build: says how to run the bundle" \
    grep -q "^gpu-check: run them where the GPU is with GPU_CHECK_BIN=$tmp/bundle" "$tmp/build.out"

# ------------------------------------------------------------- 2. a dropped source
GPU_CHECK_BUILD=$top_builddir GPU_CHECK_BUNDLE=$tmp/dropped \
    GPU_CHECK_MAKEFLAGS="GPU_TRAIN_HOST='lossscale half'" "${CHECK[@]}" --build-only \
    > "$tmp/dropped.out" 2>&1
rc=$?
show "$tmp/dropped.out"
check "dropped source: exit 1 (rc $rc)" test $rc -eq 1
check "dropped source: the linker's undefined reference is shown" \
    grep -q 'undefined reference to .simd_' "$tmp/dropped.out"
check "dropped source: gpu_train named as not built, FAILED" \
    test "$(grep -c '^gpu-check: not built: gpu_train$\|^gpu-check: FAILED$' "$tmp/dropped.out")" -eq 2

# ------------------------------------------------------------- 3. no GPU here
if [ -e /proc/driver/nvidia ] || /sbin/ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    echo "skip: part 3 (this machine has an NVIDIA driver)"
else
    for p in $progs; do
        "$tmp/bundle/$p" > "$tmp/none-$p.out" 2>&1
        rc=$?
        check "no driver: $p exits 77 (rc $rc) saying what is missing" test $rc -eq 77 -a \
            "$(grep -c '^skip: no GPU: no NVIDIA driver (no libcuda.so.1, no /proc/driver/nvidia)' \
               "$tmp/none-$p.out")" -eq 1
    done
    GPU_CHECK_BIN=$tmp/bundle "${CHECK[@]}" > "$tmp/none-check.out" 2>&1
    rc=$?
    show "$tmp/none-check.out"
    check "no driver: gpu-check exits 77 (rc $rc), says skipped" test $rc -eq 77 -a \
        "$(grep -c '^gpu-check: no GPU here (no NVIDIA driver, no device): skipped$' \
           "$tmp/none-check.out")" -eq 1
fi

# ------------------------------------------------------------- 4. a broken start
mkdir -p "$tmp/stub"
cat > "$tmp/stub/stub.c" <<'EOF'
/* A driver library that loads and cannot start: cuInit answers
 * CUDA_ERROR_NOT_INITIALIZED (3), whatever the runtime asks next. */
int cuInit(unsigned flags) { (void)flags; return 3; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
EOF
if ! ${CC:-cc} -shared -fPIC -o "$tmp/stub/libcuda.so.1" "$tmp/stub/stub.c" 2> "$tmp/stub.err"; then
    fail "setup: building the stub libcuda.so.1"
    show "$tmp/stub.err"
    exit 1
fi
BROKEN="CUDA cannot start although the NVIDIA driver library libcuda.so.1 loads"
for p in $progs; do
    LD_LIBRARY_PATH=$tmp/stub "$tmp/bundle/$p" > "$tmp/stub-$p.out" 2>&1
    rc=$?
    show "$tmp/stub-$p.out"
    check "broken start: $p FAILS (rc $rc, not 77) with the runtime's message" test $rc -eq 1 -a \
        "$(grep -c "^FAIL $BROKEN: .* (cudaError[A-Za-z]*)\$" "$tmp/stub-$p.out")" -eq 1
done
LD_LIBRARY_PATH=$tmp/stub GPU_CHECK_BIN=$tmp/bundle GPU_CHECK_ONLY=test_ops "${CHECK[@]}" \
    > "$tmp/stub-check.out" 2>&1
rc=$?
show "$tmp/stub-check.out"
check "broken start: gpu-check exits 1 (rc $rc) with FAILED" test $rc -eq 1 -a \
    "$(grep -c '^gpu-check: FAILED$' "$tmp/stub-check.out")" -eq 1
check "broken start: gpu-check shows the message" grep -q "^FAIL $BROKEN" "$tmp/stub-check.out"
check "broken start: test_ops FAILED (exit 1) in the table" \
    grep -q '^  test_ops  *FAILED (exit 1)  *[0-9]*$' "$tmp/stub-check.out"
check "broken start: rerun with CUDA_LAUNCH_BLOCKING=1, its end shown" test \
    "$(grep -c "^gpu-check: test_ops failed; once more with CUDA_LAUNCH_BLOCKING=1\|^  | FAIL $BROKEN" \
       "$tmp/stub-check.out")" -eq 2

prepare_slice
tiny_gpt_args
LD_LIBRARY_PATH=$tmp/stub run_ok gentrain timeout 300 "$GENTRAIN" train "${TINY[@]}" --steps 2 \
    --out "$tmp/run"
show "$tmp/gentrain.out"
check "broken start: gentrain's offload line says why the CPU trains" grep -q \
    "^offload: the GPU cannot be used ($BROKEN: initialization error (cudaErrorInitializationError)); every layer runs on the CPU\$" \
    "$tmp/gentrain.out"
LD_LIBRARY_PATH=$tmp/stub timeout 300 "$GENTRAIN" train "${TINY[@]}" --steps 2 --offload required \
    --out "$tmp/run2" > "$tmp/required.out" 2>&1
rc=$?
check "broken start: offload = required refuses (rc $rc) with the message" test $rc -ne 0 -a \
    "$(grep -c "offload = required, but $BROKEN" "$tmp/required.out")" -eq 1

echo "$fails failed"
[ $fails -eq 0 ]
