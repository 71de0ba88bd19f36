#!/usr/bin/env bash
# Checkpoints and exact resume through `gentrain train` (ckpt_every, resume, signals):
#  1. one process: a 40-step run with ckpt_every 20, killed with SIGKILL as soon as its
#     step-20 checkpoint exists, then resumed with resume = auto, logs the same losses
#     for steps 21..40 (as printed text) and ends with the same parameters (largest
#     difference 0) as the same 40 steps run straight;
#  2. the same with 2 ranks under mpirun (every process of the job killed); a 1-rank
#     checkpoint (global batch 8) on 2 ranks of batch_size 8 is refused in one line
#     that names the batch_size and the rank count that would keep it (tests/
#     test_elastic.sh resumes on other rank counts);
#  3. SIGUSR1 to a running process: exit status 75, a checkpoint at the step it stopped
#     at, and the resumed run ends like the straight one;
#  4. a corrupted newest checkpoint: resume = auto warns, skips it and continues from
#     the one before, to the same end;
#  5. resuming with another lr is refused with an error naming it; another batch_size
#     that keeps the global batch (4 x 2 micro-steps for 8) is allowed and said;
#     checkpoint keys without a run folder are refused; a run accumulating gradients
#     (global_batch_size) resumes exactly too; the data copied to another path resumes
#     (compared by its fingerprint) to the same end; another file of its shape there is
#     refused, and so is one of another shape padded to its size (naming the shape);
#  6. out of space at save time (a file-size limit): one error line, a non-zero exit,
#     the previous checkpoint intact and no .tmp left; resuming without the limit ends
#     like the straight run;
#  7. a crash (SIGKILL) in the middle of a checkpoint write, through the test hook
#     GENTRAIN_TEST_CRASH_IN_CKPT (io/ckpt/ckpt.c): the .tmp stays, the previous checkpoint
#     is intact, resume = auto ignores the .tmp and ends like the straight run.
# Every run is under a time limit, so a hang fails the test instead of blocking it.
#
# Environment: GENTRAIN, CMPMODEL (tests/cmpmodel), top_srcdir, MPIEXEC (part 2 is
# skipped without it); Open MPI's run-as-root variables when run as root.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"

. "$top_srcdir/tests/lib.sh"
test_tmpdir resume

prepare_slice

# About 10-30 ms a step with the sanitizers, a few ms without: the runs killed below
# take 50 ms more a step (see run_killed).
ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 96 --block_size 64
      --batch_size 8 --steps 40 --warmup_steps 5 --lr 3e-3 --val_dataset none
      --threads 1 --seed 7 --ckpt_every 20)
CK20=checkpoints/ckpt_00000020.h5
CK40=checkpoints/ckpt_00000040.h5

# losses LOG FIRST: "step loss" for steps FIRST..40, the loss as logged (text); a step
# logged twice (a killed run and its resume append to one log) counts as its last line.
losses() {
    sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$1" |
        awk -v first="$2" '{ l[$1] = $2 } END { for (s = first; s <= 40; s++) print s, l[s] }'
}
same_losses() { # LOG_A LOG_B FIRST
    losses "$1" "$3" > "$tmp/la" && losses "$2" "$3" > "$tmp/lb" && cmp -s "$tmp/la" "$tmp/lb"
}
same_model() { "$CMPMODEL" "$1" "$2" 0 > "$tmp/cmp.txt" 2>&1; }

# run_killed NAME CMD...: starts CMD in a session of its own, waits for NAME's step-20
# checkpoint, then kills every process of the session with SIGKILL.
run_killed() {
    local name=$1
    shift
    # 50 ms more a step (GENTRAIN_TEST_STEP_MS): a second between the checkpoints of
    # steps 20 and 40 however fast the build, so the kill lands between them.
    GENTRAIN_TEST_STEP_MS=50 setsid timeout 120 "$@" > "$tmp/$name.out" 2>&1 &
    local pid=$! i
    for ((i = 0; i < 6000; i++)); do
        [ -f "$tmp/$name/$CK20" ] && break
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.01
    done
    # mpirun puts each rank in a process group of its own, but they stay in the
    # session setsid started: kill the session, and wait until it is gone.
    pkill -KILL -s "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
    for ((i = 0; i < 200; i++)); do
        pgrep -s "$pid" > /dev/null 2>&1 || break
        sleep 0.05
    done
    [ -f "$tmp/$name/$CK20" ] && [ ! -f "$tmp/$name/$CK40" ] && [ ! -f "$tmp/$name/model.h5" ]
}

