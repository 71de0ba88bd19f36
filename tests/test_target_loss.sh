#!/usr/bin/env bash
# target_val_loss (src/train/train.c): a run stops after the first evaluation whose
# validation loss is at or below it, and ends as after its last step (summary, model).
#  1. A run with evaluations every 2 steps and no target, then the same run with the
#     target set to its third evaluation's loss: the second stops at that evaluation
#     (step 6), says so, and its log is the first run's, bit for bit, up to there.
#  2. A target no evaluation reaches: every step runs, no stop line.
#  3. Under global_batch_size = auto, a target the first evaluation reaches: it stops
#     there, and the summary counts the steps it ran.
#  4. Two data-parallel ranks (with mpirun): both stop at the same evaluation, exit 0.
#  5. A negative target is refused with one line naming the key.
# Environment: GENTRAIN, top_srcdir, MPIEXEC (part 4 is skipped without it).
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir target_loss
prepare_slice

TINY=(--data "$tmp/d.h5" --n_layer 1 --n_head 2 --n_embd 16 --block_size 8 --batch_size 2
      --threads 1 --eval_batches 2 --warmup_steps 1 --lr 3e-3)
G=(timeout 300 "$GENTRAIN" train "${TINY[@]}")
# val_losses LOG: "step:val_loss" of each evaluation record, space-separated.
val_losses() { sed -n 's/^{"step":\([0-9]*\),.*"val_loss":\([0-9.]*\).*/\1:\2/p' "$1" | tr '\n' ' '; }

# ---------------------------------------------------------------- 1. reached
run_ok full "${G[@]}" --steps 20 --eval_every 2 --out "$tmp/full"
evals=$(val_losses "$tmp/full/log.jsonl")
third=$(echo "$evals" | awk '{ split($3, a, ":"); print a[2] }')
# the first of the evaluations at or below it (the log prints 6 decimals: allow for that)
target=$(awk -v v="$third" 'BEGIN { printf "%.7f", v + 5e-7 }')
expect=$(echo "$evals" | tr ' ' '\n' | awk -F: -v t="$target" 'NF == 2 && $2 + 0 <= t + 0 { print $1; exit }')
check "setup: the full run's evaluations ($evals) give a target ($target) reached at step ${expect:-none} < 20" \
    test -n "$expect" -a "${expect:-20}" -lt 20
run_ok stopped "${G[@]}" --steps 20 --eval_every 2 --out "$tmp/stopped" --target_val_loss "$target"
check "stops at step $expect with one line saying so" test "$(grep -c \
    "^target_val_loss $(printf '%.4f' "$target") reached at step $expect (val_loss [0-9.]*): stopping here\$" \
    "$tmp/stopped.out")" -eq 1
check "the summary counts $expect steps" grep -q "^done: $expect steps in " "$tmp/stopped.out"
check "its log is the full run's first $expect records, to the bit" \
    cmp -s <(cut -d, -f1-3 "$tmp/stopped/log.jsonl") <(head -n "$expect" "$tmp/full/log.jsonl" | cut -d, -f1-3)
check "its log has $expect records" test "$(wc -l < "$tmp/stopped/log.jsonl")" -eq "$expect"
check "the model is saved" test -s "$tmp/stopped/model.h5"

# ---------------------------------------------------------------- 2. never reached
run_ok never "${G[@]}" --steps 8 --eval_every 2 --out none --log "$tmp/never.jsonl" \
    --target_val_loss 1e-6
check "an unreached target: all 8 steps, no stop line" test \
    "$(wc -l < "$tmp/never.jsonl")" -eq 8 -a "$(grep -c 'reached at step' "$tmp/never.out")" -eq 0

# ---------------------------------------------------------------- 3. auto batch
run_ok auto "${G[@]}" --steps 40 --eval_every 4 --out none --log "$tmp/auto.jsonl" \
    --global_batch_size auto --target_val_loss 1000
check "auto: stops at the first evaluation (step 4)" \
    grep -q '^target_val_loss 1000.0000 reached at step 4 ' "$tmp/auto.out"
check "auto: the summary counts 4 steps" grep -q '^done: 4 steps in ' "$tmp/auto.out"

# ---------------------------------------------------------------- 4. two ranks
if [ -n "${MPIEXEC:-}" ]; then
    run_ok np2 timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 \
        "$GENTRAIN" train "${TINY[@]}" --steps 40 --eval_every 4 --out "$tmp/np2" \
        --target_val_loss 1000
    check "np 2: one stop line, at step 4, and the ranks' parameters identical" test \
        "$(grep -c '^target_val_loss 1000.0000 reached at step 4 ' "$tmp/np2.out")" -eq 1 -a \
        "$(grep -c '^check: the parameters are identical on all 2 ranks$' "$tmp/np2.out")" -eq 1
else
    echo "skip: part 4 (no mpirun)"
fi

# ---------------------------------------------------------------- 5. refused
"${G[@]}" --steps 4 --out none --target_val_loss -1 > "$tmp/neg.out" 2>&1
rc=$?
check "target_val_loss -1: refused (rc $rc), one line naming the key" \
    test $rc -ne 0 -a "$(grep -c 'target_val_loss' "$tmp/neg.out")" -eq 1
show "$tmp/neg.out"

echo "$fails failed"
[ "$fails" -eq 0 ]
