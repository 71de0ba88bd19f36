#!/usr/bin/env bash
# Elastic resume and asynchronous checkpoints through `gentrain train` under mpirun.
#  1. Elastic: a 2-rank run (batch_size 4, a global batch of 8) checkpoints at step 10;
#     resumed on 1 rank (batch_size 4 x 2 micro-steps) and on 4 ranks (oversubscribed,
#     batch_size 2) it keeps the global batch, says so in one line, and ends like the
#     2-rank run straight: losses and val_losses of every step within 1e-5 relative,
#     final parameters within 1e-5 (tests/cmpmodel; only the order of the sums
#     changes). A 1-rank run's checkpoint (2 micro-steps) resumed on 4 ranks does the
#     same. On 4 ranks of batch_size 4 (16 a micro-step) it is refused in one line
#     naming the batch_size and rank count that would keep it; with global_batch_size
#     16 set explicitly it is allowed, said in one line, and the next checkpoint
#     records the new global batch and the data cursor where the samples went on
#     (80 + 10 x 16).
#  2. Async (sync = async, staleness 2, weight prediction): a 2-rank run killed by
#     SIGKILL after its step-100 checkpoint (GENTRAIN_TEST_CRASH_IN_CKPT=2: the second
#     save kills the process before its rename) resumes from it, with the 2 gradients
#     in flight and the weights before the last update the checkpoint holds, and logs
#     the same losses as the straight run for every later step and ends with the same
#     parameters, bit for bit. SIGUSR1 to an async run writes a checkpoint and exits
#     75; resumed, it ends bit for bit like the straight run too. The step-400 async
#     checkpoint resumed on 1 rank (2 micro-steps) ends within 1e-5 of the straight
#     run (over 400 steps the rounding of another order of sums grows to about 4e-5).
# Every run is under a time limit, so a hang fails the test instead of blocking it.
#
# Environment: GENTRAIN, CMPMODEL (tests/cmpmodel), top_srcdir, MPIEXEC (skipped
# without); Open MPI's run-as-root variables when run as root (Makefile.am sets them).
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
require_mpiexec
test_tmpdir elastic

MPI=(timeout 180 "$MPIEXEC" --oversubscribe --bind-to none)
CK10=checkpoints/ckpt_00000010.h5
CK100=checkpoints/ckpt_00000100.h5
prepare_slice

ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 32 --block_size 32
      --warmup_steps 5 --lr 3e-3 --eval_every 10 --eval_batches 2 --threads 1 --seed 11
      --ckpt_every 10)

# seed_from REF NAME [STEP]: a run folder $tmp/NAME holding REF's step-STEP (10)
# checkpoint and the first STEP lines of its log (the resumed run appends the rest),
# so the logs compare step for step.
seed_from() {
    local step=${3:-10}
    mkdir -p "$tmp/$2/checkpoints"
    cp "$tmp/$1/checkpoints/$(printf 'ckpt_%08d.h5' "$step")" "$tmp/$2/checkpoints/"
    head -n "$step" "$tmp/$1/log.jsonl" > "$tmp/$2/log.jsonl"
}
# close_to REF NAME STEPS: logs within 1e-5 relative, parameters within 1e-5.
close_to() {
    local rc
    check "$2: losses and val_losses of all $3 steps within 1e-5 of $1" \
        compare_logs "$tmp/$1/log.jsonl" "$tmp/$2/log.jsonl" 1e-5 "$3"
    "$CMPMODEL" "$tmp/$1/model.h5" "$tmp/$2/model.h5" 1e-5 > "$tmp/$2.cmp" 2>&1
    rc=$?
    sed -e 's/^/    /' "$tmp/$2.cmp"
    check "$2: final parameters within 1e-5 of $1" test $rc -eq 0
}
# losses LOG FIRST LAST: "step loss" for steps FIRST..LAST as logged (text); a step
# logged twice (a killed run and its resume append to one log) counts as its last line.
losses() {
    sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$1" |
        awk -v first="$2" -v last="$3" '{ l[$1] = $2 }
            END { for (s = first; s <= last; s++) print s, l[s] }'
}
# identical REF NAME FIRST LAST: the same losses (text) from FIRST on, the same
# parameters (largest difference 0).
identical() {
    local rc
    losses "$tmp/$1/log.jsonl" "$3" "$4" > "$tmp/la"
    losses "$tmp/$2/log.jsonl" "$3" "$4" > "$tmp/lb"
    check "$2: losses of steps $3..$4 identical to $1's" cmp -s "$tmp/la" "$tmp/lb"
    "$CMPMODEL" "$tmp/$1/model.h5" "$tmp/$2/model.h5" 0 > "$tmp/$2.cmp" 2>&1
    rc=$?
    check "$2: final parameters identical to $1's" test $rc -eq 0
    [ $rc -eq 0 ] || sed -e 's/^/    /' "$tmp/$2.cmp"
}
# attr FILE NAME: an integer root attribute of a checkpoint, as gentrain inspect shows it.
attr() { "$GENTRAIN" inspect "$1" 2> /dev/null | sed -n "s/^ *@$2 = \([0-9]*\) .*/\1/p"; }

