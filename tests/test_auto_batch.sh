#!/usr/bin/env bash
# global_batch_size = auto (src/train/train_batch.c, src/train/batch_rule.h) through `gentrain train`:
#  1. one process, the step overhead pinned (batch_overhead): the batch starts at
#     global_batch_min, grows in multiples of it within [min, max], the batches add up
#     to steps x global_batch_min sequences exactly (the last step cut to fit), every
#     log record carries global_batch_size, and the step line shows it; each step's lr
#     is the token schedule at the samples before it times AdaScale's gain from the
#     noise scale logged before it (1e-4 relative);
#  2. two ranks (batch_size 4 each) choose the same batch sequence as one process (4 x
#     2 micro-steps at the start) and log the same losses within 1e-4: with micro-batches
#     of one size the estimate and the decision do not depend on the split;
#  1b. the step overhead measured (not pinned): a run resumed from a checkpoint after
#     step 50, where the costs stop being measured, follows the unbroken run's batch
#     sequence and losses exactly;
#  3. kill -9 and resume under auto at np 2 (ckpt_every; GENTRAIN_TEST_STEP_MS keeps
#     the run alive until the kill): the same batch sequence and the same losses, bit
#     for bit, as the unbroken run; the np 2 checkpoint resumed on one process keeps
#     the global batch sequence (losses within 1e-4);
#  4. bad input, one error line each: auto with sync = async; global_batch_min not a
#     multiple of batch_size, or of one micro-batch on one rank; a word that is not auto; tp 2 on one replica (no noise
#     scale to steer by); a fixed-batch checkpoint resumed under auto.
# Every run is under a time limit, so a hang fails the test instead of blocking it.
#
# Environment: GENTRAIN, top_srcdir, MPIEXEC (parts 2 and 3 are skipped without it);
# Open MPI's run-as-root variables when run as root.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir auto_batch
prepare_slice

ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 32 --block_size 32 --steps 600
      --warmup_steps 5 --lr 3e-3 --eval_every 200 --eval_batches 2 --threads 1 --seed 11
      --global_batch_size auto --noise_every 5 --batch_overhead 300)

# batches LOG: the global_batch_size of every step, in order, on one line; a step
# logged twice (a killed run and its resume append to one log) counts as its last.
batches() {
    sed -n 's/^{"step":\([0-9]*\),.*"global_batch_size":\([0-9]*\),.*/\1 \2/p' "$1" |
        awk '{ b[$1] = $2; if ($1 > n) n = $1 } END { for (s = 1; s <= n; s++) printf "%s ", b[s] }'
}
# losses LOG: "step loss" per step as logged (text), the last of a step logged twice.
losses() {
    sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$1" |
        awk '{ l[$1] = $2; if ($1 > n) n = $1 } END { for (s = 1; s <= n; s++) print s, l[s] }'
}

# ---- 1. one process
run_ok np1 timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --out "$tmp/np1"
seq1=$(batches "$tmp/np1/log.jsonl")
echo "    batch sequence: $(echo $seq1 | tr ' ' '\n' | uniq -c | awk '{printf "%sx%s ", $1, $2}')"
check "np1: says auto and its limits" \
    grep -q '^global batch: auto, 8 to 128 sequences in steps of 8' "$tmp/np1.out"
check "np1: starts at global_batch_min 8, changes at least twice, multiples of 8 up to 128" \
    awk -v s="$seq1" 'BEGIN { n = split(s, b, " "); if (b[1] != 8) exit 1;
        for (i = 1; i <= n; i++) { if (b[i] % 8 || b[i] > 128) exit 1;
            if (i > 1 && b[i] != b[i-1]) ch++ } exit !(ch >= 2) }'
check "np1: the batches add up to steps x global_batch_min = 4800 sequences" \
    awk -v s="$seq1" 'BEGIN { n = split(s, b, " "); for (i = 1; i <= n; i++) t += b[i];
        exit !(t == 4800) }'
check "np1: step lines show the batch" grep -q '^step .*| lr [0-9.e+-]* | batch [0-9]* |' \
    "$tmp/np1.out"

# ---- 1b. the step overhead measured: kept from step 50, so a run resumed from a later
# checkpoint decides on the unbroken run's costs (its own times would differ)
run_ok measured timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --batch_overhead 0 \
    --ckpt_every 60 --keep_ckpts 20 --out "$tmp/measured"
check "measured: the run says how it takes the step overhead" \
    grep -q 'step overhead measured over the first 50 steps, then kept$' "$tmp/measured.out"
