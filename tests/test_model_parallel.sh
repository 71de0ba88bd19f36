#!/usr/bin/env bash
# Model parallelism through `gentrain train` under mpirun, on a slice of the corpus:
#  - tp = 2 (2 ranks holding one model between them), dp 2 x tp 2 (4 ranks,
#    oversubscribed, batch_size 4 per replica), tp = 4, pp = 2 (two stages, 4
#    micro-batches, 1F1B), pp 2 x tp 2 and dp 2 x pp 2 train like one process with the
#    whole batch of 8: per-step losses and val_losses within 1e-4 relative over 10
#    steps, the saved model (put together from the parts) within 1e-5 per tensor;
#    each part is identical in every replica (gentrain checks and says so); so do pp 2
#    and dp 2 x pp 2 accumulating gradients over 2 micro-steps of whole pipeline
#    schedules (global_batch_size); dp 2 x tp 2 and dp 2 x pp 2 estimate the gradient
#    noise scale of dp 2 (each replica's norm put together from its parts);
#  - checkpoints of a tp = 2 run hold the whole model; resuming one re-shards it: on
#    tp = 2 the run ends bit for bit like the straight one, on tp = 1, tp = 4 and pp = 2
#    within 1e-5; on 2 replicas x tp 2 of batch_size 4 (the same global batch of 8)
#    within 1e-5, and of batch_size 8 it is refused, naming the global batch;
#  - grids that cannot work stop before any step with a clear line: tp not dividing
#    n_head, tp x pp not dividing the number of ranks, pp > n_layer, micro_batches not
#    dividing batch_size, pp with sync = async.
# Every mpirun runs under `timeout`, so a hang fails the test instead of blocking it.
#
# Environment: GENTRAIN, CMPMODEL (tests/cmpmodel), MPIEXEC (skipped without),
# top_srcdir; Open MPI's run-as-root variables when run as root (Makefile.am sets them).
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
require_mpiexec
test_tmpdir model_parallel

MPI=(timeout 120 "$MPIEXEC" --oversubscribe --bind-to none)
PTOL=1e-5 # final parameters, norm-wise per tensor (tests/cmpmodel); measured ~5e-6

prepare_slice

# 4 heads, so tp = 2 and tp = 4 both divide them.
ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 4 --n_embd 32 --block_size 32 --steps 10
      --warmup_steps 3 --lr 3e-3 --eval_every 5 --eval_batches 2 --threads 1 --seed 11)

# The reference: one process with the whole batch.
run_ok ref timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --out "$tmp/ref"

# grid NAME NP B TP PP: trains on NP ranks with batch_size B, tp TP and pp PP (4
# micro-batches when PP > 1), then compares with the reference.
grid() {
    local name=$1 np=$2 b=$3 tp=$4 pp=$5 rc dp=$(($2 / $4 / $5))
    run_ok "$name" "${MPI[@]}" -np "$np" "$GENTRAIN" train "${ARGS[@]}" --batch_size "$b" \
        --tp "$tp" --pp "$pp" --micro_batches $((pp > 1 ? 4 : 0)) --out "$tmp/$name"
    check "$name: says the grid" \
        grep -q "^grid: $dp replicas\? (data parallel) x pp $pp .* x tp $tp" "$tmp/$name.out"
    check "$name: every part identical in its replicas" grep -q \
        "^check: each of the $((tp * pp)) parts (pp x tp) is identical in all $dp replicas" \
        "$tmp/$name.out"
    check "$name: losses and val_losses match one process within 1e-4" \
        compare_logs "$tmp/ref/log.jsonl" "$tmp/$name/log.jsonl" 1e-4 10
    "$CMPMODEL" "$tmp/ref/model.h5" "$tmp/$name/model.h5" "$PTOL" > "$tmp/$name.cmp" 2>&1
    rc=$?
    sed -e 's/^/    /' "$tmp/$name.cmp"
    check "$name: saved whole model matches one process (tolerance $PTOL)" test $rc -eq 0
}
grid tp2 2 8 2 1
grid dp2tp2 4 4 2 1
grid tp4 4 8 4 1
grid pp2 2 8 1 2
grid pp2tp2 4 8 2 2
grid dp2pp2 4 4 1 2

