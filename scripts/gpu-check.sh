#!/bin/bash
# gpu-check.sh — the GPU checks of gentrain. The programs are the ones `make` builds in
# a build tree configured --with-cuda (Makefile.am's GPU_CHECK_PROGS, each linked from one
# list of objects: `make gpu-bundle` links the same into a folder), so this script never
# compiles anything of its own and cannot drift from the build. Two halves, which can
# run on two machines so that a GPU's minutes go to running, not compiling:
#   scripts/gpu-check.sh --build-only    (GPU_CHECK_BUILD=a --with-cuda build tree;
#       needs nvcc, no GPU) links the programs into a bundle folder (GPU_CHECK_BUNDLE,
#       default BUILD/gpu-bundle) and stops: exit 0 when every program of `make
#       gpu-programs` linked, 1 otherwise. `make check` runs it (tests/test_gpu_check_build.sh)
#       so a list that misses a source fails CI, not the GPU's first minutes.
#   GPU_CHECK_BIN=BUNDLE scripts/gpu-check.sh    runs the bundle's programs (no compiler,
#       no MPI, HDF5 or BLAS needed; the source tree for data/ and scripts/; the CUDA
#       toolkit's libcublas at the path the build linked). GPU_CHECK_BUILD=BUILD instead
#       builds the bundle first and then runs it.
# What it runs, in this order:
#   offload/tests/test_ops         the FP16 kernels (matrix products on cuBLAS with bias,
#                                  causal attention, encoder, LayerNorm, GELU, residual,
#                                  cross-entropy; forward and backward) against an FP32
#                                  reference on the CPU, with poisoned outputs
#   offload/tests/test_nccl        NCCL on one GPU through offload/tp_comm.h: a one-rank
#                                  communicator's all-reduce leaves FP16 values exactly as
#                                  they were (where the build found NCCL; else skipped)
#   offload/tests/gpu_train test   the whole GPU training step (offload/gpu_model.cu,
#                                  gpu_model_make.cu, gpu_model_passes.cu)
#                                  against a CPU reference in double: loss, gradients by
#                                  directional derivatives, full mixed-precision steps,
#                                  loss scaling (overflow skip, growth), gradient
#                                  accumulation, attention's row blocks (2, 4 and the
#                                  whole square), overfitting one batch, a batch smaller
#                                  than the model was made for;
#                                  the blocks-only engine (offload = blocks) between a
#                                  host embedding and head: loss and gradients
#   gpu_train grads                one whole training step at the GPT-2 124M shape (B = 1,
#                                  T = 1024): every parameter tensor's gradient against
#                                  the same step in double on the CPU (offload/tests/
#                                  ref_grads.h), ||g_gpu - g_ref|| / ||g_ref|| < 4.9e-3
#                                  for each, the loss within 1e-4 relative; the reference
#                                  takes most of its time (some 10 to 25 s on 16 cores)
#   gpu_train bench                throughput at the GPT-2 124M shape (largest batch that
#                                  fits, T = 1024): tokens/s and MFU of the GPU step alone,
#                                  of the full step with the host's AdamW, and of the full
#                                  step with 4 micro-batches per update (gradient
#                                  accumulation: 4*B*T tokens per update); the GPU's time
#                                  by phase (one profiled step) and the GPU step with
#                                  attention over the whole T x T square
#   gpu_train shakespeare          600 steps of a 6 x 384 model on data/tinyshakespeare.txt
#                                  (bytes); passes when the val loss ends below 2.0,
#                                  more than 2.5 under where it started
#   grids                          gentrain itself (GPU_CHECK_GENTRAIN: a gentrain built
#                                  --with-cuda, and mpirun) in model-parallel grids on
#                                  the GPUs, scripts/gpu-grids.sh: tp 2, pp 2, dp 2 x tp 2
#                                  and tp 2 x pp 2 against the same grids on the CPU
#                                  (losses within 1e-3), with ms/step; ranks share the
#                                  GPU when there is one (their tp all-reduces then go
#                                  through host memory; with a GPU a rank, over NCCL).
#                                  Without GPU_CHECK_GENTRAIN it is skipped (not failed)
#   sanitizer                      where compute-sanitizer exists (PATH, then
#                                  $CUDA_HOME/bin, /usr/local/cuda/bin): its memcheck,
#                                  racecheck, synccheck and initcheck tools on test_ops and
#                                  on 2 steps of gpu_train bench --small, each a row of the
#                                  table; where it does not exist the row says so (skipped)
# then prints a table of what passed and the benchmark's figures. Each program runs
# under `timeout 300`, and the whole script stops starting programs once its budget
# (GPU_CHECK_BUDGET seconds from the start, default 480) is spent, so it ends within
# about 8 minutes whatever hangs (a few minutes expected on an H200). A program that
# fails is run once more with CUDA_LAUNCH_BLOCKING=1 and GENTRAIN_CUDA_CHECK=1 (every
# kernel launch waited for and checked, by name), and the end of that run is shown, so
# an asynchronous fault is blamed on the kernel that made it.
#
# No GPU and failure are told apart by the programs (offload/cuda_presence.h): with no
# NVIDIA driver and no device they print "skip:" and exit 77, and so does this script;
# where a driver or a device is there and CUDA cannot start, they FAIL with the
# runtime's message, and so does this script.
#
# Environment: GPU_CHECK_BUILD, GPU_CHECK_BUNDLE, GPU_CHECK_BIN (above);
# GPU_CHECK_MAKEFLAGS (more arguments for that make, word-split: other settings, or a
# test's deliberately shortened object list); GPU_CHECK_GENTRAIN (above);
# GPU_CHECK_BUDGET; GPU_CHECK_SMALL=1 runs grads, bench and shakespeare (and grids) at a
# tiny shape (figures that mean nothing), for checking this script itself where there is
# no GPU (tests/test_gpu_check_emu.sh: GPU_CHECK_BIN = the CPU emulation's programs,
# offload/tests/emu of a --with-cuda build tree). GPU_CHECK_ONLY (default "test_ops nccl test
# grads bench shakespeare grids sanitizer") picks which to run, e.g. GPU_CHECK_ONLY=bench
# to measure again without the tests.
# Exit status: 0 everything built and passed, 1 a build or a check failed (or ran out
# of time), 77 no GPU (no NVIDIA driver, no device).
set -u
cd "$(dirname "$0")/.." || exit 1
BUDGET=${GPU_CHECK_BUDGET:-480}
build_only=0
case ${1:-} in
'') ;;
--build-only) build_only=1 ;;
*) echo "gpu-check: unknown argument '$1' (usage: gpu-check.sh [--build-only])" >&2; exit 1 ;;
esac
out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
t_start=$(date +%s)

