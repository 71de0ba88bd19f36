#!/bin/bash
# gpu-grids.sh GENTRAIN — gentrain's model-parallel grids on this machine's GPUs against
# the same grids on its CPU: a check of the trainer's GPU stages and tensor-parallel
# shards (src/engine/gpu_stage.c) on real hardware, for scripts/gpu-check.sh (its `grids`
# check) or alone. GENTRAIN is a gentrain built with --with-cuda (MPI, HDF5, BLAS);
# run from the source tree (it reads data/tinyshakespeare.txt).
#
# On a slice of the Shakespeare corpus, a small model (4 layers, 4 heads, n_embd 128,
# T 64, batch 8; 8 steps; GPU_CHECK_SMALL=1: 2 layers, n_embd 32, T 16, 6 steps), each
# grid trained on the GPUs (every layer of a stage or a shard on its GPU, a shard's
# embedding and head vocabulary-parallel) and on the CPU (offload = none), both under
# mpirun:
#   tp 2, pp 2 (4 micro-batches: the first stage recomputes), dp 2 x tp 2,
#   tp 2 x pp 2 (4 micro-batches)
# and one GPU rank alone (tp = pp = 1, every layer on it) for the step time it is
# measured against. A grid passes when its GPU run's losses and val_losses are within
# 1e-3 relative of its CPU run's (FP16 against FP32). Ranks take the GPUs in turn, so
# with fewer GPUs than ranks they share them (a correctness check: the times then
# mean little) and the tp all-reduces go through host memory (NCCL wants a GPU a
# rank); with a GPU a rank, over NCCL. Each run's offload line says which.
#
# Prints one line per grid and `RESULT grids name=ok|FAIL:ms_per_step ...`. Each run
# is under `timeout 300`. Environment: MPIEXEC (default mpirun), GPU_CHECK_SMALL.
# Exit status: 0 every grid passed, 1 one failed (or could not run), 2 bad usage.
set -u
G=${1:?usage: gpu-grids.sh GENTRAIN (a gentrain built --with-cuda)}
[ -x "$G" ] || { echo "gpu-grids: $G is not a program" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
MPIEXEC=${MPIEXEC:-mpirun}
command -v "$MPIEXEC" > /dev/null || { echo "gpu-grids: no $MPIEXEC (set MPIEXEC)" >&2; exit 2; }
if [ "$(id -u)" = 0 ]; then # Open MPI refuses root otherwise
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-grids.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

head -c 300000 data/tinyshakespeare.txt > "$work/slice.txt"
if ! timeout 120 "$G" prepare "$work/slice.txt" -o "$work/d.h5" > "$work/prep.log" 2>&1; then
    echo "gpu-grids: prepare failed:"
    sed 's/^/  /' "$work/prep.log"
    exit 1
fi
if [ -n "${GPU_CHECK_SMALL:-}" ]; then
    MODEL=(--n_layer 2 --n_head 2 --n_embd 32 --block_size 16 --steps 6 --eval_every 3)
else
    MODEL=(--n_layer 4 --n_head 4 --n_embd 128 --block_size 64 --steps 8 --eval_every 4)
fi
ARGS=(--data "$work/d.h5" "${MODEL[@]}" --batch_size 8 --eval_batches 2 --threads 1
      --seed 5 --warmup_steps 2 --lr 3e-3)
MPI=(timeout 300 "$MPIEXEC" --oversubscribe --bind-to none)

# max_rel A B: the largest relative difference of loss and val_loss between the JSON
# Lines logs A and B, step for step ("missing" when their steps differ).
max_rel() {
    awk 'function val(l, k,   s) { if (!match(l, "\"" k "\":[-+0-9.eEnaif]+")) return "";
                                    s = substr(l, RSTART, RLENGTH); sub(/^[^:]*:/, "", s);
                                    return s }
         function rel(a, b,   d, m) { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a;
                                       if ((b < 0 ? -b : b) > m) m = b < 0 ? -b : b;
                                       return m > 0 ? d / m : d }
         FNR == NR { l[val($0, "step")] = val($0, "loss"); v[val($0, "step")] = val($0, "val_loss");
                     n1++; next }
         { s = val($0, "step"); n2++; if (!(s in l)) bad = 1;
           r = rel(l[s] + 0, val($0, "loss") + 0); if (r > w) w = r;
           if (v[s] != "") { r = rel(v[s] + 0, val($0, "val_loss") + 0); if (r > w) w = r } }
         END { if (bad || n1 != n2 || n1 == 0) print "missing"; else printf "%.3g\n", w }' \
        "$1" "$2"
}
# mean_ms LOG: the mean step time of the log's steps after the first.
mean_ms() {
    sed -n 's/.*"ms":\([0-9.]*\).*/\1/p' "$1" |
        awk 'NR > 1 { s += $1; n++ } END { if (n) printf "%.1f", s / n; else print "-" }'
}

