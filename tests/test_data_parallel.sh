#!/usr/bin/env bash
# Data-parallel training over MPI on a slice of the shipped corpus.
#  - One process with batch_size 8, 2 ranks with batch_size 4 and 4 ranks with
#    batch_size 2 see the same global batch each step: their per-step losses (and
#    validation losses) agree within 1e-5 relative, their final models within 1e-5
#    too (norm-wise per tensor, see PTOL); only rank 0 prints step lines, and every
#    rank ends with the same parameters (gentrain checks it once at the end and says
#    so). The 2-rank run cuts its gradients into many small buckets (bucket_mb 0.01),
#    the 4-rank run uses one.
#  - sync = async (staleness 1): one process gives the same losses twice; 2 ranks train
#    (the loss falls), differently from sync, with identical parameters on both ranks;
#    async_predict moves the weights the gradients are taken at from step 3 on.
#  - data_io = posix gives the same run as the default (MPI-IO where HDF5 is parallel);
#    asking for MPI-IO where it cannot work is one clear error.
#  - global_batch_size 8 with batch_size 4 on 1 rank or 2 on 2 ranks (2 micro-steps of
#    gradient accumulation) matches the plain batch of 8 the same way; a global batch
#    that is not a whole number of micro-steps is one clear error.
#  - grad_comm = fp16 on 2 ranks: losses within 1e-2 relative of fp32.
#  - The gradient noise scale is on the evaluation lines and in the log with 2 ranks,
#    and nowhere with one rank of one micro-step; one rank with 2 micro-steps of the
#    same micro-batches logs the estimate of 2 ranks within 1e-3, and so does an async
#    one with 2 micro-steps.
#  - Ranks started with different configs (an MPMD launch) stop with a clear error from
#    every rank and a non-zero exit, without hanging.
#  - A dataset with fewer windows than batch_size x ranks: the same, from every rank.
#  - An error on one rank in the middle of training ends the whole job.
# Every mpirun runs under `timeout`, so a hang fails the test instead of blocking it.
#
# Environment: GENTRAIN, MKDATA, CMPMODEL (tests/cmpmodel), MPIEXEC (skipped without),
# top_srcdir; Open MPI's run-as-root variables when run as root (Makefile.am sets them).
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${MKDATA:?MKDATA must point at the tests/mkdata tool}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
require_mpiexec
test_tmpdir data_parallel

MPI=(timeout 120 "$MPIEXEC" --oversubscribe --bind-to none)
# Final parameters: largest norm-wise relative difference of a tensor (tests/cmpmodel).
# Measured 2e-6 to 3e-6 (the model zeroes the attention key bias's gradient, which is
# rounding alone: AdamW would turn that into differences of 5e-5); a rank reading the
# wrong samples gives about 1.
PTOL=1e-5

prepare_slice

ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 32 --block_size 32 --steps 20
      --warmup_steps 5 --lr 3e-3 --eval_every 10 --eval_batches 2 --threads 1 --seed 11)

# The reference: one plain process (no MPI at all) with the whole global batch.
run_ok np1 timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --out "$tmp/np1"

# same_as_np1 NAME: the run in $tmp/NAME logged the same losses and val_losses as the
# one-process batch-8 run (1e-5 relative) and ended with the same parameters (PTOL).
same_as_np1() {
    local rc
    check "$1: losses and val_losses match np=1 batch 8 within 1e-5" \
        compare_logs "$tmp/np1/log.jsonl" "$tmp/$1/log.jsonl"
    "$CMPMODEL" "$tmp/np1/model.h5" "$tmp/$1/model.h5" "$PTOL" > "$tmp/$1.cmp" 2>&1
    rc=$?
    sed -e 's/^/    /' "$tmp/$1.cmp"
    check "$1: final parameters match np=1 batch 8 (tolerance $PTOL)" test $rc -eq 0
}