SMALL=()
[ -n "${GPU_CHECK_SMALL:-}" ] && SMALL=(--small)
ONLY=" ${GPU_CHECK_ONLY:-test_ops nccl test grads bench shakespeare grids sanitizer} "
for w in $ONLY; do
    case $w in
    test_ops | nccl | test | grads | bench | shakespeare | grids | sanitizer) ;;
    *) echo "gpu-check: GPU_CHECK_ONLY: unknown check '$w' (test_ops nccl test grads bench" \
            "shakespeare grids sanitizer)" >&2
       exit 1 ;;
    esac
done
wanted() { [[ $ONLY == *" $1 "* ]]; }

# ---------------------------------------------------------------- build
# build_bundle BUILD BUNDLE: links every program of BUILD's GPU_CHECK_PROGS into BUNDLE
# with BUILD's make; 0 when all of them are there.
build_bundle() {
    local build=$1 bundle=$2 progs p missing=
    [ -f "$build/Makefile" ] || { echo "gpu-check: $build is not a configured build tree" >&2; return 1; }
    # Not the calling make's settings (under `make check` its jobserver and -w).
    progs=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$build" \
        gpu-programs 2>/dev/null | sed -n 's/^GPU_CHECK_PROGS=//p')
    if [ -z "$progs" ]; then
        echo "gpu-check: $build was not configured --with-cuda (make gpu-programs names no program)" >&2
        return 1
    fi
    echo "gpu-check: building $progs with make in $build into $bundle"
    mkdir -p "$bundle" || return 1
    for p in $progs; do rm -f "$bundle/$p"; done
    local flags=()
    # Shell words, so that a value with spaces can be given quoted.
    [ -n "${GPU_CHECK_MAKEFLAGS:-}" ] && eval "flags=($GPU_CHECK_MAKEFLAGS)"
    if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$build" gpu-bundle GPU_BUNDLE="$bundle" \
        "${flags[@]}" > "$out/build.log" 2>&1; then
        echo "gpu-check: the build failed:"
        grep -v '^make\(\[[0-9]*\]\)\?: \(Entering\|Leaving\)' "$out/build.log" | tail -n 25 | sed 's/^/  /'
    fi
    for p in $progs; do [ -x "$bundle/$p" ] || missing+=" $p"; done
    if [ -n "$missing" ]; then
        echo "gpu-check: not built:$missing"
        return 1
    fi
    echo "gpu-check: built $progs in $(( $(date +%s) - t_start )) s"
    return 0
}