failed=0 results=
# grid NAME NP ARGS...: the grid on the GPUs and on the CPU, compared.
grid() {
    local name=$1 np=$2 rc_g rc_c d path
    shift 2
    "${MPI[@]}" -np "$np" "$G" train "${ARGS[@]}" "$@" --out "$work/$name.gpu" \
        > "$work/$name.gpu.log" 2>&1
    rc_g=$?
    "${MPI[@]}" -np "$np" "$G" train "${ARGS[@]}" "$@" --offload none --out "$work/$name.cpu" \
        > "$work/$name.cpu.log" 2>&1
    rc_c=$?
    path=$(sed -n 's/^offload: .*\(their tp all-reduces .*\); the .*/\1/p' "$work/$name.gpu.log" |
           head -1)
    if [ $rc_g -eq 0 ] && ! grep -q "^offload: .*GPU (rank [0-9]*: GPU" "$work/$name.gpu.log"; then
        echo "gpu-grids: $name ($np ranks): FAILED: the GPU run did not train on GPUs:"
        grep '^offload:' "$work/$name.gpu.log" | sed 's/^/  /'
        failed=1 results+=" $name=FAIL:-"
        return
    fi
    if [ $rc_g -ne 0 ] || [ $rc_c -ne 0 ]; then
        echo "gpu-grids: $name ($np ranks): FAILED to run (GPU exit $rc_g, CPU exit $rc_c):"
        tail -n 8 "$work/$name.gpu.log" "$work/$name.cpu.log" | sed 's/^/  /'
        failed=1 results+=" $name=FAIL:-"
        return
    fi
    d=$(max_rel "$work/$name.cpu/log.jsonl" "$work/$name.gpu/log.jsonl")
    if [ "$d" = missing ] || ! awk -v d="$d" 'BEGIN { exit !(d <= 1e-3) }'; then
        failed=1 results+=" $name=FAIL:$(mean_ms "$work/$name.gpu/log.jsonl")"
        echo "gpu-grids: $name ($np ranks): FAILED: largest relative loss difference $d"
    else
        results+=" $name=ok:$(mean_ms "$work/$name.gpu/log.jsonl")"
        echo "gpu-grids: $name ($np ranks): passed: largest relative loss difference $d"
    fi
    echo "  GPU $(mean_ms "$work/$name.gpu/log.jsonl") ms/step, CPU" \
        "$(mean_ms "$work/$name.cpu/log.jsonl") ms/step${path:+; $path}"
}

"${MPI[@]}" -np 1 "$G" train "${ARGS[@]}" --out "$work/one" > "$work/one.log" 2>&1 &&
    echo "gpu-grids: one rank on a GPU (every layer): $(mean_ms "$work/one/log.jsonl") ms/step"
grid tp2 2 --tp 2
grid pp2 2 --pp 2 --micro_batches 4
grid dp2tp2 4 --tp 2 --batch_size 4
grid tp2pp2 4 --tp 2 --pp 2 --micro_batches 4
echo "RESULT grids$results"
exit $failed