# The gradient noise scale from each replica's own gradient, put together from its
# parts with tp or pp > 1: dp 2 x tp 2 and dp 2 x pp 2 log the noise scale of plain
# dp 2 with the same per-replica batch (the same gradients), within 1e-2 relative.
run_ok dp2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --out "$tmp/dp2"
noise_of() { grep -o '"noise_scale":[0-9.e+-]*' "$1" | cut -d: -f2 | tr '\n' ' '; }
for name in dp2tp2 dp2pp2; do
    a=$(noise_of "$tmp/dp2/log.jsonl")
    b=$(noise_of "$tmp/$name/log.jsonl")
    echo "    noise scale: dp2 [$a] $name [$b]"
    check "$name: the noise scale of dp 2 (per-replica norms from the parts)" awk \
        -v a="$a" -v b="$b" 'BEGIN { n = split(a, x, " "); m = split(b, y, " ");
            if (n != 2 || m != n) exit 1;
            for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d;
                if (d > 1e-2 * x[i]) exit 1 } }'
done

# Gradient accumulation over whole pipeline schedules: global_batch_size 8 from
# micro-steps of batch_size 4 (pp 2) and of 2 (dp 2 x pp 2), each micro-step a 1F1B
# schedule of 2 micro-batches, trains like one process with the batch of 8.
accum_grid() {
    local name=$1 np=$2 b=$3 rc
    run_ok "$name" "${MPI[@]}" -np "$np" "$GENTRAIN" train "${ARGS[@]}" --batch_size "$b" \
        --global_batch_size 8 --pp 2 --micro_batches 2 --out "$tmp/$name"
    check "$name: says it accumulates" grep -q "x $((8 / b / (np / 2))) micro-steps (gradients accumulated)" \
        "$tmp/$name.out"
    check "$name: losses and val_losses match one process within 1e-4" \
        compare_logs "$tmp/ref/log.jsonl" "$tmp/$name/log.jsonl" 1e-4 10
    "$CMPMODEL" "$tmp/ref/model.h5" "$tmp/$name/model.h5" "$PTOL" > "$tmp/$name.cmp" 2>&1
    rc=$?
    check "$name: saved whole model matches one process (tolerance $PTOL)" test $rc -eq 0
}
accum_grid pp2acc 2 4
accum_grid dp2pp2acc 4 2