for np in 2 4; do
    B=$((8 / np))
    bucket=25
    [ $np -eq 2 ] && bucket=0.01
    "${MPI[@]}" -np $np "$GENTRAIN" train "${ARGS[@]}" --batch_size $B --out "$tmp/np$np" \
        --bucket_mb $bucket > "$tmp/np$np.out" 2> "$tmp/np$np.err"
    rc=$?
    check "np=$np batch $B exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/np$np.err"
    check "np=$np: only rank 0 prints step lines (20)" \
        test "$(grep -c '^step .*| loss ' "$tmp/np$np.out")" -eq 20
    check "np=$np: step lines show the comm time" grep -q '| comm [0-9.]* ms$' "$tmp/np$np.out"
    nb=$(sed -n 's/^gradients: \([0-9]*\) bucket.*/\1/p' "$tmp/np$np.out")
    if [ $np -eq 2 ]; then
        check "np=2: bucket_mb 0.01 makes several buckets (${nb:-none})" test "${nb:-0}" -gt 5
    else
        check "np=4: bucket_mb 25 makes one bucket (${nb:-none})" test "${nb:-0}" -eq 1
    fi
    check "np=$np: log has comm_ms" grep -q '"step":20,.*"comm_ms":[0-9.]*' "$tmp/np$np/log.jsonl"
    check "np=$np: parameters identical on all ranks at the end" \
        grep -q "parameters are identical on all $np ranks" "$tmp/np$np.out"
    check "np=$np: no error lines" test "$(grep -c 'gentrain: error' "$tmp/np$np.err")" -eq 0
    same_as_np1 np$np
done

# run_np NAME NP ARGS...: trains ARGS (after the common ones) on NP ranks into
# $tmp/NAME (model and log), output in $tmp/NAME.out and .err; checks the exit status.
run_np() {
    local name=$1 np=$2
    shift 2
    run_ok "$name" "${MPI[@]}" -np "$np" "$GENTRAIN" train "${ARGS[@]}" "$@" --out "$tmp/$name"
}

# How the ranks read: with parallel HDF5 (and MPI_THREAD_MULTIPLE) data_io = auto reads
# through MPI-IO; data_io = posix reads the same bytes through HDF5's default driver,
# so the run is bit for bit the same. Without MPI-IO, asking for it is one clear error.
run_np posix 2 --batch_size 4 --data_io posix --bucket_mb 0.01
check "np=2 data_io posix: says so" \
    grep -q "^data: read through HDF5's default driver" "$tmp/posix.out"
check "np=2 data_io posix: the same losses as data_io auto" \
    compare_logs "$tmp/np2/log.jsonl" "$tmp/posix/log.jsonl" 0
if grep -q "^data: read through MPI-IO" "$tmp/np2.out"; then
    echo "    data_io auto read through MPI-IO (parallel HDF5)"
    timeout 60 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --data_io mpi-io --out none \
        --log "" > "$tmp/mpiio1.out" 2>&1
    rc=$?
    check "data_io mpi-io without mpirun: refused (rc $rc)" test $rc -ne 0 -a $rc -ne 124
    check "data_io mpi-io without mpirun: says why" \
        grep -q "gentrain: error: data_io = mpi-io: MPI-IO needs an MPI run" "$tmp/mpiio1.out"
else
    echo "    data_io auto read through HDF5's default driver (no MPI-IO here)"
    "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --data_io mpi-io \
        --out none --log "" > "$tmp/mpiio2.out" 2>&1
    rc=$?
    check "data_io mpi-io without MPI-IO: refused (rc $rc)" test $rc -ne 0 -a $rc -ne 124
    check "data_io mpi-io without MPI-IO: one line saying why" \
        test "$(grep -c 'gentrain: error: data_io = mpi-io: ' "$tmp/mpiio2.out")" -eq 1
fi

# global_batch_size 8 by gradient accumulation: 1 process x batch 4 x 2 micro-steps, and
# 2 ranks x batch 2 x 2 micro-steps, train as the plain batch of 8 does.
for np in 1 2; do
    B=$((4 / np))
    run_np acc$np $np --batch_size $B --global_batch_size 8
    check "accumulation np=$np: says how the global batch is made" grep -q \
        "^global batch: 8 sequences = batch_size $B x $np ranks\? x 2 micro-steps (gradients accumulated)" \
        "$tmp/acc$np.out"
    same_as_np1 acc$np
done
# A global batch that is not whole micro-steps: one line from rank 0, before any step.
"${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 2 --global_batch_size 6 \
    --out none --log "" > "$tmp/acc_bad.out" 2>&1
rc=$?
check "global_batch_size 6 with 2 x 2: non-zero exit, no timeout (rc $rc)" \
    test $rc -ne 0 -a $rc -ne 124
check "global_batch_size 6 with 2 x 2: one clear line" test "$(grep -c \
    'gentrain: error: .*global_batch_size 6 is not a multiple of batch_size x ranks = 2 x 2 = 4' \
    "$tmp/acc_bad.out")" -eq 1
check "global_batch_size 6 with 2 x 2: no step trained" \
    test "$(grep -c '^step ' "$tmp/acc_bad.out")" -eq 0

# loss_of LOG STEP: the loss logged for a step.
loss_of() { sed -n "s/^{\"step\":$2,\"loss\":\([0-9.]*\),.*/\1/p" "$1"; }

