#!/bin/bash
# bench-dp.sh — data parallelism on one node: does splitting the cores into MPI ranks
# pay, and how much of the step does the gradient reduction take?
#
# Model: n_layer=6 n_head=6 n_embd=384 block_size=256, vocab 256 (tinyshakespeare as
# bytes), a global batch of 8 sequences per step, in every run:
#   np1        1 rank  x THREADS threads, batch_size 8
#   np2        2 ranks x THREADS/2 threads, batch_size 4, bucket_mb 25 (overlapped)
#   np2-flat   the same with bucket_mb 4096: one bucket started after backward, nothing
#              overlapped (what the first data-parallel version did)
#   np2-fp16   np2 with grad_comm = fp16
#   np2-async  np2 with sync = async, staleness 1
# and MPI_Allreduce alone on a 40 MB buffer between 2 ranks (bench_allreduce).
# For each run: the median step time, tokens/s and exposed communication (comm_ms: the
# wait for the reduction after backward) as a share of the step, over the steps after
# the first two; a table, then one JSON line with every figure.
#
# Environment:
#   GENTRAIN         the gentrain binary (required)
#   BENCH_ALLREDUCE  the built scripts/bench_allreduce (`make bench` builds it; that
#                    part is skipped when unset)
#   MPIEXEC          mpirun (default: mpirun). As root, set OMPI_ALLOW_RUN_AS_ROOT=1
#                    and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
#   THREADS          cores to use in all (default 2)
#   STEPS            steps per run (default 8, at least 3)
#   RUNS             which runs (default "np1 np2 np2-flat np2-fp16 np2-async")
#   top_srcdir       source tree (default: the parent of this script's folder)
#
# Exit status: 0 when every run worked, 1 otherwise.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(dirname "$here")}
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
MPIEXEC=${MPIEXEC:-mpirun}
THREADS=${THREADS:-2}
STEPS=${STEPS:-8}
RUNS=${RUNS:-np1 np2 np2-flat np2-fp16 np2-async}
BENCH_ALLREDUCE=${BENCH_ALLREDUCE:-}
[ "$STEPS" -ge 3 ] 2>/dev/null || { echo "bench-dp.sh: STEPS must be >= 3" >&2; exit 1; }
half=$((THREADS / 2)); [ $half -ge 1 ] || half=1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gentrain-bench-dp.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

if ! "$GENTRAIN" prepare "$top_srcdir/data/tinyshakespeare.txt" -o "$tmp/d.h5" \
        > "$tmp/prep.txt" 2>&1; then
    echo "bench-dp.sh: prepare failed:" >&2; cat "$tmp/prep.txt" >&2; exit 1
fi
MODEL=(--data "$tmp/d.h5" --n_layer 6 --n_head 6 --n_embd 384 --block_size 256
       --steps "$STEPS" --warmup_steps 1 --val_dataset none --out none)
MPI=("$MPIEXEC" --oversubscribe --bind-to none)

# summarize NAME LOG RANKS THREADS: one JSON object from the medians of the timed steps.
summarize() {
    awk -v name="$1" -v ranks="$3" -v threads="$4" '
        function val(line, key,   s) {
            if (!match(line, "\"" key "\":[-+0-9.eE]+")) return ""
            s = substr(line, RSTART, RLENGTH); sub(/^[^:]*:/, "", s); return s + 0
        }
        function median(a, n,   i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
            return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
        }
        { s = val($0, "step"); if (s <= 2) next
          n++; ms[n] = val($0, "ms"); tok[n] = val($0, "tokens_per_s"); comm[n] = val($0, "comm_ms")
          bytes = val($0, "comm_bytes"); loss = val($0, "loss") }
        END {
            if (n == 0) exit 1
            m = median(ms, n); t = median(tok, n); c = median(comm, n)
            printf "{\"run\":\"%s\",\"ranks\":%d,\"threads\":%d,\"step_ms\":%.1f,\"tokens_per_s\":%.0f,\"comm_ms\":%.2f,\"comm_share\":%.4f,\"comm_bytes\":%.0f,\"final_loss\":%.4f}\n", name, ranks, threads, m, t, c, c / m, bytes, loss
        }' "$2"
}

results=()
for run in $RUNS; do
    case $run in
        np1) cmd=("$GENTRAIN" train "${MODEL[@]}" --batch_size 8 --threads "$THREADS"); r=1; th=$THREADS ;;
        np2) extra=() ;;&
        np2-flat) extra=(--bucket_mb 4096) ;;&
        np2-fp16) extra=(--grad_comm fp16) ;;&
        np2-async) extra=(--sync async) ;;&
        np2*) cmd=("${MPI[@]}" -np 2 "$GENTRAIN" train "${MODEL[@]}" --batch_size 4
                   --threads "$half" "${extra[@]}"); r=2; th=$half ;;
        *) echo "bench-dp.sh: unknown run '$run'" >&2; fail=1; continue ;;
    esac
    echo "run $run: ${cmd[*]}" | sed "s#$tmp#TMP#g"
    if ! "${cmd[@]}" --log "$tmp/$run.jsonl" > "$tmp/$run.out" 2>&1; then
        echo "bench-dp.sh: run $run failed:" >&2; tail -n 5 "$tmp/$run.out" >&2; fail=1; continue
    fi
    results+=("$(summarize "$run" "$tmp/$run.jsonl" "$r" "$th")")
done

allreduce=""
if [ -n "$BENCH_ALLREDUCE" ]; then
    if "${MPI[@]}" -np 2 "$BENCH_ALLREDUCE" --mb 40 --reps 10 > "$tmp/allreduce.out" 2>&1; then
        allreduce=$(grep '^{' "$tmp/allreduce.out")
    else
        echo "bench-dp.sh: bench_allreduce failed:" >&2; tail -n 5 "$tmp/allreduce.out" >&2
        fail=1
    fi
else
    echo "bench-dp.sh: BENCH_ALLREDUCE not set: no MPI_Allreduce figure (make bench builds it)"
fi

echo
printf '%-10s %5s %7s %9s %9s %9s %10s %9s %10s\n' run ranks threads "ms/step" "tok/s" \
    "comm ms" "comm share" "MB/step" "loss@$STEPS"
for j in "${results[@]}"; do
    echo "$j" | awk '{
        gsub(/[{}"]/, ""); n = split($0, kv, ",")
        for (i = 1; i <= n; i++) { split(kv[i], p, ":"); v[p[1]] = p[2] }
        printf "%-10s %5d %7d %9.1f %9.0f %9.2f %9.1f%% %9.1f %10.4f\n", v["run"], v["ranks"],
               v["threads"], v["step_ms"], v["tokens_per_s"], v["comm_ms"],
               100 * v["comm_share"], v["comm_bytes"] / 1e6, v["final_loss"] }'
done
if [ -n "$allreduce" ]; then
    echo
    echo "$allreduce" | awk '{ gsub(/[{}"]/, ""); n = split($0, kv, ",")
        for (i = 1; i <= n; i++) { split(kv[i], p, ":"); v[p[1]] = p[2] }
        printf "MPI_Allreduce, 2 ranks, %.1f MB: median %.2f ms, best %.2f ms, %.3f GB/s (bus %.3f GB/s)\n",
               v["bytes"] / 1e6, v["median_ms"], v["best_ms"], v["algbw_gbs"], v["busbw_gbs"] }'
fi
json=$(IFS=,; echo "${results[*]}")
printf '{"bench":"data_parallel","steps":%d,"runs":[%s],"allreduce":%s}\n' "$STEPS" "$json" \
    "${allreduce:-null}"
exit $fail