if [ $build_only = 1 ]; then
    [ -n "${GPU_CHECK_BUILD:-}" ] || { echo "gpu-check: --build-only needs GPU_CHECK_BUILD (a build tree configured --with-cuda)" >&2; exit 1; }
    bundle=${GPU_CHECK_BUNDLE:-$GPU_CHECK_BUILD/gpu-bundle}
    build_bundle "$GPU_CHECK_BUILD" "$bundle" || { echo "gpu-check: FAILED"; exit 1; }
    echo "gpu-check: run them where the GPU is with GPU_CHECK_BIN=$bundle scripts/gpu-check.sh"
    exit 0
fi
if [ -n "${GPU_CHECK_BIN:-}" ]; then
    echo "gpu-check: not building: the programs of $GPU_CHECK_BIN"
    bin=$GPU_CHECK_BIN
elif [ -n "${GPU_CHECK_BUILD:-}" ]; then
    bin=${GPU_CHECK_BUNDLE:-$GPU_CHECK_BUILD/gpu-bundle}
    build_bundle "$GPU_CHECK_BUILD" "$bin" || { echo "gpu-check: FAILED"; exit 1; }
else
    echo "gpu-check: no programs: set GPU_CHECK_BIN (a bundle of gpu-check.sh --build-only)" \
        "or GPU_CHECK_BUILD (a build tree configured --with-cuda)" >&2
    exit 1
fi
for prog in test_ops gpu_train; do
    [ -x "$bin/$prog" ] || { echo "gpu-check: no $bin/$prog" >&2; exit 1; }
    cp "$bin/$prog" "$out/$prog" || exit 1
done
have_test_ops=1 have_gpu_train=1 have_test_nccl=0
# test_nccl only where the build found NCCL.
if [ -x "$bin/test_nccl" ]; then cp "$bin/test_nccl" "$out/test_nccl" && have_test_nccl=1; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
    sed 's/^/gpu: /'
# what the gentrain of the grids was built with and finds here, for the figures' record
if [ -x "${GPU_CHECK_GENTRAIN:-}" ]; then
    "$GPU_CHECK_GENTRAIN" --build-info 2>&1 | sed 's/^/gentrain: /'
fi

