#!/bin/bash
# bench-batch.sh — global_batch_size = auto against a sweep of fixed global batches:
# which reaches a target validation loss in the fewest tokens and the least wall time
# (docs/adaptive-batch.md). Every run trains the same token budget on the same data,
# with its warmup, decay and evaluations at the same tokens and the same validation
# windows, so a run differs from another only in its batch (and, under auto, the lr
# its rule gives):
#   fixed G   global_batch_size G, steps = TOKENS / (G x block_size), warmup_steps and
#             eval_every converted the same way, eval_batches = VAL_SEQ / G
#   auto      global_batch_size = auto from global_batch_min = AUTO_MIN: steps and
#             warmup in steps of AUTO_MIN, eval_batches = VAL_SEQ / AUTO_MIN
# For each run and seed: tokens and wall seconds (the log's elapsed_s, evaluations
# included) at the first evaluation at or below TARGET, the final validation loss and
# the whole run's wall time; for auto the batch sequence it chose (count x batch).
# Then a table, and the same numbers as one JSON object a line.
#
# Environment (the config's keys come from CONFIG; the values below override them):
#   GENTRAIN   the gentrain binary (required)
#   CONFIG     the training config (default data/shakespeare-cpu.cfg of the tree)
#   TARGET     the validation loss to reach (required)
#   TOKENS     tokens each run trains (default: the config's steps x batch_size x
#              block_size, i.e. what the config trains at one replica)
#   BATCHES    the fixed global batches, in sequences (default "12 24 48 96")
#   AUTO_MIN   auto's global_batch_min (default 24: two micro-batches of 12)
#   AUTO       0 = the fixed batches only, no auto run (default 1)
#   AUTO_ARGS  more keys for the auto run (e.g. "--global_batch_max 192 --lr_rule sqrt")
#   WARMUP_SEQ warmup in sequences (default: the config's warmup_steps x batch_size)
#   EVAL_SEQ   sequences between evaluations (default 24 x 250 = 6000)
#   VAL_SEQ    validation windows per evaluation (default 1536: every batch and
#              AUTO_MIN must divide it)
#   SEEDS      seeds (default "1337")
#   LAUNCH     what runs gentrain (default: nothing, one process; e.g.
#              "mpirun -np 2 --bind-to none"). Run under scripts/netns-hosts.sh for
#              hosts on a capped link: an mpirun LAUNCH then gets the cluster's options
#              (NH_MPI_OPTS_STR) after its first word, as netns-hosts.sh gives its own
#              mpirun COMMAND
#   EXTRA      more keys for every run (e.g. "--threads 2")
#   STOP_AT_TARGET  1 = each run stops at its first evaluation at or below TARGET
#              (gentrain's target_val_loss), so no time goes to the steps after it; a
#              run's final_val_loss, wall_s and steps are then those of its stop, and
#              bench-batch-summary.py can re-read the logs only at higher targets
#              (default 0: every run trains the whole budget)
#   OUT        folder for the runs (default: a new folder under /tmp)
#   top_srcdir source tree (default: the parent of this script's folder)
# Every batch must be a multiple of batch_size x the launched ranks.
#
# Exit status: 0 when every run worked (a run that never reaches TARGET is reported
# as such, not an error), 1 otherwise, 2 on a bad setting.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(dirname "$here")}
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${TARGET:?TARGET must be the validation loss to reach}"
CONFIG=${CONFIG:-$top_srcdir/data/shakespeare-cpu.cfg}
BATCHES=${BATCHES:-12 24 48 96}
AUTO_MIN=${AUTO_MIN:-24}
AUTO_ARGS=${AUTO_ARGS:-}
EVAL_SEQ=${EVAL_SEQ:-6000}
VAL_SEQ=${VAL_SEQ:-1536}
SEEDS=${SEEDS:-1337}
LAUNCH=${LAUNCH:-}
case "$LAUNCH" in
mpirun\ * | mpiexec\ *)
    [ -n "${NH_MPI_OPTS_STR:-}" ] && LAUNCH="${LAUNCH%% *} $NH_MPI_OPTS_STR ${LAUNCH#* }" ;;
esac
EXTRA=${EXTRA:-}
OUT=${OUT:-$(mktemp -d /tmp/bench-batch.XXXXXX)}

die() { echo "bench-batch.sh: $*" >&2; exit 2; }
case ${STOP_AT_TARGET:-0} in
0) ;;
1) EXTRA="$EXTRA --target_val_loss $TARGET" ;;
*) die "STOP_AT_TARGET must be 0 or 1, not '$STOP_AT_TARGET'" ;;
esac
case ${AUTO:-1} in
0) RUNS=$BATCHES ;;
1) RUNS="$BATCHES auto" ;;
*) die "AUTO must be 0 or 1, not '$AUTO'" ;;
esac
[ -r "$CONFIG" ] || die "cannot read CONFIG $CONFIG"
mkdir -p "$OUT" || die "cannot make $OUT"

