#!/bin/bash
# gpu-check.sh — the GPU checks of gentrain, for a machine with a GPU and the CUDA
# toolkit but nothing else of gentrain's build (no MPI, HDF5 or BLAS): run it from the
# source tree as it is. It builds the offload/ tests with nvcc and a C compiler alone
# and runs, in this order:
#   offload/tests/test_ops         the FP16 kernels (matrix products on cuBLAS with bias,
#                                  causal attention, encoder, LayerNorm, GELU, residual,
#                                  cross-entropy; forward and backward) against an FP32
#                                  reference on the CPU, with poisoned outputs
#   offload/tests/gpu_train test   the whole GPU training step (offload/gpu_model.cu,
#                                  gpu_model_passes.cu)
#                                  against a CPU reference in double: loss, gradients by
#                                  directional derivatives, full mixed-precision steps,
#                                  loss scaling (overflow skip, growth), gradient
#                                  accumulation, attention's row blocks (2, 4 and the
#                                  whole square), overfitting one batch, a batch smaller
#                                  than the model was made for;
#                                  the blocks-only engine (offload = blocks) between a
#                                  host embedding and head: loss and gradients
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
# then prints a table of what passed and the benchmark's figures. Each program runs
# under `timeout 300`, and the whole script stops starting programs once its budget
# (GPU_CHECK_BUDGET seconds from the start, default 480) is spent, so it ends within
# about 8 minutes whatever hangs (a few minutes expected on an H200).
#
# Environment: GPU_CHECK_GENTRAIN (above), NVCC (default: nvcc on PATH, else
# /usr/local/cuda/bin/nvcc), ARCH
# (default: sm_90, the H200; e.g. sm_80 for an A100), CC (default: gcc; builds the
# plain C src/lossscale.c and src/half.c), GPU_CHECK_BUDGET. For checking this script
# itself where there is no GPU (tests/test_gpu_check_emu.sh): GPU_CHECK_BIN=DIR runs
# DIR/test_ops and DIR/gpu_train instead of building them (e.g. the CPU emulation's,
# offload/tests/emu in a --with-cuda build tree), and GPU_CHECK_SMALL=1 runs bench and
# shakespeare (and grids) at a tiny shape (figures that mean nothing). GPU_CHECK_ONLY
# (default "test_ops test bench shakespeare grids") picks which of the five to run, e.g.
# GPU_CHECK_ONLY=bench to measure again without the tests.
# Exit status: 0 everything built and passed, 1 a build or a check failed (or ran out
# of time), 77 no GPU.
set -u
cd "$(dirname "$0")/.." || exit 1
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ARCH:-sm_90}
CC=${CC:-gcc}
BUDGET=${GPU_CHECK_BUDGET:-480}
out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
t_start=$(date +%s)

SMALL=()
[ -n "${GPU_CHECK_SMALL:-}" ] && SMALL=(--small)
ONLY=" ${GPU_CHECK_ONLY:-test_ops test bench shakespeare grids} "
for w in $ONLY; do
    case $w in
    test_ops | test | bench | shakespeare | grids) ;;
    *) echo "gpu-check: GPU_CHECK_ONLY: unknown check '$w' (test_ops test bench shakespeare" \
            "grids)" >&2
       exit 1 ;;
    esac