run_ok remeasured timeout 120 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --batch_overhead 0 \
    --ckpt_every 60 --out "$tmp/remeasured" \
    --resume "$tmp/measured/checkpoints/ckpt_00000060.h5"
seqm=$(batches "$tmp/measured/log.jsonl")
echo "    measured overhead, batch sequence: $(echo $seqm | tr ' ' '\n' | uniq -c | awk '{printf "%sx%s ", $1, $2}')"
check "measured, resumed at step 60: the batch sequence of the unbroken run" \
    test "$(batches "$tmp/remeasured/log.jsonl" | cut -d' ' -f61-)" = "$(echo "$seqm" | cut -d' ' -f61-)"
overheads() { sed -n 's/^{"step":\([0-9]*\),.*"step_overhead":\([^,}]*\).*/\1 \2/p' "$1"; }
check "measured: the overhead is logged where the batch is decided, and is kept from step 50" \
    awk '$1 > 50 { if (v != "" && $2 != v) exit 1; v = $2; n++ } END { exit !(n > 5) }' \
    <(overheads "$tmp/measured/log.jsonl")
check "measured, resumed at step 60: the step overheads of the unbroken run" \
    test "$(overheads "$tmp/remeasured/log.jsonl" | awk '$1 > 60')" = \
    "$(overheads "$tmp/measured/log.jsonl" | awk '$1 > 60')"
check "measured, resumed at step 60: the losses of the unbroken run, as logged" \
    test "$(losses "$tmp/remeasured/log.jsonl" | awk '$1 > 60')" = \
    "$(losses "$tmp/measured/log.jsonl" | awk '$1 > 60')"
# The lr of each step: the cosine schedule at u = samples before / 8 (warmup 5, total
# 600, lr 3e-3, min_lr 1e-4) times AdaScale's gain (1 + N/8) / (1 + N/b) with
# N the noise scale logged last, up to this step's own (a step that estimates it steps
# with it, as AdaScale does), in sequences (tokens / 32; logged to 0.1 token: 1e-3).
check "np1: lr = schedule in tokens x AdaScale gain at every step (1e-3)" awk '
    function val(line, key,   s) {
        if (!match(line, "\"" key "\":[-+0-9.eE]+")) return ""
        s = substr(line, RSTART, RLENGTH); sub(/^[^:]*:/, "", s); return s + 0 }
    { b = val($0, "global_batch_size"); lr = val($0, "lr"); u = seen / 8
      n = val($0, "noise_scale"); if (n != "") noise = n / 32
      if (u < 5) base = 3e-3 * (u + 1) / 5
      else if (u >= 599) base = 1e-4
      else base = 1e-4 + 0.5 * (1 + cos(3.141592653589793 * (u - 5) / 594)) * 2.9e-3
      g = (noise > 0) ? (1 + noise / 8) / (1 + noise / b) : 1
      want = base * g; d = lr - want; if (d < 0) d = -d
      if (d > 1e-3 * want) { print "    step " val($0, "step") ": lr " lr ", expected " want; bad = 1 }
      seen += b }
    END { exit bad }' "$tmp/np1/log.jsonl"