# ------------------------------------------------------------- 1. np=1, SIGKILL
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/ref" > "$tmp/ref.out" 2>&1
rc=$?
check "straight 40 steps exit 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/ref.out"
check "straight run wrote checkpoints 20 and 40" test -f "$tmp/ref/$CK20" -a -f "$tmp/ref/$CK40"

check "np=1 killed with SIGKILL after its step-20 checkpoint, before step 40" \
    run_killed a timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/a"
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/a" --resume auto > "$tmp/a2.out" 2>&1
rc=$?
check "np=1 resume exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/a2.out"
check "np=1 resume says where it starts" grep -q "resuming from .*ckpt_00000020.h5 at step 20" "$tmp/a2.out"
check "np=1 resumed losses of steps 21..40 identical" same_losses "$tmp/ref/log.jsonl" "$tmp/a/log.jsonl" 21
check "np=1 resumed final parameters identical" same_model "$tmp/ref/model.h5" "$tmp/a/model.h5"

# ------------------------------------------------------------- 2. np=2, SIGKILL
if [ -n "${MPIEXEC:-}" ]; then
    MPI=("$MPIEXEC" --oversubscribe --bind-to none -np 2)
    timeout 180 "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/ref2" > "$tmp/ref2.out" 2>&1
    rc=$?
    check "np=2 straight 40 steps exit 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/ref2.out"
    check "np=2 killed with SIGKILL after its step-20 checkpoint, before step 40" \
        run_killed b "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/b"
    timeout 180 "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/b" --resume auto \
        > "$tmp/b2.out" 2>&1
    rc=$?
    check "np=2 resume exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/b2.out"
    check "np=2 resumed losses of steps 21..40 identical" \
        same_losses "$tmp/ref2/log.jsonl" "$tmp/b/log.jsonl" 21
    check "np=2 resumed final parameters identical" same_model "$tmp/ref2/model.h5" "$tmp/b/model.h5"
    # One rank's global batch of 8 cannot be 2 ranks x batch_size 8.
    timeout 180 "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/w" \
        --resume "$tmp/ref/$CK20" > "$tmp/w.out" 2>&1
    rc=$?
    check "a 1-rank checkpoint on 2 ranks of batch_size 8 is refused (rc $rc)" \
        test $rc -ne 0 -a $rc -ne 124
    check "  in one line naming what would keep its global batch" grep -q \
        "error: rank 0: resume: the checkpoint's global batch of 8 sequences per step is not a whole number of micro-steps of batch_size 8 x 2 ranks = 16; to keep it use batch_size 4, or 1 rank; or set global_batch_size" \
        "$tmp/w.out"
    [ "$(grep -c error "$tmp/w.out")" -eq 1 ] || show "$tmp/w.out"
else
    echo "skip: part 2 (no mpirun)"
fi

# ------------------------------------------------------------- 3. SIGUSR1
"$GENTRAIN" train "${ARGS[@]}" --out "$tmp/u" > "$tmp/u.out" 2>&1 &
pid=$!
stop_after 5 "$tmp/u/log.jsonl" 120 "$pid"
rc=$stop_rc
check "SIGUSR1: exit status 75 (rc $rc)" test $rc -eq 75
[ $rc -eq 75 ] || show "$tmp/u.out"
n=$(stopped_step "$tmp/u.out")
check "SIGUSR1: says where it stopped (step ${n:-?})" test -n "$n"
n=${n:-0}
check "SIGUSR1: a checkpoint at that step" test -f "$tmp/u/checkpoints/$(printf 'ckpt_%08d.h5' "$n")"
check "SIGUSR1: no model.h5 (not finished)" test ! -f "$tmp/u/model.h5"
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/u" --resume auto > "$tmp/u2.out" 2>&1
rc=$?
check "SIGUSR1: resume exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/u2.out"
check "SIGUSR1: resumed losses identical" same_losses "$tmp/ref/log.jsonl" "$tmp/u/log.jsonl" $((n + 1))
check "SIGUSR1: resumed final parameters identical" same_model "$tmp/ref/model.h5" "$tmp/u/model.h5"

# ------------------------------------------------------------- 4. corrupted newest
mkdir -p "$tmp/c/checkpoints"
cp "$tmp/ref/$CK20" "$tmp/ref/$CK40" "$tmp/c/checkpoints/"
f="$tmp/c/$CK40"
mid=$(($(stat -c %s "$f") / 2))
for ((k = 0; k < 16; k++)); do
    b=$(od -An -tu1 -j $((mid + k)) -N1 "$f" | tr -d ' ')
    printf "\\$(printf %03o $((255 - b)))" | dd of="$f" bs=1 seek=$((mid + k)) conv=notrunc 2> /dev/null
