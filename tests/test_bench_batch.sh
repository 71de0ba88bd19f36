#!/usr/bin/env bash
# scripts/bench-batch.sh on a tiny model (a check that the script works, not a
# benchmark): three fixed batches and auto on one token budget; one table row and one
# JSON line per run, each run's steps = budget / batch, auto's batch sequence adding up
# to the budget; a batch that does not divide the budget is refused (exit 2, one line).
# With STOP_AT_TARGET=1 and a target the first evaluation meets, every run ends there;
# with AUTO=0 only the fixed batches run; a bad AUTO is refused.
# scripts/bench-batch-predict.py on a fixed run's log: with no fixed cost a step, auto
# keeps that batch; with a step that is all communication it takes larger ones; logs it
# cannot use (no noise estimates, a varying batch) are refused.
# Then scripts/bench-batch-summary.py over the sweep: with a target every evaluation
# meets, every batch reaches it at the first evaluation (the same tokens for all); with
# one none meets, none reaches it and auto gets no ratio; a missing folder is refused.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir bench_batch
prepare_slice
cat > "$tmp/tiny.cfg" << CFG
data = $tmp/d.h5
n_layer = 2
n_head = 2
n_embd = 32
block_size = 32
batch_size = 4
steps = 240
warmup_steps = 8
lr = 3e-3
threads = 1
CFG
export GENTRAIN CONFIG=$tmp/tiny.cfg TARGET=3.3 BATCHES="4 8 16" AUTO_MIN=8 \
    AUTO_ARGS="--batch_overhead 300 --noise_every 5" EVAL_SEQ=96 VAL_SEQ=48 WARMUP_SEQ=32 \
    OUT=$tmp/runs
run_ok bench timeout 300 "$top_srcdir/scripts/bench-batch.sh"
check "one JSON line per run (4)" test "$(grep -c '^{"run": ' "$tmp/bench.out")" -eq 4
check "fixed runs: steps = 960 sequences / batch (240, 120, 60)" test \
    "$(grep -o '"batch": "[0-9]*", .*"steps": [0-9]*' "$tmp/bench.out" | sed 's/.*"steps": //' | tr '\n' ' ')" = "240 120 60 "
check "auto: its batch sequence adds up to the 960 sequences" awk '
    /^\{"run": "auto/ { match($0, /"batch_sequence": "[^"]*"/); s = substr($0, RSTART + 19, RLENGTH - 20)
        n = split(s, p, " "); for (i = 1; i <= n; i++) { split(p[i], q, "x"); t += q[1] * q[2] } }
    END { exit !(t == 960) }' "$tmp/bench.out"
check "a table row for auto with its sequence" grep -q '^auto .* [0-9]*x8' "$tmp/bench.out"
BATCHES="4 7" OUT=$tmp/bad "$top_srcdir/scripts/bench-batch.sh" > "$tmp/bad.out" 2>&1
rc=$?
check "batch 7 refused (rc $rc), one line" test $rc -eq 2 -a "$(wc -l < "$tmp/bad.out")" -eq 1 \
    -a -n "$(grep 'batch 7 does not divide' "$tmp/bad.out")"
# STOP_AT_TARGET=1: a target every evaluation meets ends each run at its first one
STOP_AT_TARGET=1 TARGET=99 BATCHES="4 8" OUT=$tmp/stop \
    run_ok stop timeout 300 "$top_srcdir/scripts/bench-batch.sh"
check "STOP_AT_TARGET: fixed runs stop at their first evaluation (steps 24 12)" test \
    "$(grep -o '"batch": "[0-9]*", .*"steps": [0-9]*' "$tmp/stop.out" | sed 's/.*"steps": //' | tr '\n' ' ')" = "24 12 "
check "STOP_AT_TARGET: all 3 runs say they stopped at the target" test \
    "$(grep -l '^target_val_loss 99.0000 reached at step ' "$tmp"/stop/*.out | wc -l)" -eq 3
AUTO=0 STOP_AT_TARGET=1 TARGET=99 BATCHES="8" OUT=$tmp/noauto \
    run_ok noauto timeout 300 "$top_srcdir/scripts/bench-batch.sh"