done
wanted() { [[ $ONLY == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
    sed 's/^/gpu: /'

# ---------------------------------------------------------------- build
have_test_ops=0 have_gpu_train=0
if [ -n "${GPU_CHECK_BIN:-}" ]; then
    echo "gpu-check: not building: the programs of $GPU_CHECK_BIN"
    for prog in test_ops gpu_train; do
        [ -x "$GPU_CHECK_BIN/$prog" ] || { echo "gpu-check: no $GPU_CHECK_BIN/$prog" >&2; exit 1; }
        cp "$GPU_CHECK_BIN/$prog" "$out/$prog" || exit 1
    done
    have_test_ops=1 have_gpu_train=1
else
    [ -x "$NVCC" ] || { echo "gpu-check: no nvcc (set NVCC)" >&2; exit 1; }
    command -v "$CC" >/dev/null || { echo "gpu-check: no C compiler $CC (set CC)" >&2; exit 1; }
    # Every object in parallel (ops.cu once for both programs), then the two links.
    echo "gpu-check: building offload/tests/test_ops and gpu_train with $NVCC for $ARCH and $CC"
    NVFLAGS=(-O2 -arch="$ARCH")
    declare -A job
    compile() { # name, command...
        local name=$1
        shift
        ("$@" >"$out/build-$name.log" 2>&1) &
        job[$name]=$!
    }
    compile ops "$NVCC" "${NVFLAGS[@]}" -Ioffload -c offload/ops.cu -o "$out/ops.o"
    compile test_ops "$NVCC" "${NVFLAGS[@]}" -Ioffload -c offload/tests/test_ops.cu \
        -o "$out/test_ops.o"
    compile gpu_model "$NVCC" "${NVFLAGS[@]}" -Ioffload -c offload/gpu_model.cu \
        -o "$out/gpu_model.o"
    compile gpu_model_passes "$NVCC" "${NVFLAGS[@]}" -Ioffload -c offload/gpu_model_passes.cu \
        -o "$out/gpu_model_passes.o"
    compile gpu_train "$NVCC" "${NVFLAGS[@]}" -Xcompiler -fopenmp -Ioffload -Isrc \
        -c offload/tests/gpu_train.cu -o "$out/gpu_train.o"
    compile lossscale "$CC" -O2 -fopenmp -c src/lossscale.c -o "$out/lossscale.o"
    compile half "$CC" -O2 -fopenmp -c src/half.c -o "$out/half.o"
    declare -A built
    for name in ops test_ops gpu_model gpu_model_passes gpu_train lossscale half; do
        if wait "${job[$name]}"; then
            built[$name]=1
        else
            built[$name]=0
            echo "gpu-check: compiling $name failed:"
            sed 's/^/  /' "$out/build-$name.log"
        fi
    done
    link() { # program, objects...
        local prog=$1
        shift
        local o
        for o in "$@"; do
            [ "${built[$o]}" = 1 ] || { echo "gpu-check: $prog not built ($o did not compile)"; return 1; }
        done
        local objs=()
        for o in "$@"; do objs+=("$out/$o.o"); done
        "$NVCC" "${NVFLAGS[@]}" -Xcompiler -fopenmp "${objs[@]}" -lcublas -o "$out/$prog" \
            >"$out/link-$prog.log" 2>&1 && return 0
        echo "gpu-check: linking $prog failed:"
        sed 's/^/  /' "$out/link-$prog.log"
        return 1
    }
    link test_ops test_ops ops && have_test_ops=1
    link gpu_train gpu_train gpu_model gpu_model_passes ops lossscale half && have_gpu_train=1
    echo "gpu-check: built in $(( $(date +%s) - t_start )) s"
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
    77) echo "gpu-check: no GPU here"; exit 77 ;;
    124 | 137) results+=("FAILED: timed out after $limit s"); failed=1 ;;
    *) results+=("FAILED (exit $rc)"); failed=1 ;;
    esac
    return "$rc"
}
# A program that finds no GPU (exit 77) ends the script with 77 (inside run).
wanted test_ops && run test_ops "$have_test_ops" test_ops
wanted test && run "gpu_train test" "$have_gpu_train" gpu_train test
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

# ---------------------------------------------------------------- summary
echo
echo "gpu-check: summary ($(( $(date +%s) - t_start )) s in all, GPU arch $ARCH)"
printf '  %-24s %-34s %s\n' check result seconds
for i in "${!names[@]}"; do
    printf '  %-24s %-34s %s\n' "${names[$i]}" "${results[$i]}" "${secs[$i]}"
done
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