done
check "corrupt: the newest checkpoint differs from the original" \
    test -n "$(cmp "$f" "$tmp/ref/$CK40" 2>&1)"
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/c" --resume auto > "$tmp/c.out" 2>&1
rc=$?
check "corrupt: resume exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/c.out"
check "corrupt: warns about the bad file" grep -q "warning: skipping checkpoint .*ckpt_00000040.h5" "$tmp/c.out"
check "corrupt: continues from step 20" grep -q "resuming from .*ckpt_00000020.h5 at step 20" "$tmp/c.out"
check "corrupt: final parameters identical" same_model "$tmp/ref/model.h5" "$tmp/c/model.h5"

# ------------------------------------------------------------- 5. refusals
# resume20 NAME ARG...: a run with these arguments resumed from the straight run's
# step-20 checkpoint into $tmp/NAME, its output in $tmp/NAME.out; rc its exit status
resume20() {
    local name=$1
    shift
    timeout 120 "$GENTRAIN" train "${ARGS[@]}" "$@" --out "$tmp/$name" \
        --resume "$tmp/ref/$CK20" > "$tmp/$name.out" 2>&1
    rc=$?
}
resume20 e --lr 1e-3
check "changed lr: refused (rc $rc)" test $rc -ne 0 -a $rc -ne 124
check "  naming lr" grep -q "error: cannot resume from .*lr = 0.003 in the checkpoint, 0.001 now" "$tmp/e.out"
resume20 e4 --batch_size 4
check "changed batch_size 8 -> 4: allowed (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/e4.out"
check "  keeping the global batch in 2 micro-steps, and saying so" grep -q \
    "^resume: global batch of 8 sequences per step kept (the checkpoint's run had 1 rank): batch_size 4 x 1 rank x 2 micro-steps" \
    "$tmp/e4.out"
# The data staged to another path (node-local disk): allowed, compared by its fingerprint,
# and the run ends like the straight one; another file of the same shape there: refused.
mkdir -p "$tmp/staged"
cp "$tmp/d.h5" "$tmp/staged/d.h5"
resume20 mv --data "$tmp/staged/d.h5"
check "data moved to another path: allowed (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/mv.out"
check "  and said, with its fingerprint compared" grep -q \
    "^resume: changed since the checkpoint: .*data .*/d.h5 -> .*/staged/d.h5 (its fingerprint compared)" \
    "$tmp/mv.out"
check "  final parameters identical to the straight run's" same_model "$tmp/ref/model.h5" "$tmp/mv/model.h5"
tail -c 100000 "$top_srcdir/data/tinyshakespeare.txt" > "$tmp/other.txt"
timeout 120 "$GENTRAIN" prepare "$tmp/other.txt" -o "$tmp/staged/o.h5" > "$tmp/o.txt" 2>&1 &&
    mv "$tmp/staged/o.h5" "$tmp/staged/d.h5"
resume20 mv2 --data "$tmp/staged/d.h5"
check "other data at the new path: refused (rc $rc)" test $rc -ne 0 -a $rc -ne 124
check "  naming what differs" grep -q \
    "error: .*resume: the training data .*/staged/d.h5 is not what checkpoint .* was trained on" \
    "$tmp/mv2.out"
# A file of another length padded to the same size: the field that differs is named
# whole (shape=[R x L] holds spaces: the message once named "90000] then"), in one line.
head -c 99998 "$tmp/slice.txt" > "$tmp/short.txt"
timeout 120 "$GENTRAIN" prepare "$tmp/short.txt" -o "$tmp/staged/s.h5" > "$tmp/o.txt" 2>&1 &&
    mv "$tmp/staged/s.h5" "$tmp/staged/d.h5"
size=$(wc -c < "$tmp/d.h5")
head -c $((size - $(wc -c < "$tmp/staged/d.h5"))) /dev/zero >> "$tmp/staged/d.h5"
resume20 mv3 --data "$tmp/staged/d.h5"
check "data of another shape, the same size: refused (rc $rc)" test $rc -ne 0 -a $rc -ne 124
check "  in one line naming the shape whole" test "$(grep -c \
    "error: .*(shape=\[1 x 90000\] then, shape=\[1 x 89998\] now)" "$tmp/mv3.out")" -eq 1 \
    -a "$(grep -c error "$tmp/mv3.out")" -eq 1
timeout 60 "$GENTRAIN" train "${ARGS[@]}" --out none > "$tmp/n.out" 2>&1
rc=$?
check "ckpt_every without out: refused (rc $rc)" test $rc -eq 2
check "  saying why" grep -q "ckpt_every needs a run folder" "$tmp/n.out"

