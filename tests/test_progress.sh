#!/usr/bin/env bash
# Progress a person can read (config key log_every, src/train/train_report.c):
#  - a step line every log_every steps, plus this run's first step, the last one and
#    every evaluation step; log_every = 0 (the default) gives about 100 lines a run;
#  - each line says the tokens trained on so far, the time elapsed and the ETA, and
#    stays plain text on a file or pipe (no carriage return, no colour);
#  - the JSON Lines log keeps a record of every step, with tokens and elapsed_s;
#  - log_every is in the config table (--help, the printed config), a negative value
#    is refused, and a resume may change it.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
unset OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_RANK PMI_SIZE PMIX_SIZE MV2_COMM_WORLD_SIZE \
    SLURM_STEP_NUM_TASKS
. "$top_srcdir/tests/lib.sh"
test_tmpdir progress
prepare_slice

# B x T = 2 x 8 = 16 tokens a step.
TINY=(--data "$tmp/d.h5" --n_layer 1 --n_head 2 --n_embd 16 --block_size 8 --batch_size 2
      --threads 1 --eval_batches 2 --warmup_steps 1)
G=(timeout 300 "$GENTRAIN" train "${TINY[@]}")
steps_of() { sed -n 's/^step *\([0-9]*\)\/[0-9]* | loss .*/\1/p' "$1" | tr '\n' ' '; }

# ---------------------------------------------------------------- log_every 10
run_ok every10 "${G[@]}" --steps 35 --eval_every 0 --log_every 10 --out "$tmp/r10"
got=$(steps_of "$tmp/every10.out")
check "log_every 10 of 35 steps: lines at steps 1 10 20 30 35 (got: $got)" \
    test "$got" = "1 10 20 30 35 "
check "the JSON Lines log still has all 35 steps" test "$(wc -l < "$tmp/r10/log.jsonl")" -eq 35
# step 20: 20 x 16 = 320 tokens in the line and in the log record
line=$(grep '^step    20/35 | loss ' "$tmp/every10.out")
check "step 20's line: 320 tokens, elapsed and ETA as H:MM:SS" \
    grep -Eq '\| 320 tokens \| elapsed [0-9]+:[0-5][0-9]:[0-5][0-9] \| ETA [0-9]+:[0-5][0-9]:[0-5][0-9] \|' \
    <<< "$line"
check "step 35's line (the last): ETA 0:00:00" grep -q '^step    35/35 | .* | ETA 0:00:00 |' \
    "$tmp/every10.out"
check "step 20's record: \"tokens\":320 and an elapsed_s" \
    grep -Eq '^\{"step":20,.*"tokens":320,"elapsed_s":[0-9]+\.[0-9]{3}' "$tmp/r10/log.jsonl"
# elapsed_s never goes back, tokens grow by 16 a step
check "the records' tokens grow by 16 a step and elapsed_s never decreases" awk '
    { t = $0; sub(/.*"tokens":/, "", t); sub(/,.*/, "", t)
      e = $0; sub(/.*"elapsed_s":/, "", e); sub(/[,}].*/, "", e)
      if (t + 0 != 16 * NR || e + 0 < last) bad = 1; last = e + 0 }
    END { exit !(NR == 35 && !bad) }' "$tmp/r10/log.jsonl"
# a file is not a terminal: plain lines, nothing that steers one
check "stdout to a file: no carriage return or escape sequence" \
    test "$(LC_ALL=C grep -c "$(printf '[\r\033]')" "$tmp/every10.out")" -eq 0
check "one line saying the interval" \
    test "$(grep -c '^progress: a step line every 10 steps (log_every); the log has every step$' \
        "$tmp/every10.out")" -eq 1

# ---------------------------------------------------------------- evaluations
run_ok evals "${G[@]}" --steps 12 --eval_every 4 --log_every 5 --out none --log ""
got=$(steps_of "$tmp/evals.out")
check "log_every 5, eval_every 4: lines at 1 4 5 8 10 12 (got: $got)" \
    test "$got" = "1 4 5 8 10 12 "

# ---------------------------------------------------------------- the default
run_ok auto "${G[@]}" --steps 300 --eval_every 0 --out none --log "" --lr 1e-4
got=$(grep -c '^step .* | loss ' "$tmp/auto.out")
check "log_every 0 (default), 300 steps: every 3rd step and the first: 101 lines (got $got)" \
    test "$got" -eq 101
check "... and one line saying so" \
    grep -q '^progress: a step line every 3 steps (log_every = 0: about 100 a run)$' \
        "$tmp/auto.out"
run_ok short "${G[@]}" --steps 20 --eval_every 0 --out none --log ""
check "a short run (20 steps) keeps a line every step, no interval line" test \
    "$(grep -c '^step .* | loss ' "$tmp/short.out")" -eq 20 -a \
    "$(grep -c '^progress:' "$tmp/short.out")" -eq 0

# ---------------------------------------------------------------- the key itself
"$GENTRAIN" train --help > "$tmp/help.txt" 2>&1
check "train --help documents log_every" grep -q 'log_every .*steps between the step lines' \
    "$tmp/help.txt"
check "the printed config has log_every = 10" grep -q '^log_every *= 10$' "$tmp/every10.out"
timeout 60 "$GENTRAIN" train "${TINY[@]}" --log_every -1 > "$tmp/neg.out" 2> "$tmp/neg.err"
rc=$?
check "log_every -1: exit 2, one error line naming it (rc $rc)" test $rc -eq 2 -a \
    "$(grep -c '^gentrain: error: .*log_every = -1: must be >= 0' "$tmp/neg.err")" -eq 1 -a \
    "$(wc -l < "$tmp/neg.err")" -eq 1
# a resume may change it (it does not change the training)
run_ok first "${G[@]}" --steps 6 --eval_every 0 --ckpt_every 3 --out "$tmp/res" \
    --log_every 1
rm -f "$tmp/res/checkpoints/ckpt_00000006.h5"
run_ok resumed "${G[@]}" --steps 6 --eval_every 0 --ckpt_every 3 --out "$tmp/res" \
    --log_every 2 --resume auto
got=$(steps_of "$tmp/resumed.out")
check "resumed at step 3 with log_every 2: lines at 4 and 6 (got: $got)" test "$got" = "4 6 "

echo "$fails failed"
[ "$fails" -eq 0 ]
