#!/usr/bin/env bash
# How many threads a run takes, end to end:
#  - with neither --threads nor OMP_NUM_THREADS, as many as the CPUs the process may
#    run on: taskset (as mpirun's or srun's binding) to one CPU gives 1 thread, not one
#    per CPU of the machine, and the threads line says so;
#  - OMP_THREAD_LIMIT below --threads: one warning, the limit's count, and the run
#    trains (OpenBLAS, told more threads than OpenMP would start, used to wait for
#    ever);
#  - OMP_DYNAMIC=true with more threads than CPUs: the run trains on the threads asked
#    for (a smaller dynamic team hung OpenBLAS the same way);
#  - `plan --measure`, which sets the thread count for each timing, under the same two
#    settings: it finishes (it hung), and says when the limit caps its timings;
#  - more threads than CPUs: the measured peak is the CPUs', not more;
#  - OMP_PROC_BIND=close: as many threads as CPUs (the runtime's binding of the first
#    thread before main made it one).
# All runs train to the losses of the 1-thread run (1e-4): the thread count must not
# change the model.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir threads

prepare_slice
args=(train --data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 64 --block_size 32
      --batch_size 4 --steps 4 --eval_every 0 --val_dataset none --seed 3)

# run NAME ENV... -- ARGS...: one training run, the environment changed as given
run() {
    local name=$1 envs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    run_ok "$name" timeout 120 env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT -u OMP_DYNAMIC \
        "${envs[@]}" "$GENTRAIN" "${args[@]}" "$@" --out "$tmp/$name" --log "$tmp/$name.jsonl"
}
threads_of() { sed -n 's/^threads: \([0-9]*\) OpenMP.*/\1/p' "$tmp/$1.out"; }
peak_of() { sed -n 's/^threads: .* peak \([0-9.]*\) GFLOP\/s.*/\1/p' "$tmp/$1.out"; }

run one -- --threads 1
check "--threads 1: 1 thread" test "$(threads_of one)" = 1

if command -v taskset >/dev/null 2>&1 && taskset -c 0 true 2>/dev/null; then
    run_ok pinned timeout 120 env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT -u OMP_DYNAMIC \
        taskset -c 0 "$GENTRAIN" "${args[@]}" --out "$tmp/pinned" --log "$tmp/pinned.jsonl"
    check "pinned to one CPU, no thread setting: 1 thread (got $(threads_of pinned))" \
        test "$(threads_of pinned)" = 1
    online=$(getconf _NPROCESSORS_ONLN)
    if [ "$online" -gt 1 ]; then
        check "pinned: the threads line says how many CPUs the process may run on" \
            grep -q "^threads: 1 OpenMP on the 1 of $online CPUs this process may run on," \
            "$tmp/pinned.out"
    fi
    check "pinned: trains as the 1-thread run" \
        compare_logs "$tmp/one.jsonl" "$tmp/pinned.jsonl" 1e-4 4
else
    echo "    (no taskset: the pinned part is skipped)"
fi

# OpenMP binding (OMP_PROC_BIND): the runtime binds the initial thread to one CPU before
# main, and gentrain's restart for OpenBLAS's core inherited that one CPU, so the team
# took 1 thread (or all its threads shared CPU 0: a step 2x slower on 2 cores)
cpus=$(nproc)
run bound OMP_PROC_BIND=close --
check "OMP_PROC_BIND=close, no thread setting: $cpus threads, one per CPU (got $(threads_of bound))" \
    test "$(threads_of bound)" = "$cpus"
check "OMP_PROC_BIND=close: the threads line names no narrower mask" \
    test "$(grep -c '^threads: .*CPUs this process may run on' "$tmp/bound.out")" = 0
check "OMP_PROC_BIND=close: trains as the 1-thread run" \
    compare_logs "$tmp/one.jsonl" "$tmp/bound.jsonl" 1e-4 4

run limited OMP_THREAD_LIMIT=1 -- --threads 4
check "OMP_THREAD_LIMIT=1 with --threads 4: warned" \
    grep -q "4 threads asked for, but OMP_THREAD_LIMIT allows 1: using 1" "$tmp/limited.err"
check "OMP_THREAD_LIMIT=1: 1 thread (got $(threads_of limited))" \
    test "$(threads_of limited)" = 1
check "OMP_THREAD_LIMIT=1: trains as the 1-thread run" \
    compare_logs "$tmp/one.jsonl" "$tmp/limited.jsonl" 1e-4 4

run dynamic OMP_DYNAMIC=true -- --threads 6
check "OMP_DYNAMIC=true with --threads 6: 6 threads (got $(threads_of dynamic))" \
    test "$(threads_of dynamic)" = 6
check "OMP_DYNAMIC=true: trains as the 1-thread run" \
    compare_logs "$tmp/one.jsonl" "$tmp/dynamic.jsonl" 1e-4 4

# The planner's timings change the thread count as they go: the same limits hold there
cat > "$tmp/plan.cfg" <<'CFG'
n_layer = 2
n_head = 2
n_embd = 64
block_size = 32
batch_size = 4
steps = 10
vocab_size = 256
CFG
for e in OMP_DYNAMIC=true OMP_THREAD_LIMIT=1; do
    run_ok "plan_$e" timeout 120 env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT -u OMP_DYNAMIC \
        "$e" "$GENTRAIN" plan --config "$tmp/plan.cfg" --measure --reps 1
    check "plan --measure under $e: a recommendation" grep -q '^recommended: ' "$tmp/plan_$e.out"
done
check "plan under OMP_THREAD_LIMIT=1: says the timings are capped" \
    grep -q 'OMP_THREAD_LIMIT lets a rank start 1 thread:' "$tmp/plan_OMP_THREAD_LIMIT=1.out"

# The peak: 32 threads on this machine's CPUs against 1 thread. The bound is loose
# (other tests run meanwhile); summing each thread's best moment read 5-7x.
run many -- --threads 32
p1=$(peak_of one) p32=$(peak_of many)
echo "    measured peak: $p1 GFLOP/s on 1 thread, $p32 with 32 threads on $cpus CPUs"
check "32 threads: the peak stays within 2 x CPUs x the 1-thread peak" \
    awk -v a="$p32" -v b="$p1" -v n="$cpus" 'BEGIN { exit !(a > 0 && a <= 2 * n * b) }'
[ "$fails" -eq 0 ]