# The gradient noise scale: on the evaluation lines and in the log with 2 ranks only.
check "np=2: eval lines show the noise scale" \
    grep -q '^step    10/20 | val_loss .* | noise scale [0-9]* tokens' "$tmp/np2.out"
check "np=2: log has noise_scale at the evaluations" \
    test "$(grep -c '"noise_scale":' "$tmp/np2/log.jsonl")" -eq 2
check "np=1: no noise scale anywhere" \
    test "$(grep -ci 'noise.scale' "$tmp/np1.out" "$tmp/np1/log.jsonl" | awk -F: '{s+=$2} END {print s}')" -eq 0
# One rank estimates it from the micro-batches of an accumulated step: acc1 (batch 4 x
# 2 micro-steps) sees the same micro-batches at the same weights as np2 (batch 4 x 2
# ranks) sees on its ranks, so its estimate is np2's up to rounding. Stated error:
# 1e-3 relative (a wrong small-batch size or a lost micro-batch is off by 2x).
noise_of() { grep -o '"noise_scale":[0-9.e+-]*' "$1" | cut -d: -f2 | tr '\n' ' '; }
a=$(noise_of "$tmp/np2/log.jsonl")
b=$(noise_of "$tmp/acc1/log.jsonl")
echo "    noise scale: np2 [$a] acc1 (one rank) [$b]"
check "np=1 with 2 micro-steps: the noise scale of np=2 within 1e-3" awk -v a="$a" -v b="$b" \
    'BEGIN { n = split(a, x, " "); m = split(b, y, " "); if (n != 2 || m != n) exit 1;
        for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d;
            if (!(x[i] > 0) || d > 1e-3 * x[i]) exit 1 } }'
check "np=1 with 2 micro-steps: eval lines show the noise scale" \
    grep -q '^step    10/20 | val_loss .* | noise scale [0-9]* tokens' "$tmp/acc1.out"

# Async (staleness 1). One process: deterministic, and the first step applies nothing.
for run in a b; do
    timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --sync async \
        --out "$tmp/async1$run" > "$tmp/async1$run.out" 2> "$tmp/async1$run.err"
    rc=$?
    check "np=1 async (run $run) exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -eq 0 ] || show "$tmp/async1$run.err"
done
check "np=1 async: the same losses twice" \
    compare_logs "$tmp/async1a/log.jsonl" "$tmp/async1b/log.jsonl" 0
check "np=1 async: step 1 applies no update" \
    grep -q '^step     1/20 | .* | no update (async warm-up)' "$tmp/async1a.out"
check "np=1 async: step 2 applies one" grep -q '^step     2/20 | .* | norm [0-9.]* |' \
    "$tmp/async1a.out"
# One process, async, 2 micro-steps: the noise scale from the micro-batches, its |G|^2
# the step's own gradient (applied a step later), every noise_every (10) steps.
run_ok async1acc timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 \
    --global_batch_size 8 --sync async --out "$tmp/async1acc"
check "np=1 async with 2 micro-steps: noise_scale at steps 10 and 20" test \
    "$(sed -n 's/^{"step":\([0-9]*\),.*"noise_scale":[0-9.]*.*/\1/p' "$tmp/async1acc/log.jsonl" | tr '\n' ' ')" = "10 20 "
# Weight prediction (async_predict, on by default): steps 1 and 2 run on the initial
# weights either way (no update has been made to repeat); from step 3 on the gradient is
# taken at the weights plus the last update, so the losses part from the plain run's.
timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --sync async --async_predict off \
    --out "$tmp/async1p" > "$tmp/async1p.out" 2> "$tmp/async1p.err"
rc=$?
check "np=1 async_predict off exits 0 (rc $rc)" test $rc -eq 0
[ $rc -eq 0 ] || show "$tmp/async1p.err"
check "async_predict: on by default, and said" \
    grep -q '^async: .*taken at predicted weights' "$tmp/async1a.out"
check "async_predict off: said" grep -q '^async: .*taken at current weights' \
    "$tmp/async1p.out"
for s in 1 2 3; do
    on=$(loss_of "$tmp/async1a/log.jsonl" $s); off=$(loss_of "$tmp/async1p/log.jsonl" $s)
    echo "    step $s: loss $on with async_predict on, $off off"
    if [ $s -lt 3 ]; then
        check "async_predict on/off: the same loss at step $s" test -n "$on" -a "$on" = "$off"
    else
        check "async_predict on/off: different losses at step 3" test -n "$on" -a "$on" != "$off"
    fi