# ---- 2. and 3.: MPI
if [ -n "${MPIEXEC:-}" ]; then
    MPI=(timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2)
    run_ok np2 "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --out "$tmp/np2"
    seq2=$(batches "$tmp/np2/log.jsonl")
    check "np2: the batch sequence of one process" test "$seq1" = "$seq2"
    check "np2: the losses of one process within 1e-4" \
        compare_logs "$tmp/np1/log.jsonl" "$tmp/np2/log.jsonl" 1e-4 "$(echo $seq1 | wc -w)"

    # 3. Killed with SIGKILL once the step-260 checkpoint exists (the batch grew at
    # step 250), resumed: the batches and losses of np2, to the last bit of the text.
    CK=checkpoints/ckpt_00000260.h5
    KARGS=(--batch_size 4 --ckpt_every 10 --keep_ckpts 50)
    GENTRAIN_TEST_STEP_MS=30 setsid "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" "${KARGS[@]}" \
        --out "$tmp/k" > "$tmp/k.out" 2>&1 &
    pid=$!
    for ((i = 0; i < 6000; i++)); do
        [ -f "$tmp/k/$CK" ] && break
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.01
    done
    # the ranks stay in the session setsid started: kill the session, wait until gone
    pkill -KILL -s "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
    for ((i = 0; i < 200; i++)); do
        pgrep -s "$pid" > /dev/null 2>&1 || break
        sleep 0.05
    done
    check "kill: SIGKILL after the step-260 checkpoint, before the end" \
        test -f "$tmp/k/$CK" -a ! -f "$tmp/k/model.h5"
    cp -r "$tmp/k" "$tmp/e" # for the elastic resume below, from the same checkpoint
    run_ok resumed "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" "${KARGS[@]}" --out "$tmp/k" \
        --resume auto
    check "kill: the resume says which checkpoint" grep -q '^resume: from .*ckpt_000002[0-9]0.h5: sample' \
        "$tmp/resumed.out"
    check "kill + resume: the batch sequence of the unbroken run" \
        test "$(batches "$tmp/k/log.jsonl")" = "$seq2"
    check "kill + resume: the losses of the unbroken run, as logged" \
        test "$(losses "$tmp/k/log.jsonl")" = "$(losses "$tmp/np2/log.jsonl")"
    # Elastic: the np 2 checkpoint of step 260 on one process (4 x 2 micro-steps and
    # more): the same global batch sequence, the losses within 1e-4.
    run_ok elastic timeout 120 "$GENTRAIN" train "${ARGS[@]}" "${KARGS[@]}" --out "$tmp/e" \
        --resume "$tmp/e/$CK"
    check "np2 -> np1: the global batch sequence kept" \
        test "$(batches "$tmp/e/log.jsonl")" = "$seq2"
    check "np2 -> np1: the losses of the unbroken run within 1e-4" awk '
        FNR == NR { a[$1] = $2; next }
        { d = a[$1] - $2; if (d < 0) d = -d; if (!($1 in a) || d > 1e-4 * a[$1]) bad = 1; n++ }
        END { exit bad || n < 200 }' <(losses "$tmp/np2/log.jsonl") <(losses "$tmp/e/log.jsonl")
    # tp 2 on one replica has no estimate to steer by: refused before any step
    "${MPI[@]}" "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 --tp 2 --out none --log "" \
        > "$tmp/tp2.out" 2>&1
    rc=$?
    check "tp2 on one replica: refused (rc $rc), one error line, no step" test $rc -ne 0 -a \
        $rc -ne 124 -a "$(grep -c 'gentrain: error: .*auto needs the gradient noise scale, which this run cannot estimate (tp or pp > 1 on one replica)' "$tmp/tp2.out")" -eq 1 -a \
        "$(grep -c '^step ' "$tmp/tp2.out")" -eq 0
else
    echo "skip: parts 2 and 3 (no mpirun)"
fi

# ---- 4. bad input
refused() { # NAME PATTERN ARGS...: non-zero exit, no step, one error line matching
    local name=$1 pattern=$2 rc
    shift 2
    timeout 60 "$GENTRAIN" train "${ARGS[@]}" --out none --log "" "$@" > "$tmp/$name.out" 2>&1
    rc=$?
    check "$name: refused (rc $rc)" test $rc -ne 0 -a $rc -ne 124
    check "$name: one error line saying why" \
        test "$(grep -c "gentrain: error: .*$pattern" "$tmp/$name.out")" -eq 1
    check "$name: no step trained" test "$(grep -c '^step ' "$tmp/$name.out")" -eq 0
}
refused async "global_batch_size = auto needs sync = sync" --batch_size 4 --sync async
refused badmin "global_batch_min 6 is not a multiple of batch_size 4" --batch_size 4 \
    --global_batch_min 6
refused word "global_batch_size = 'automatic': not an integer or auto" --batch_size 4 \
    --global_batch_size automatic
refused onemicro "global_batch_min 4 is one micro-batch of batch_size 4; the noise scale needs two" \
    --batch_size 4 --global_batch_min 4
# a checkpoint of a fixed global batch, resumed under auto
FIXED=(--data "$tmp/d.h5" --n_layer 2 --n_head 2 --n_embd 32 --block_size 32 --batch_size 4
       --warmup_steps 2 --eval_every 0 --threads 1 --out "$tmp/fixed")
run_ok fixed timeout 60 "$GENTRAIN" train "${FIXED[@]}" --global_batch_size 8 --steps 10 \
    --ckpt_every 5
timeout 60 "$GENTRAIN" train "${FIXED[@]}" --global_batch_size auto --steps 20 \
    --resume auto > "$tmp/fixed2auto.out" 2>&1
rc=$?
check "fixed -> auto resume: refused (rc $rc), one line naming the key, no step" test \
    $rc -ne 0 -a $rc -ne 124 -a "$(grep -c 'gentrain: error: cannot resume from .*global_batch_size = 8 in the checkpoint, auto now' "$tmp/fixed2auto.out")" -eq 1 -a \
    "$(grep -c '^step ' "$tmp/fixed2auto.out")" -eq 0

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