# ------------------------------------------------------------- 5b. accumulation
# global_batch_size 8 as 2 micro-steps of 4: a run resumed from the step-20 checkpoint
# must read the micro-batches where the straight run did (the data cursor counts
# micro-steps), so it ends identically.
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --global_batch_size 8 \
    --out "$tmp/g" > "$tmp/g.out" 2>&1
rc=$?
check "accumulation: straight 40 steps exit 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/g.out"
mkdir -p "$tmp/g2/checkpoints"
cp "$tmp/g/$CK20" "$tmp/g2/checkpoints/"
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --global_batch_size 8 \
    --out "$tmp/g2" --resume auto > "$tmp/g2.out" 2>&1
rc=$?
check "accumulation: resume exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/g2.out"
check "accumulation: resumed losses of steps 21..40 identical" \
    same_losses "$tmp/g/log.jsonl" "$tmp/g2/log.jsonl" 21
check "accumulation: resumed final parameters identical" \
    same_model "$tmp/g/model.h5" "$tmp/g2/model.h5"

# ------------------------------------------------------------- 6. out of space
# The step-20 checkpoint of the straight run is there; the resumed run may not write a
# file larger than half a checkpoint (ulimit -f, SIGXFSZ ignored so write() fails with
# EFBIG as on a full disk), so its step-40 save fails.
mkdir -p "$tmp/f/checkpoints"
cp "$tmp/ref/$CK20" "$tmp/f/checkpoints/"
blocks=$(($(stat -c %s "$tmp/ref/$CK20") / 1024 / 2))
(trap '' XFSZ; ulimit -f "$blocks"
 exec timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/f" --resume auto) \
    > "$tmp/f.out" 2>&1
rc=$?
check "no space: the run fails (rc $rc)" test $rc -ne 0 -a $rc -ne 124
check "  with one error line" test "$(grep -c 'error' "$tmp/f.out")" -eq 1
check "  naming the checkpoint" grep -q "^gentrain: error: .*ckpt_00000040.h5" "$tmp/f.out"
grep -q "error" "$tmp/f.out" && [ "$(grep -c 'error' "$tmp/f.out")" -eq 1 ] || show "$tmp/f.out"
check "  the step-20 checkpoint intact" cmp -s "$tmp/ref/$CK20" "$tmp/f/$CK20"
check "  no step-40 checkpoint, no .tmp, no model.h5" \
    test ! -e "$tmp/f/$CK40" -a ! -e "$tmp/f/$CK40.tmp" -a ! -e "$tmp/f/model.h5"
check "  nothing else in the folder" test "$(ls "$tmp/f/checkpoints")" = ckpt_00000020.h5
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/f" --resume auto > "$tmp/f2.out" 2>&1
rc=$?
check "no space: resume without the limit exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/f2.out"
check "  from step 20" grep -q "resuming from .*ckpt_00000020.h5 at step 20" "$tmp/f2.out"
check "  final parameters identical" same_model "$tmp/ref/model.h5" "$tmp/f/model.h5"

# ------------------------------------------------------------- 7. crash mid-write
# A run resumed from a copy of the straight run's step-20 checkpoint, with
# GENTRAIN_TEST_CRASH_IN_CKPT=1 (io/ckpt/ckpt.c): its first save (step 40) kills the
# process with SIGKILL after writing the .tmp, before the rename.
mkdir -p "$tmp/k/checkpoints"
cp "$tmp/ref/$CK20" "$tmp/k/checkpoints/"
GENTRAIN_TEST_CRASH_IN_CKPT=1 timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/k" \
    --resume auto > "$tmp/k.out" 2>&1
rc=$?
check "crash: killed by SIGKILL during the step-40 save (rc $rc)" test $rc -eq 137
[ $rc -eq 137 ] || show "$tmp/k.out"
check "  its .tmp is left" test -s "$tmp/k/$CK40.tmp"
check "  no step-40 checkpoint, no model.h5" test ! -e "$tmp/k/$CK40" -a ! -e "$tmp/k/model.h5"
check "  the step-20 checkpoint intact" cmp -s "$tmp/ref/$CK20" "$tmp/k/$CK20"
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/k" --resume auto > "$tmp/k2.out" 2>&1
rc=$?
check "crash: resume exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/k2.out"
check "  ignores the .tmp, resumes from step 20" \
    grep -q "resuming from .*ckpt_00000020.h5 at step 20" "$tmp/k2.out"
check "  without a warning about it" test -z "$(grep -i 'warning' "$tmp/k2.out")"
check "  the .tmp is gone" test ! -e "$tmp/k/$CK40.tmp"
check "  final parameters identical" same_model "$tmp/ref/model.h5" "$tmp/k/model.h5"

echo "$fails failed"
[ $fails -eq 0 ]