done
# Two ranks.
run_np async2 2 --batch_size 4 --sync async --bucket_mb 0.01
check "np=2 async: parameters identical on all ranks at the end" \
    grep -q "parameters are identical on all 2 ranks" "$tmp/async2.out"
first=$(loss_of "$tmp/async2/log.jsonl" 1); last=$(loss_of "$tmp/async2/log.jsonl" 20)
sync_last=$(loss_of "$tmp/np2/log.jsonl" 20)
echo "    async np=2: loss $first at step 1, $last at step 20 (sync: $sync_last)"
check "np=2 async: the loss falls" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.05) }'
check "np=2 async: the losses differ from sync" \
    awk -v a="$last" -v b="$sync_last" 'BEGIN { exit !(a != b) }'
check "np=2 async: matches np=1 async within 1e-5" \
    compare_logs "$tmp/async1a/log.jsonl" "$tmp/async2/log.jsonl"

# fp16 gradients on the wire.
run_np fp16 2 --batch_size 4 --grad_comm fp16 --bucket_mb 0.01
check "np=2 fp16: parameters identical on all ranks at the end" \
    grep -q "parameters are identical on all 2 ranks" "$tmp/fp16.out"
check "np=2 fp16: losses within 1e-2 of fp32" \
    compare_logs "$tmp/np2/log.jsonl" "$tmp/fp16/log.jsonl" 1e-2

# Ranks with different configs: every rank names the mismatch, the job fails, no hang.
SMALL=(--data "$tmp/d.h5" --n_layer 1 --n_head 2 --n_embd 16 --block_size 8 --batch_size 2
       --steps 3 --threads 1 --out none --log "")
"${MPI[@]}" -np 1 "$GENTRAIN" train "${SMALL[@]}" --lr 1e-3 : \
    -np 1 "$GENTRAIN" train "${SMALL[@]}" --lr 2e-3 > "$tmp/mpmd.out" 2>&1
rc=$?
check "different configs: non-zero exit, no timeout (rc $rc)" test $rc -ne 0 -a $rc -ne 124
check "different configs: rank 1 names the differing line" \
    grep -q "gentrain: error: rank 1: the config differs between ranks: 'lr *= 0.002' here, 'lr *= 0.001' on rank 0" "$tmp/mpmd.out"
check "different configs: rank 0 reports it too" \
    grep -q "gentrain: error: rank 0: the config differs between ranks" "$tmp/mpmd.out"
check "different configs: no step trained" test "$(grep -c '^step ' "$tmp/mpmd.out")" -eq 0
[ $rc -ne 0 ] && [ $rc -ne 124 ] || show "$tmp/mpmd.out"

# Too few windows for batch_size x ranks: 100 tokens make 2 windows of 33; 2 x 2 needs 4.
"$MKDATA" "$tmp/tiny.h5" --dataset /train/tokens --dtype uint8 --rank 1 --len 100 \
    --vocab 256 > "$tmp/mkdata.txt" 2>&1 || fail "setup: mkdata tiny.h5"
"${MPI[@]}" -np 2 "$GENTRAIN" train --data "$tmp/tiny.h5" --val_dataset none --n_layer 1 \
    --n_head 2 --n_embd 16 --block_size 32 --batch_size 2 --steps 3 --threads 1 \
    --out none --log "" > "$tmp/small.out" 2>&1
rc=$?
check "dataset too small: non-zero exit, no timeout (rc $rc)" test $rc -ne 0 -a $rc -ne 124
for r in 0 1; do
    check "dataset too small: rank $r says so" \
        grep -q "gentrain: error: rank $r: .*tiny.h5:/train/tokens has 2 windows; batch_size x replicas = 2 x 2 = 4 sequences a step needs at least that many" "$tmp/small.out"
done
[ $rc -ne 0 ] && [ $rc -ne 124 ] || show "$tmp/small.out"

# An error one rank meets alone during the steps (rank 0 cannot write its log) ends the
# whole job (MPI_Abort): the other rank, waiting in the next reduction, must not hang.
if [ -w /dev/full ]; then
    "${MPI[@]}" -np 2 "$GENTRAIN" train "${SMALL[@]}" --steps 200 --log /dev/full \
        > "$tmp/full.out" 2>&1
    rc=$?
    check "error on one rank mid-run: non-zero exit, no timeout (rc $rc)" \
        test $rc -ne 0 -a $rc -ne 124
    check "error on one rank mid-run: rank 0 names it" \
        grep -q "gentrain: error: rank 0: writing the log file /dev/full failed" "$tmp/full.out"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || show "$tmp/full.out"
else
    echo "skip: no writable /dev/full for the mid-run error case"
fi

echo "$fails failed"
exit $((fails > 0))
