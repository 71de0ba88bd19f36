#!/usr/bin/env bash
# bench-load.sh — how hard a training step falls when another process takes one core.
#
# Trains the Shakespeare configuration (data/shakespeare-cpu.cfg's model and batch) on
# 2 threads, first on a quiet machine, then with one busy loop pinned to one of the
# cores the run may use, and prints tokens/s both ways and the slowdown for:
#   gentrain fixed     thread_team = fixed: the team always keeps all its threads
#   gentrain adaptive  thread_team = adaptive (the default): the team leaves a shared core
#   pytorch            PyTorch 2.x on the same shape (scripts/bench_torch.py), when a
#                      Python that imports torch is found
# Run it from the build folder (or set GENTRAIN):
#   ../scripts/bench-load.sh
# Environment:
#   GENTRAIN     the gentrain binary (default ./gentrain)
#   STEPS        gentrain steps per run (default 120; the first few are warm-up)
#   TORCH_STEPS  timed PyTorch steps per run (default 20, after 3 untimed)
#   LEAVE_S      seconds of load at the start of one longer adaptive run, which shows
#                when the team leaves the shared core and when it comes back (default 3)
#   TPY          Python with torch 2.x (default the bench venv that bench.sh makes,
#                ${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv/bin/python)
# Slowdown = quiet tokens/s / loaded tokens/s, both over all timed steps (for PyTorch
# the mean step, not the median: a user waits for every step). Both runs of a row are
# taken back to back, so the ratio holds on a machine whose speed drifts; the quiet
# figures themselves are only as quiet as the machine (the load average is printed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
G=${GENTRAIN:-./gentrain}
STEPS=${STEPS:-120}
TORCH_STEPS=${TORCH_STEPS:-20}
LEAVE_S=${LEAVE_S:-3}
TPY=${TPY:-${XDG_CACHE_HOME:-$HOME/.cache}/gentrain/torch-venv/bin/python}
CORPUS=$here/../data/tinyshakespeare.txt
[ -x "$G" ] || { echo "bench-load: no gentrain binary at $G (set GENTRAIN)" >&2; exit 1; }
[ -r "$CORPUS" ] || { echo "bench-load: cannot read $CORPUS" >&2; exit 1; }
command -v taskset >/dev/null || { echo "bench-load: needs taskset (util-linux)" >&2; exit 1; }

# The cores this process may run on; the busy loop takes the last of them.
cores=$(taskset -pc $$ | sed 's/.*: //')
last_core=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
ncores=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
if [ "$ncores" -lt 2 ]; then
    echo "bench-load: needs 2 cores, this process may use $ncores ($cores)" >&2; exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-load.XXXXXX")
busy_pid=
cleanup() { [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), cores allowed: $cores"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$G" prepare "$CORPUS" -o "$dir/shk.h5" >/dev/null 2>&1 ||
    { echo "bench-load: gentrain prepare failed" >&2; exit 1; }

busy_on()  { taskset -c "$last_core" sh -c 'while :; do :; done' & busy_pid=$!; sleep 0.2; }
busy_off() { kill "$busy_pid"; wait "$busy_pid" 2>/dev/null || true; busy_pid=; }

# gentrain_tps POLICY: tokens/s over the steps of one run
gentrain_tps() {
    "$G" train --data "$dir/shk.h5" --n_layer 4 --n_head 4 --n_embd 128 --block_size 64 \
        --batch_size 12 --steps "$STEPS" --eval_every 0 --threads 2 --thread_team "$1" \
        --out "" >"$dir/g.out" 2>&1 || { cat "$dir/g.out" >&2; return 1; }
    sed -n 's/^done: .*(\([0-9.]*\) tok\/s in steps).*/\1/p' "$dir/g.out"
}

# torch_tps: tokens/s over the mean timed step of one bench_torch.py run
torch_tps() {
    "$TPY" "$here/bench_torch.py" --n_layer 4 --n_head 4 --n_embd 128 --block_size 64 \
        --batch_size 12 --threads 2 --steps "$TORCH_STEPS" --warmup-steps 3 \
        --data "$CORPUS" >"$dir/t.out" 2>&1 || { cat "$dir/t.out" >&2; return 1; }
    grep '^{' "$dir/t.out" | tail -1 | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
print("%.1f" % (r["batch_size"] * r["block_size"] * len(r["step_ms"]) * 1e3 / sum(r["step_ms"])))'
}

printf "%-20s %14s %14s %10s\n" run "quiet tok/s" "loaded tok/s" slowdown
row() { # row LABEL COMMAND...
    local label=$1; shift
    local quiet loaded
    quiet=$("$@") || return 1
    busy_on
    loaded=$("$@") || { busy_off; return 1; }
    busy_off
    printf "%-20s %14s %14s %9.1fx\n" "$label" "$quiet" "$loaded" \
        "$(echo "$quiet / $loaded" | bc -l)"
}
row "gentrain fixed" gentrain_tps fixed
row "gentrain adaptive" gentrain_tps adaptive
# The load leaving mid-run: the adaptive team should come back to 2 threads.
timeout "$LEAVE_S" taskset -c "$last_core" sh -c 'while :; do :; done' &
leave_pid=$!
STEPS=$((STEPS * 3)) gentrain_tps adaptive >/dev/null || exit 1
wait "$leave_pid" 2>/dev/null || true
left=$(sed -n 's/.*threads: 1 of 2 from step \([0-9]*\).*/\1/p' "$dir/g.out" | head -1)
back=$(sed -n 's/.*threads: 2 of 2 from step \([0-9]*\).*/\1/p' "$dir/g.out" | head -1)
echo "load for the first ${LEAVE_S} s of a $((STEPS * 3))-step adaptive run: 1 thread from" \
    "step ${left:-(never)}, 2 again from step ${back:-(never)}"
if "$TPY" -c 'import torch' 2>/dev/null; then
    row "pytorch $("$TPY" -c 'import torch; print(torch.__version__.split("+")[0])')" torch_tps
else
    echo "pytorch: skipped ($TPY cannot import torch; scripts/bench.sh makes that venv)"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); busy loop was pinned to core $last_core"