# ------------------------------------------------------------- 1. elastic, sync
run_ok ref "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --steps 20 --batch_size 4 \
    --out "$tmp/ref"
check "ref: the step-10 checkpoint records global batch 8 and data cursor 80" \
    test "$(attr "$tmp/ref/$CK10" global_batch) $(attr "$tmp/ref/$CK10" samples)" = "8 80"

seed_from ref np1
run_ok np1 timeout 120 "$GENTRAIN" train "${ARGS[@]}" --steps 20 --batch_size 4 \
    --out "$tmp/np1" --resume auto
check "np1: says it keeps the global batch in 2 micro-steps" grep -q \
    "^resume: global batch of 8 sequences per step kept (the checkpoint's run had 2 ranks): batch_size 4 x 1 rank x 2 micro-steps$" \
    "$tmp/np1.out"
close_to ref np1 20

seed_from ref np4
run_ok np4 "${MPI[@]}" -np 4 "$GENTRAIN" train "${ARGS[@]}" --steps 20 --batch_size 2 \
    --out "$tmp/np4" --resume auto
check "np4: says it keeps the global batch" grep -q \
    "^resume: global batch of 8 sequences per step kept (the checkpoint's run had 2 ranks): batch_size 2 x 4 ranks x 1 micro-step$" \
    "$tmp/np4.out"
close_to ref np4 20

# A checkpoint written by 1 rank (batch_size 4 x 2 micro-steps) resumed on 4 ranks.
run_ok one timeout 120 "$GENTRAIN" train "${ARGS[@]}" --steps 20 --batch_size 4 \
    --global_batch_size 8 --out "$tmp/one"
seed_from one one4
run_ok one4 "${MPI[@]}" -np 4 "$GENTRAIN" train "${ARGS[@]}" --steps 20 --batch_size 2 \
    --global_batch_size 8 --out "$tmp/one4" --resume auto
close_to ref one4 20

# 4 ranks of batch_size 4: 16 sequences a micro-step cannot make 8.
seed_from ref no
"${MPI[@]}" -np 4 "$GENTRAIN" train "${ARGS[@]}" --steps 20 --batch_size 4 --out "$tmp/no" \
    --resume auto > "$tmp/no.out" 2>&1
rc=$?
check "np4 batch_size 4: refused (rc $rc)" test $rc -eq 1
check "  in one line, with the values that would work" grep -q \
    "^gentrain: error: rank 0: resume: the checkpoint's global batch of 8 sequences per step is not a whole number of micro-steps of batch_size 4 x 4 ranks = 16; to keep it use batch_size 2, or 2 ranks; or set global_batch_size to change it (e.g. 16 or 32)$" \
    "$tmp/no.out"