# A key's value: the config file's last `key = value` line, else gentrain's default
# (its --help table). Include files and command-line keys are not followed.
key_of() {
    local v
    v=$(sed -n "s/#.*//; s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([^[:space:]]*\).*/\1/p" \
        "$CONFIG" | tail -n 1)
    [ -n "$v" ] || v=$("$GENTRAIN" train --help 2>&1 | awk -v k="$1" '$1 == k { print $2; exit }')
    echo "$v"
}
B=$(key_of batch_size)
T=$(key_of block_size)
STEPS=$(key_of steps)
WARM=$(key_of warmup_steps)
[ -n "$B" ] && [ -n "$T" ] && [ -n "$STEPS" ] || die "cannot read the config's keys"
TOKENS=${TOKENS:-$((STEPS * B * T))}
WARMUP_SEQ=${WARMUP_SEQ:-$((WARM * B))}
SEQS=$((TOKENS / T))
for G in $BATCHES $AUTO_MIN; do
    for v in "$SEQS" "$VAL_SEQ" "$EVAL_SEQ" "$WARMUP_SEQ"; do
        [ $((v % G)) -eq 0 ] || die "batch $G does not divide $v (TOKENS/block_size, VAL_SEQ, EVAL_SEQ, WARMUP_SEQ)"
    done
done

# result NAME SEED LABEL: reads OUT/NAME/log.jsonl; prints one JSON object and appends
# a table row to OUT/table.
result() {
    local name=$1 seed=$2 label=$3 log=$OUT/$1/log.jsonl
    python3 - "$log" "$TARGET" "$name" "$seed" "$label" "$OUT/table" << 'PY'
import json, sys
log, target, name, seed, label, table = sys.argv[1], float(sys.argv[2]), *sys.argv[3:]
recs = [json.loads(l) for l in open(log) if l.strip()]
hit = next((r for r in recs if "val_loss" in r and r["val_loss"] <= target), None)
final = [r["val_loss"] for r in recs if "val_loss" in r]
seq, last = [], None
for r in recs:
    b = r.get("global_batch_size")
    if seq and seq[-1][1] == b: seq[-1][0] += 1
    else: seq.append([1, b])
out = {"run": name, "batch": label, "seed": int(seed), "target": target,
       "tokens_to_target": hit["tokens"] if hit else None,
       "wall_s_to_target": hit["elapsed_s"] if hit else None,
       "final_val_loss": final[-1] if final else None,
       "wall_s": recs[-1]["elapsed_s"], "steps": recs[-1]["step"],
       "batch_sequence": " ".join(f"{n}x{b}" for n, b in seq)}
print(json.dumps(out))
with open(table, "a") as f:
    f.write("%-10s %5s %6s %14s %12s %10s %9s  %s\n" % (
        label, seed, out["steps"],
        "%.0f" % hit["tokens"] if hit else "not reached",
        "%.1f" % hit["elapsed_s"] if hit else "-",
        "%.4f" % final[-1] if final else "-", "%.1f" % out["wall_s"],
        out["batch_sequence"] if label == "auto" else ""))
PY
}

# run NAME SEED KEYS...: one training run into OUT/NAME.
run() {
    local name=$1 seed=$2
    shift 2
    # shellcheck disable=SC2086
    $LAUNCH "$GENTRAIN" train --config "$CONFIG" --seed "$seed" --out "$OUT/$name" \
        --log_every 100000 --ckpt_every 0 $EXTRA "$@" > "$OUT/$name.out" 2>&1
}

uptime_now=$(uptime)
status=0
: > "$OUT/table"
: > "$OUT/results.jsonl"
for seed in $SEEDS; do
    for G in $RUNS; do
        if [ "$G" = auto ]; then
            unit=$AUTO_MIN
            # shellcheck disable=SC2086
            set -- --global_batch_size auto --global_batch_min "$AUTO_MIN" $AUTO_ARGS
        else
            unit=$G
            set -- --global_batch_size "$G"
        fi
        name=$G-s$seed
        echo "bench-batch.sh: $name ($((SEQS / unit)) steps of $unit sequences)" >&2
        if run "$name" "$seed" "$@" --steps $((SEQS / unit)) \
            --warmup_steps $((WARMUP_SEQ / unit)) --eval_every $((EVAL_SEQ / unit)) \
            --eval_batches $((VAL_SEQ / unit)); then
            result "$name" "$seed" "$G" >> "$OUT/results.jsonl" || status=1
        else
            echo "bench-batch.sh: run $name failed; see $OUT/$name.out" >&2
            status=1
        fi
    done
done

echo "bench-batch.sh: $TOKENS tokens a run, target val_loss $TARGET, launch '${LAUNCH:-one process}'"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); before the runs: $uptime_now"
printf "%-10s %5s %6s %14s %12s %10s %9s  %s\n" batch seed steps tokens_to_tgt wall_s_to_tgt \
    final_val wall_s "batch sequence (auto)"
cat "$OUT/table"
cat "$OUT/results.jsonl"
echo "runs in $OUT"
exit $status