check "AUTO=0: one JSON line, the fixed batch's, and no auto run" test \
    "$(grep -c '^{"run": "8-s1337"' "$tmp/noauto.out")" -eq 1 -a \
    "$(grep -c '^{"run": ' "$tmp/noauto.out")" -eq 1 -a ! -e "$tmp/noauto/auto-s1337.out"
AUTO=2 OUT=$tmp/bad3 "$top_srcdir/scripts/bench-batch.sh" > "$tmp/bad3.out" 2>&1
rc=$?
check "AUTO=2 refused (rc $rc), one line" test $rc -eq 2 -a "$(wc -l < "$tmp/bad3.out")" -eq 1 \
    -a -n "$(grep "AUTO must be 0 or 1" "$tmp/bad3.out")"
STOP_AT_TARGET=yes OUT=$tmp/bad2 "$top_srcdir/scripts/bench-batch.sh" > "$tmp/bad2.out" 2>&1
rc=$?
check "STOP_AT_TARGET=yes refused (rc $rc), one line" test $rc -eq 2 -a \
    "$(wc -l < "$tmp/bad2.out")" -eq 1

summary="$top_srcdir/scripts/bench-batch-summary.py"
run_ok summary_easy "$summary" "$tmp/runs" --target 99 --default 8
check "summary: 4 batches reach 99 at the first evaluation, 96 x 32 = 3072 tokens" test \
    "$(grep -cE '^(4|8|16|auto) +1/1 +3072 ' "$tmp/summary_easy.out")" -eq 4
check "summary: auto against the best fixed and the default (8) batch" \
    grep -qE '^auto / best fixed \([0-9]+\): [0-9.]+ of the medians; seed by seed [0-9.]+$' \
    "$tmp/summary_easy.out"
check "summary: default line names batch 8" grep -q '^auto / default (8): ' "$tmp/summary_easy.out"
run_ok summary_hard "$summary" "$tmp/runs" --target 0
check "summary: nothing reaches 0" test "$(grep -c ' 0/1 .*not reached' "$tmp/summary_hard.out")" -eq 4
check "summary: no ratio without a time to the target" \
    grep -q '^auto / best fixed ([0-9]*): - of the medians; seed by seed -$' "$tmp/summary_hard.out"
"$summary" "$tmp/nowhere" > "$tmp/summary_bad.out" 2>&1
rc=$?
check "summary: a missing folder is refused (rc $rc), one line" test $rc -eq 2 -a \
    "$(wc -l < "$tmp/summary_bad.out")" -eq 1

# scripts/bench-batch-predict.py on the fixed 8 run (2 micro-batches a step: it has
# noise scale estimates)
predict="$top_srcdir/scripts/bench-batch-predict.py"
run_ok predict_free "$predict" "$tmp/runs/8-s1337/log.jsonl" --target 99 --comm-ms 0
check "predict, nothing fixed a step: auto keeps the logged batch (auto / 8 = 1.000)" \
    grep -q '^auto / 8 (logged): 1.000$' "$tmp/predict_free.out"
check "predict: a row per batch (8 16 32 64) and auto's" test \
    "$(grep -cE '^(8|16|32|64|auto) +[0-9]+ +[0-9]+ +[0-9.]+' "$tmp/predict_free.out")" -eq 5
run_ok predict_slow "$predict" "$tmp/runs/8-s1337/log.jsonl" --target 99 --comm-ms 1e6
check "predict, a step that is all communication: auto takes larger batches, auto / 8 < 1" \
    awk '/^auto +[0-9]/ { for (i = 5; i <= NF; i++) if ($i !~ /x8$/) big = 1 }
         /^auto \/ 8 \(logged\): / { r = $NF + 0 } END { exit !(big && r < 1) }' \
    "$tmp/predict_slow.out"
"$predict" "$tmp/runs/4-s1337/log.jsonl" > "$tmp/predict_bad.out" 2>&1
rc=$?
check "predict: a log without noise estimates is refused (rc $rc), one line" test $rc -eq 2 -a \
    "$(wc -l < "$tmp/predict_bad.out")" -eq 1
"$predict" "$tmp/runs/auto-s1337/log.jsonl" > "$tmp/predict_auto.out" 2>&1
rc=$?
check "predict: an auto run's log is refused (rc $rc)" test $rc -eq 2 -a \
    -n "$(grep 'not a fixed-batch run' "$tmp/predict_auto.out")"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