check "  and no other error line" test "$(grep -c 'gentrain: error' "$tmp/no.out")" -eq 1
[ "$(grep -c 'gentrain: error' "$tmp/no.out")" -eq 1 ] || show "$tmp/no.out"

# An explicit new global batch: allowed, said, and recorded with the data cursor.
seed_from ref g16
run_ok g16 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --steps 20 --batch_size 4 \
    --global_batch_size 16 --out "$tmp/g16" --resume auto
check "g16: says the global batch changed" grep -q \
    "^resume: global batch changed from 8 to 16 sequences per step (global_batch_size): the lr schedule continues by step, the data at sample 80" \
    "$tmp/g16.out"
ck=$tmp/g16/checkpoints/ckpt_00000020.h5
check "g16: its step-20 checkpoint records global batch 16 and data cursor 240" \
    test "$(attr "$ck" global_batch) $(attr "$ck" samples)" = "16 240"

# ------------------------------------------------------------- 2. async
# 500 steps (about 1 ms each with -O2, more under the sanitizers), so a signal sent
# after the first step arrives well before the end.
ASYNC=("${ARGS[@]}" --steps 500 --ckpt_every 100 --eval_every 100 --batch_size 4
       --sync async --staleness 2)
run_ok aref "${MPI[@]}" -np 2 "$GENTRAIN" train "${ASYNC[@]}" --keep_ckpts 5 --out "$tmp/aref"
check "aref: checkpoints say they hold the gradients in flight" \
    grep -q "^checkpoint: step 100 saved to .* (with the gradients in flight)$" "$tmp/aref.out"
check "aref: the step-100 checkpoint holds 2 gradients in flight and before_update" \
    test "$(attr "$tmp/aref/$CK100" in_flight) $(attr "$tmp/aref/$CK100" predict)" = "2 1"

GENTRAIN_TEST_CRASH_IN_CKPT=2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ASYNC[@]}" \
    --out "$tmp/kill" > "$tmp/kill.out" 2>&1
rc=$?
check "async: killed by SIGKILL in its step-200 save (rc $rc)" test $rc -eq 137
[ $rc -eq 137 ] || show "$tmp/kill.out"
check "  after its step-100 checkpoint" test -f "$tmp/kill/$CK100" -a ! -f "$tmp/kill/model.h5"
run_ok kill2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ASYNC[@]}" --out "$tmp/kill" \
    --resume auto
check "async: resumes from step 100" \
    grep -q "^resuming from .*ckpt_00000100.h5 at step 100$" "$tmp/kill2.out"
identical aref kill 101 500

# SIGUSR1 to mpirun, which hands it to the ranks: a checkpoint and exit 75. (Not under
# `timeout`, which would die of the signal itself: a watchdog instead.)
"$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN" train "${ASYNC[@]}" \
    --out "$tmp/sig" > "$tmp/sig.out" 2>&1 &
pid=$!
stop_after 1 "$tmp/sig/log.jsonl" 180 "$pid"
rc=$stop_rc
check "async SIGUSR1: exit status 75 (rc $rc)" test $rc -eq 75
[ $rc -eq 75 ] || show "$tmp/sig.out"
n=$(stopped_step "$tmp/sig.out")
check "async SIGUSR1: stopped at step ${n:-?} with a checkpoint" \
    test -n "$n" -a -f "$tmp/sig/checkpoints/$(printf 'ckpt_%08d.h5' "${n:-0}")"
run_ok sig2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ASYNC[@]}" --out "$tmp/sig" --resume auto
identical aref sig $((${n:-0} + 1)) 500

# The async checkpoint on 1 rank (2 micro-steps): within rounding of the straight run.
seed_from aref a1 400
run_ok a1 timeout 120 "$GENTRAIN" train "${ASYNC[@]}" --out "$tmp/a1" --resume auto
close_to aref a1 500

echo "$fails failed"
[ $fails -eq 0 ]