# ---------------------------------------------------------------- run
names=() results=() secs=()
failed=0
run() { # label, have, program (built into $out, or an absolute path), args...
    local label=$1 have=$2 prog=$3
    shift 3
    local exe=$out/$prog
    [[ $prog == /* ]] && exe=$prog
    names+=("$label")
    local left=$(( BUDGET - ($(date +%s) - t_start) ))
    if [ "$have" != 1 ]; then
        results+=("NOT BUILT") secs+=("-")
        failed=1
        return 0
    fi
    if [ $left -lt 10 ]; then
        results+=("NOT RUN (time budget spent)") secs+=("-")
        failed=1
        return 0
    fi
    local limit=$(( left < 300 ? left : 300 ))
    echo
    echo "gpu-check: === $label (timeout $limit s)"
    local t0 rc
    t0=$(date +%s)
    timeout -k 10 "$limit" "$exe" "$@" 2>&1 | tee "$out/run-${label// /_}.log"
    rc=${PIPESTATUS[0]}
    secs+=("$(( $(date +%s) - t0 ))")
    case $rc in
    0) results+=("passed") ;;
    77) echo "gpu-check: no GPU here (no NVIDIA driver, no device): skipped"; exit 77 ;;
    124 | 137) results+=("FAILED: timed out after $limit s"); failed=1 ;;
    *) results+=("FAILED (exit $rc)"); failed=1; rerun_blocking "$label" "$exe" "$@" ;;
    esac
    return "$rc"
}
# rerun_blocking LABEL EXE ARGS...: a failed program once more with every launch waited
# for and checked (CUDA_LAUNCH_BLOCKING=1, GENTRAIN_CUDA_CHECK=1), so an asynchronous
# fault names the kernel that made it; the end of that run is shown.
rerun_blocking() {
    local label=$1 left
    shift
    left=$(( BUDGET - ($(date +%s) - t_start) ))
    if [ $left -lt 20 ]; then
        echo "gpu-check: $label not rerun with CUDA_LAUNCH_BLOCKING=1 (time budget spent)"
        return 0
    fi
    echo "gpu-check: $label failed; once more with CUDA_LAUNCH_BLOCKING=1 GENTRAIN_CUDA_CHECK=1:"
    CUDA_LAUNCH_BLOCKING=1 GENTRAIN_CUDA_CHECK=1 timeout -k 10 $(( left < 300 ? left : 300 )) \
        "$@" > "$out/rerun-${label// /_}.log" 2>&1
    echo "gpu-check: (exit $?) its last lines:"
    tail -n 20 "$out/rerun-${label// /_}.log" | sed 's/^/  | /'
}
# A program that finds no GPU (exit 77) ends the script with 77 (inside run).
wanted test_ops && run test_ops "$have_test_ops" test_ops
if wanted nccl; then
    if [ $have_test_nccl = 1 ]; then
        run test_nccl 1 test_nccl
    else
        names+=(test_nccl) results+=("SKIPPED (built without NCCL)") secs+=("-")
    fi
fi
wanted test && run "gpu_train test" "$have_gpu_train" gpu_train test
wanted grads && run "gpu_train grads" "$have_gpu_train" gpu_train grads "${SMALL[@]}"
wanted bench && run "gpu_train bench" "$have_gpu_train" gpu_train bench "${SMALL[@]}"
wanted shakespeare && run "gpu_train shakespeare" "$have_gpu_train" gpu_train shakespeare \
    --data data/tinyshakespeare.txt "${SMALL[@]}"
if wanted grids; then
    if [ -n "${GPU_CHECK_GENTRAIN:-}" ]; then
        have_grids=0
        [ -x "$GPU_CHECK_GENTRAIN" ] && have_grids=1
        run grids "$have_grids" "$PWD/scripts/gpu-grids.sh" "$GPU_CHECK_GENTRAIN"
    else
        names+=(grids) results+=("SKIPPED (no GPU_CHECK_GENTRAIN)") secs+=("-")
    fi
fi
if wanted sanitizer; then
    san=$(command -v compute-sanitizer || true)
    for d in ${CUDA_HOME:+"$CUDA_HOME/bin"} /usr/local/cuda/bin; do
        [ -z "$san" ] && [ -x "$d/compute-sanitizer" ] && san=$d/compute-sanitizer
    done
    if [ -z "$san" ]; then
        echo "gpu-check: no compute-sanitizer (not on PATH, in \$CUDA_HOME/bin or" \
            "/usr/local/cuda/bin): its memcheck, racecheck, synccheck and initcheck not run"
        names+=(sanitizer) results+=("SKIPPED (no compute-sanitizer)") secs+=("-")
    else
        # --error-exitcode: a finding fails the row even where the program passes.
        for tool in memcheck racecheck synccheck initcheck; do
            run "$tool test_ops" 1 "$san" --tool "$tool" --error-exitcode 9 "$out/test_ops"
            run "$tool gpu_train" 1 "$san" --tool "$tool" --error-exitcode 9 \
                "$out/gpu_train" bench --small --steps 2
        done
    fi
fi

# ---------------------------------------------------------------- summary
echo
echo "gpu-check: summary ($(( $(date +%s) - t_start )) s in all)"
printf '  %-24s %-34s %s\n' check result seconds
for i in "${!names[@]}"; do
    printf '  %-24s %-34s %s\n' "${names[$i]}" "${results[$i]}" "${secs[$i]}"
done
grd=$(grep -h '^RESULT grads' "$out"/run-*.log 2>/dev/null | tail -1)
if [ -n "$grd" ]; then
    if [ ${#SMALL[@]} -gt 0 ]; then
        echo "gpu-check: one step's gradients against the CPU in double, at the --small shape:"
    else
        echo "gpu-check: one GPT-2 124M step's gradients against the CPU in double:"
    fi
    echo "  ${grd#RESULT grads }"
fi
bench=$(grep -h '^RESULT bench' "$out"/run-*.log 2>/dev/null | tail -1)
if [ -n "$bench" ]; then
    if [ ${#SMALL[@]} -gt 0 ]; then
        echo "gpu-check: benchmark at the --small shape (a smoke run: the figures mean nothing):"
    else
        echo "gpu-check: GPT-2 124M benchmark (MFU against 989.4 TFLOP/s dense FP16):"
    fi
    for k in B T tokens_per_step gpu_ms gpu_tok_s gpu_mfu step_ms step_tok_s step_mfu \
        accum4_ms accum4_tok_s accum4_mfu square_gpu_ms mem_gib; do
        v=$(printf '%s\n' "$bench" | tr ' ' '\n' | sed -n "s/^$k=//p")
        printf '  %-16s %s\n' "$k" "$v"
    done
    echo "  (gpu_*: forward + backward on the GPU alone; step_*: the full step with the"
    echo "   gradients down, unscale + norm and AdamW (clip folded in) on the host and the"
    echo "   weights up; accum4_*: the full step with 4 micro-batches of B x T per update"
    echo "   (4*B*T tokens: 524288 at B = 128, GPT-2's batch), the gradients summed on the"
    echo "   GPU, so the weights up, gradients down and AdamW once per 4 GPU steps;"
    echo "   accum4_ms is per update, accum4_tok_s counts all 4*B*T tokens;"
    echo "   square_gpu_ms: gpu_ms with attention over the whole T x T square, no row blocks)"
fi
phases=$(grep -h '^RESULT phases' "$out"/run-*.log 2>/dev/null | tail -1)
[ -n "$phases" ] && echo "gpu-check: GPU ms by phase, one profiled step: ${phases#RESULT phases }"
shk=$(grep -h '^RESULT shakespeare' "$out"/run-*.log 2>/dev/null | tail -1)
[ -n "$shk" ] && echo "gpu-check: shakespeare: ${shk#RESULT shakespeare }"
grids=$(grep -h '^RESULT grids' "$out"/run-*.log 2>/dev/null | tail -1)
[ -n "$grids" ] && echo "gpu-check: grids (result:GPU ms/step): ${grids#RESULT grids }"
if [ $failed -ne 0 ]; then
    echo "gpu-check: FAILED"
    exit 1
fi
echo "gpu-check: all passed"
exit 0