# refused MPIRUN_ARGS... WANT: a non-zero exit before any step; every error line (each
# rank that found the problem says it: a config error is every rank's) contains WANT.
refused() {
    local want=${!#} n=$(($# - 1)) rc
    "${MPI[@]}" "${@:1:$n}" > "$tmp/bad.out" 2>&1
    rc=$?
    check "refused ($want): non-zero exit, no timeout (rc $rc)" test $rc -ne 0 -a $rc -ne 124
    check "  error lines (one per rank at most) all saying so" test \
        "$(grep -c "gentrain: error: .*$want" "$tmp/bad.out")" -ge 1 -a \
        "$(grep -c "gentrain: error: .*$want" "$tmp/bad.out")" -eq \
        "$(grep -c "gentrain: error" "$tmp/bad.out")"
    check "  no step trained" test "$(grep -c '^step ' "$tmp/bad.out")" -eq 0
}
SMALL=("$GENTRAIN" train "${ARGS[@]}" --batch_size 2 --out none --log "")
refused -np 2 "${SMALL[@]}" --tp 3 "tp = 3 does not divide n_head = 4"
refused -np 3 "${SMALL[@]}" --tp 2 "tp x pp = 2 x 1 = 2 does not divide the 3 ranks"
refused -np 2 "${SMALL[@]}" --pp 2 --tp 2 "tp x pp = 2 x 2 = 4 does not divide the 2 ranks"
refused -np 1 "${SMALL[@]}" --pp 3 "pp = 3 is larger than n_layer = 2"
refused -np 2 "${SMALL[@]}" --pp 2 --micro_batches 3 "micro_batches = 3 does not divide batch_size = 2"
refused -np 2 "${SMALL[@]}" --pp 2 --sync async "pp = 2 with sync = async is not supported"

# Checkpoints of a tp run hold the whole model (shards and AdamW moments put together),
# so they resume on any tp (and any replicas that keep the global batch): tp = 2 from
# its own step-5 checkpoint ends bit for bit like the straight run; tp = 1 (one
# process) and tp = 4 from the same file end within PTOL of it (a different split
# rounds differently).
CK5=checkpoints/ckpt_00000005.h5
run_ok ck "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --tp 2 \
    --ckpt_every 5 --out "$tmp/ck"
check "tp checkpoint: written at step 5 and 10" test -f "$tmp/ck/$CK5" -a \
    -f "$tmp/ck/checkpoints/ckpt_00000010.h5"
"$GENTRAIN" inspect "$tmp/ck/$CK5" > "$tmp/ck.inspect" 2>&1
check "tp checkpoint: holds whole tensors (c_attn.weight [96, 32], not a shard)" \
    grep -q "^/model/transformer.h.0.attn.c_attn.weight .* \[96, 32\]" "$tmp/ck.inspect"
for to in tp2 tp1 tp4 pp2; do
    k=${to#??}
    np=$k
    mkdir -p "$tmp/re$to/checkpoints"
    cp "$tmp/ck/$CK5" "$tmp/re$to/checkpoints/"
    run_ok re$to "${MPI[@]}" -np $np "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 \
        --${to%?} $k --ckpt_every 5 --resume auto --out "$tmp/re$to"
    check "tp 2 -> $to: resumed at step 5" grep -q "resuming from .*ckpt_00000005.h5 at step 5" \
        "$tmp/re$to.out"
    tol=$PTOL
    [ $to = tp2 ] && tol=0
    "$CMPMODEL" "$tmp/ck/model.h5" "$tmp/re$to/model.h5" $tol > "$tmp/re$to.cmp" 2>&1
    rc=$?
    sed -e 's/^/    /' "$tmp/re$to.cmp"
    check "tp 2 -> $to: ends like the straight tp 2 run (tolerance $tol)" test $rc -eq 0
done
# Another number of replicas keeps the global batch of 8 (ckpt.h): 2 replicas x tp 2
# of batch_size 4 resume within PTOL; of batch_size 8 (16 a micro-step) are refused.
mkdir -p "$tmp/redp2/checkpoints"
cp "$tmp/ck/$CK5" "$tmp/redp2/checkpoints/"
run_ok redp2 "${MPI[@]}" -np 4 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --tp 2 \
    --ckpt_every 5 --resume auto --out "$tmp/redp2"
check "1 replica x tp 2 -> 2 replicas x tp 2: keeps the global batch" grep -q \
    "^resume: global batch of 8 sequences per step kept (the checkpoint's run had 1 replica): batch_size 4 x 2 replicas x 1 micro-step" \
    "$tmp/redp2.out"
"$CMPMODEL" "$tmp/ck/model.h5" "$tmp/redp2/model.h5" "$PTOL" > "$tmp/redp2.cmp" 2>&1
rc=$?
sed -e 's/^/    /' "$tmp/redp2.cmp"
check "1 replica x tp 2 -> 2 replicas x tp 2: ends like the straight run (tolerance $PTOL)" \
    test $rc -eq 0
# (a folder of its own: retp2's newer checkpoints would be refused first)
refused -np 4 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 --tp 2 --out "$tmp/rebatch" \
    --resume "$tmp/ck/$CK5" \
    "global batch of 8 sequences per step is not a whole number of micro-steps of batch_size 8 x 2 replicas = 16"

[ "$fails" -eq 0 ] && echo "all model-parallel checks passed"
exit $((fails > 0))
