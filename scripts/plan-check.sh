#!/bin/bash
# plan-check.sh — how close does `gentrain plan --measure` come to the step times
# gentrain really runs at on this machine?
#
# Model: n_layer 4, n_head 4, n_embd 256, block_size 128, vocab 256 (the shipped corpus
# as bytes), batch_size 8 per replica. One `mpirun -np 2 gentrain plan --measure
# --json` predicts every grid; then each of these is trained for STEPS steps and its
# median step time (steps 3 on) is set beside the prediction:
#   np1   1 rank  x THREADS threads
#   dp2   2 ranks x THREADS/2 threads, data parallel
#   tp2   2 ranks, tensor parallel
#   pp2   2 ranks, pipeline parallel, with the micro-batches the planner chose
# A table, then one JSON line with every figure. The machine is noisy: read the error
# of each grid as a ratio of two figures taken minutes apart.
#
# Environment:
#   GENTRAIN    the gentrain binary (required)
#   MPIEXEC     mpirun (default: mpirun). As root, set OMPI_ALLOW_RUN_AS_ROOT=1 and
#               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
#   THREADS     cores to use in all (default 2)
#   STEPS       training steps per grid (default 8, at least 4)
#   REPS        timing repetitions of the planner (default 9)
#   top_srcdir  source tree (default: the parent of this script's folder)
#
# Exit status: 0 when every run worked, 1 otherwise.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
MPIEXEC=${MPIEXEC:-mpirun}
THREADS=${THREADS:-2}
STEPS=${STEPS:-8}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
[ "$STEPS" -ge 4 ] || { echo "plan-check: STEPS must be at least 4" >&2; exit 1; }
half=$((THREADS / 2))
[ "$half" -ge 1 ] || { echo "plan-check: THREADS must be at least 2" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/plan-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
head -c 300000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/slice.txt"
"$GENTRAIN" prepare "$tmp/slice.txt" -o "$tmp/d.h5" > /dev/null || exit 1

MODEL=(--data "$tmp/d.h5" --n_layer 4 --n_head 4 --n_embd 256 --block_size 128
       --batch_size 8 --val_dataset none --out none)
MPI=("$MPIEXEC" --oversubscribe --bind-to none)

echo "predicting: ${MPI[*]} -np 2 gentrain plan ${MODEL[*]} --cores-per-node $THREADS --measure --json"
"${MPI[@]}" -np 2 "$GENTRAIN" plan "${MODEL[@]}" --cores-per-node "$THREADS" --measure \
    --reps "${REPS:-9}" --json > "$tmp/plan.txt" 2> "$tmp/plan.err" || { cat "$tmp/plan.err" >&2; exit 1; }
grep -v '^{' "$tmp/plan.txt"

# field JSON KEY: a number from one JSON line.
field() { sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p" <<< "$1"; }
# row DP PP TP: the planner's line for that grid.
row() { grep "^{\"dp\":$1,\"pp\":$2,\"tp\":$3," "$tmp/plan.txt" | head -n 1; }
# median_ms LOG: the median step time of steps 3.. of a JSON Lines log.
median_ms() {
    sed -n 's/.*"step":\([0-9]*\),.*"ms":\([0-9.]*\),.*/\1 \2/p' "$1" |
        awk '$1 >= 3 { print $2 }' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

status=0
printf '\n%-5s %5s %6s %14s %13s %8s\n' grid ranks micro "predicted ms" "measured ms" error
json='{"bench":"plan_check","grids":['
sep=''
for grid in np1 dp2 tp2 pp2; do
    case $grid in
    np1) g=(1 1 1) np=1 threads=$THREADS ;;
    dp2) g=(2 1 1) np=2 threads=$half ;;
    tp2) g=(1 1 2) np=2 threads=$half ;;
    pp2) g=(1 2 1) np=2 threads=$half ;;
    esac
    line=$(row "${g[0]}" "${g[1]}" "${g[2]}")
    if [ -z "$line" ]; then
        echo "plan-check: the planner has no line for $grid" >&2
        status=1
        continue
    fi
    pred=$(field "$line" step_ms)
    micro=$(field "$line" micro)
    extra=(--tp "${g[2]}" --pp "${g[1]}")
    [ "${g[1]}" -gt 1 ] && extra+=(--micro_batches "$micro")
    if ! "${MPI[@]}" -np "$np" "$GENTRAIN" train "${MODEL[@]}" "${extra[@]}" \
        --steps "$STEPS" --warmup_steps 1 --threads "$threads" --log "$tmp/$grid.jsonl" \
        > "$tmp/$grid.out" 2>&1; then
        echo "plan-check: $grid failed:" >&2
        tail -n 5 "$tmp/$grid.out" >&2
        status=1
        continue
    fi
    meas=$(median_ms "$tmp/$grid.jsonl")
    err=$(awk -v p="$pred" -v m="$meas" 'BEGIN { printf "%+.1f%%", 100 * (p - m) / m }')
    printf '%-5s %5d %6d %14.1f %13.1f %8s\n' "$grid" "$np" "$micro" "$pred" "$meas" "$err"
    json+="$sep{\"grid\":\"$grid\",\"ranks\":$np,\"micro\":$micro,\"predicted_ms\":$pred,\"measured_ms\":$meas}"
    sep=','
done
echo "$json]}"
exit $status
