#!/usr/bin/env bash
# The trainer's GPU paths (offload = all and blocks: src/train/train.c, src/engine/device_step.c,
# src/engine/gpu_stage.c, src/engine/lossscale.c) driven on the CPU through tests/gentrain_fakegpu, gentrain linked
# with the test double tests/fake_gpu.c (one "GPU" that computes with FP16-rounded
# weights and returns FP16 gradients x the loss scale; GENTRAIN_FAKE_GPU_OVERFLOW makes
# chosen steps overflow). On a slice of the shipped corpus, a tiny model:
#  1. offload = all: one `offload:` line saying every layer is on the GPU; step lines
#     and log lines carry the loss scale (65536, nothing skipped); losses and
#     val_losses within 1e-2 relative of the same run with offload = none, the final
#     val_loss within 2%.
#  2. An overflow at step 3: that step is skipped (line and log say so, no grad_norm),
#     the scale halves to 32768 and stays there, the run finishes. With a constant lr,
#     a 3-step run whose step 3 overflows ends with exactly the parameters of a 2-step
#     run, and its checkpoints after steps 2 and 3 hold the same parameters and AdamW
#     state (h5diff, where installed).
#  3. global_batch_size = 2 x batch_size (2 micro-batches on the "GPU", their gradients
#     summed there): losses within 1e-2 of offload = none; an overflow in the first
#     micro-batch of a step skips that step.
#  4. 2 ranks, an overflow on rank 1 only at step 2: every rank skips step 2, the run
#     ends with the parameters identical on both ranks.
#  5. The loss scale survives a checkpoint: a run resumed from the step-3 checkpoint of
#     a run that overflowed at step 2 continues at scale 32768, and ends like the
#     straight run (same losses, same parameters).
#  6. sync = async trains on the "GPU": an overflow in step 2's gradient halves the
#     scale at step 2 and skips the update of step 3, the one that applies that
#     gradient.
#  7. offload = blocks (every layer on the "GPU" through src/engine/gpu_stage.c, the
#     schedule of one stage): one `offload:` line saying so; the run of part 1 with
#     losses and val_losses within 1e-2 relative of offload = none and of offload =
#     all, and the parameters of offload = all's run bit for bit; the accumulation of
#     part 3 within 1e-2 of offload = none; an overflow of a block's gradient at step 3
#     skips that step and halves the scale; an overflow in the embedding's gradient
#     (GENTRAIN_FAKE_GPU_OVERFLOW_AT=dx0: wpe's) does the same, and a 3-step run whose
#     step 3 overflows so ends with the parameters of a 2-step run, bit for bit.
#  8. Pipeline stages on the "GPUs" (src/engine/gpu_stage.c, every layer of a stage on
#     its GPU, the first's embedding and the last's head and loss too):
#     gpu_pipeline_grids (tests/lib.sh: pp 2, dp 2 x pp 2 and pp 2 with accumulation
#     against the CPU's pp 2 within 1e-3, and a pp 2 checkpoint resumed on one GPU); an
#     overflow on the last stage's rank alone skips the step on both.
#  9. Tensor-parallel shards on the "GPUs" (src/engine/gpu_stage.c with tp > 1, the
#     vocabulary-parallel embedding and head on the "GPUs" too): gpu_tp_grids
#     (tests/lib.sh: tp 2, dp 2 x tp 2, tp 2 x pp 2 against the CPU at the same grid
#     within 1e-3, a tp 2 checkpoint resumed on one GPU), the all-reduces through host
#     memory (the double has no NCCL); offload = blocks says so without the placement
#     note and offload = required trains tp 2 on the "GPUs"; an overflow on tp rank 1
#     alone skips the step on both.
# Every run is under `timeout`, so a hang fails the test instead of blocking it.
#
# Environment: GENTRAIN, GENTRAIN_FAKEGPU (tests/gentrain_fakegpu), CMPMODEL
# (tests/cmpmodel), top_srcdir, MPIEXEC (parts 4 and 6's 2-rank cases are skipped
# without it); Open MPI's run-as-root variables when run as root (Makefile.am sets them).
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${GENTRAIN_FAKEGPU:?GENTRAIN_FAKEGPU must point at tests/gentrain_fakegpu}"
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"

. "$top_srcdir/tests/lib.sh"
test_tmpdir offload_fake

prepare_slice

FAKE=(timeout 120 "$GENTRAIN_FAKEGPU" train)
tiny_gpt_args
ARGS=("${TINY[@]}")
unset GENTRAIN_FAKE_GPU_OVERFLOW GENTRAIN_FAKE_GPU_OVERFLOW_RANK

# field LOG STEP KEY: the value of KEY in the log line of STEP ("" when absent).
field() {
    sed -n "s/^{\"step\":$2,.*\"$3\":\([^,}]*\).*/\1/p" "$1"
}
# step_line OUT STEP: the step line (not the val_loss one) of STEP in a run's output.
step_line() { grep "^step *$2/[0-9]* | loss " "$1"; }

# ------------------------------------------------------------- 1. offload = all
run_ok gpu "${FAKE[@]}" "${ARGS[@]}" --steps 10 --warmup_steps 2 --lr 3e-3 --eval_every 5 \
    --out "$tmp/gpu"
run_ok cpu "${FAKE[@]}" "${ARGS[@]}" --steps 10 --warmup_steps 2 --lr 3e-3 --eval_every 5 \
    --out "$tmp/cpu" --offload none
n=$(grep -c '^offload:' "$tmp/gpu.out")
check "all: one offload line ($n), every layer on the (fake) GPU" test "$n" -eq 1 -a \
    "$(grep -c '^offload: every layer on the GPU (rank 0: GPU 0 of 1 on its node, fake GPU' \
       "$tmp/gpu.out")" -eq 1
n=$(grep -c '^step .*| loss .* | scale 65536$' "$tmp/gpu.out")
check "all: every step line ends with | scale 65536 ($n of 10)" test "$n" -eq 10
n=$(grep -c '"loss_scale":65536.0,"skipped":false,' "$tmp/gpu/log.jsonl")
check "all: every log line has loss_scale 65536 and skipped false ($n of 10)" test "$n" -eq 10
check "offload = none: no offload line, no scale on the step lines or in the log" \
    test "$(cat "$tmp/cpu.out" "$tmp/cpu/log.jsonl" | grep -c '^offload:\| scale \|loss_scale')" -eq 0
check "all: losses and val_losses within 1e-2 relative of offload = none" \
    compare_logs "$tmp/cpu/log.jsonl" "$tmp/gpu/log.jsonl" 1e-2 10
check_final_val "all, against offload = none" "$tmp/gpu.out" "$tmp/cpu.out"

# ------------------------------------------------------------- 2. an overflow
GENTRAIN_FAKE_GPU_OVERFLOW=3 run_ok ovf5 "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 5 \
    --out "$tmp/ovf5"
line=$(step_line "$tmp/ovf5.out" 3)
echo "    $line"
check "overflow at 3: step 3 says FP16 overflow: step skipped" \
    grep -q '| FP16 overflow: step skipped |' <<< "$line"
check "overflow at 3: step 3 says scale 65536 -> 32768" grep -q '| scale 65536 -> 32768$' <<< "$line"
check "overflow at 3: steps 1, 2 at 65536 with a norm" test "$(grep -c \
    '^step *[12]/5 | loss .* | norm [0-9.]* | .* | scale 65536$' "$tmp/ovf5.out")" -eq 2
check "overflow at 3: steps 4, 5 at 32768 with a norm" test "$(grep -c \
    '^step *[45]/5 | loss .* | norm [0-9.]* | .* | scale 32768$' "$tmp/ovf5.out")" -eq 2
s=$(field "$tmp/ovf5/log.jsonl" 3 skipped) g=$(field "$tmp/ovf5/log.jsonl" 3 grad_norm)
check "overflow at 3: log step 3 skipped ${s:-?}, grad_norm ${g:-?}" \
    test "$s" = true -a "$g" = null
check "overflow at 3: the other log lines are not skipped" \
    test "$(grep -c '"skipped":false' "$tmp/ovf5/log.jsonl")" -eq 4
s=$(field "$tmp/ovf5/log.jsonl" 4 loss_scale)
check "overflow at 3: log step 4 loss_scale ${s:-?}" test "$s" = 32768.0
check "overflow at 3: the run finishes" grep -q '^done: 5 steps' "$tmp/ovf5.out"

# The skipped step leaves the parameters and AdamW alone: a 3-step run whose last step
# overflows ends where a 2-step run does, bit for bit.
GENTRAIN_FAKE_GPU_OVERFLOW=3 run_ok ovf3 "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 3 \
    --ckpt_every 1 --out "$tmp/ovf3"
run_ok two "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 2 --out "$tmp/two"
"$CMPMODEL" "$tmp/ovf3/model.h5" "$tmp/two/model.h5" 0 > "$tmp/skip.cmp" 2>&1
rc=$?
sed -e 's/^/    /' "$tmp/skip.cmp"
check "overflow at 3 of 3: the parameters of the 2-step run, bit for bit" test $rc -eq 0
CK=$tmp/ovf3/checkpoints
if command -v h5diff > /dev/null 2>&1 && command -v h5dump > /dev/null 2>&1; then
    for grp in /model /optim; do
        h5diff -q "$CK/ckpt_00000002.h5" "$CK/ckpt_00000003.h5" $grp $grp > "$tmp/h5diff.txt" 2>&1
        rc=$?
        check "overflow at 3 of 3: checkpoints 2 and 3 hold the same $grp (h5diff rc $rc)" \
            test $rc -eq 0
    done
    t2=$(h5dump -a /adam_t "$CK/ckpt_00000002.h5" 2> /dev/null | sed -n 's/.*(0): //p')
    t3=$(h5dump -a /adam_t "$CK/ckpt_00000003.h5" 2> /dev/null | sed -n 's/.*(0): //p')
    check "overflow at 3 of 3: AdamW's t stays ${t2:-?} -> ${t3:-?}" test "${t2:-x}" = 2 -a "${t3:-y}" = 2
else
    echo "skip: checkpoint contents (no h5diff/h5dump)"
fi

# ------------------------------------------------------------- 3. accumulation
run_ok acc_gpu "${FAKE[@]}" "${ARGS[@]}" --steps 6 --warmup_steps 2 --lr 3e-3 \
    --eval_every 3 --global_batch_size 8 --out "$tmp/acc_gpu"
run_ok acc_cpu "${FAKE[@]}" "${ARGS[@]}" --steps 6 --warmup_steps 2 --lr 3e-3 \
    --eval_every 3 --global_batch_size 8 --out "$tmp/acc_cpu" --offload none
check "accumulation: 2 micro-steps on the GPU" grep -q \
    '^global batch: 8 sequences = batch_size 4 x 1 rank x 2 micro-steps' "$tmp/acc_gpu.out"
check "accumulation: losses within 1e-2 relative of offload = none" \
    compare_logs "$tmp/acc_cpu/log.jsonl" "$tmp/acc_gpu/log.jsonl" 1e-2 6
# The micro-batches' gradients add up on the "GPU" and come down once: an overflow in
# the first micro-batch of step 2 (training call 3) reaches the host with the sum.
GENTRAIN_FAKE_GPU_OVERFLOW=3 run_ok acc_ovf "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 3 \
    --global_batch_size 8 --out "$tmp/acc_ovf"
line=$(step_line "$tmp/acc_ovf.out" 2)
echo "    $line"
check "accumulation, overflow in step 2's first micro-batch: step 2 skipped, scale halved" \
    grep -q '| FP16 overflow: step skipped | .*scale 65536 -> 32768$' <<< "$line"
check "accumulation, overflow in step 2's first micro-batch: steps 1 and 3 not skipped" \
    test "$(grep -c '"skipped":false' "$tmp/acc_ovf/log.jsonl")" -eq 2

# ------------------------------------------------------------- 5. resume keeps the scale
GENTRAIN_FAKE_GPU_OVERFLOW=2 run_ok straight "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" \
    --steps 5 --ckpt_every 3 --out "$tmp/straight"
check "resume: the straight run halved its scale at step 2" \
    grep -q '^step *2/5 | .* | scale 65536 -> 32768$' "$tmp/straight.out"
run_ok resumed "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 5 --ckpt_every 3 \
    --out "$tmp/resumed" --resume "$tmp/straight/checkpoints/ckpt_00000003.h5"
check "resume: starts at step 3" grep -q '^resuming from .*ckpt_00000003.h5 at step 3' \
    "$tmp/resumed.out"
line=$(grep -m1 '^step .* | loss ' "$tmp/resumed.out")
echo "    $line"
check "resume: the first step after resuming (4) runs at scale 32768" \
    grep -q '^step *4/5 | .* | scale 32768$' <<< "$line"
check_resumed "$tmp/straight" "$tmp/resumed"

# ------------------------------------------------------------- 7. offload = blocks
run_ok blk "${FAKE[@]}" "${ARGS[@]}" --steps 10 --warmup_steps 2 --lr 3e-3 --eval_every 5 \
    --out "$tmp/blk" --offload blocks
n=$(grep -c '^offload:' "$tmp/blk.out")
want='^offload: every layer on the GPU as one pipeline stage (rank 0: GPU 0 of 1 on its node, '
want+='fake GPU.*): FP16 weights and activations, '
check "blocks: one offload line ($n): every layer on the GPU, as one pipeline stage" \
    test "$n" -eq 1 -a "$(grep -c "$want" "$tmp/blk.out")" -eq 1
n=$(grep -c '^step .*| loss .* | scale 65536$' "$tmp/blk.out")
check "blocks: every step line ends with | scale 65536 ($n of 10)" test "$n" -eq 10
check "blocks: losses and val_losses within 1e-2 relative of offload = none" \
    compare_logs "$tmp/cpu/log.jsonl" "$tmp/blk/log.jsonl" 1e-2 10
check "blocks: losses and val_losses within 1e-2 relative of offload = all" \
    compare_logs "$tmp/gpu/log.jsonl" "$tmp/blk/log.jsonl" 1e-2 10
# The stage engine runs the same layers on the "GPU" as offload = all's one step, the
# embedding and the head included: the same parameters at the end, bit for bit.
"$CMPMODEL" "$tmp/gpu/model.h5" "$tmp/blk/model.h5" 0 > "$tmp/blk_all.cmp" 2>&1
rc=$?
sed -e 's/^/    /' "$tmp/blk_all.cmp"
check "blocks: the parameters of offload = all, bit for bit" test $rc -eq 0
run_ok blk_acc "${FAKE[@]}" "${ARGS[@]}" --steps 6 --warmup_steps 2 --lr 3e-3 \
    --eval_every 3 --global_batch_size 8 --out "$tmp/blk_acc" --offload blocks
check "blocks, accumulation: losses within 1e-2 relative of offload = none" \
    compare_logs "$tmp/acc_cpu/log.jsonl" "$tmp/blk_acc/log.jsonl" 1e-2 6

# blk_overflow NAME AT: a 5-step blocks run whose step 3 overflows at AT (grads: a
# block's FP16 gradient; dx0: with the embedding on the "GPU", one of wpe's).
blk_overflow() {
    local name=$1 at=$2 line
    GENTRAIN_FAKE_GPU_OVERFLOW=3 GENTRAIN_FAKE_GPU_OVERFLOW_AT=$at run_ok "$name" \
        "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 5 --out "$tmp/$name" --offload blocks
    line=$(step_line "$tmp/$name.out" 3)
    echo "    $line"
    check "blocks, overflow in $at at 3: step 3 skipped, scale 65536 -> 32768" grep -q \
        '| FP16 overflow: step skipped | .* | scale 65536 -> 32768$' <<< "$line"
    check "blocks, overflow in $at at 3: steps 1, 2 at 65536 and 4, 5 at 32768 update" test \
        "$(grep -c '^step *[12]/5 | loss .* | norm [0-9.]* | .* | scale 65536$' "$tmp/$name.out")" \
        -eq 2 -a "$(grep -c '^step *[45]/5 | loss .* | norm [0-9.]* | .* | scale 32768$' \
        "$tmp/$name.out")" -eq 2
    check "blocks, overflow in $at at 3: log step 3 skipped" \
        test "$(field "$tmp/$name/log.jsonl" 3 skipped)" = true
}
blk_overflow blk_ovf grads
blk_overflow blk_ovf_dx0 dx0
GENTRAIN_FAKE_GPU_OVERFLOW=3 GENTRAIN_FAKE_GPU_OVERFLOW_AT=dx0 run_ok blk_ovf3 "${FAKE[@]}" \
    "${ARGS[@]}" "${CONST[@]}" --steps 3 --out "$tmp/blk_ovf3" --offload blocks
run_ok blk_two "${FAKE[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 2 --out "$tmp/blk_two" \
    --offload blocks
"$CMPMODEL" "$tmp/blk_ovf3/model.h5" "$tmp/blk_two/model.h5" 0 > "$tmp/blk_skip.cmp" 2>&1
rc=$?
sed -e 's/^/    /' "$tmp/blk_skip.cmp"
check "blocks, overflow in the embedding's gradient at 3 of 3: the parameters of the 2-step run, bit for bit" \
    test $rc -eq 0

SHORT=("${ARGS[@]}" "${CONST[@]}" --out none --log "")

# ------------------------------------------------------------- 4 and 6 on 2 ranks
if [ -n "${MPIEXEC:-}" ]; then
    MPI=(timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN_FAKEGPU" train)
    GENTRAIN_FAKE_GPU_OVERFLOW=2 GENTRAIN_FAKE_GPU_OVERFLOW_RANK=1 \
        run_ok np2 "${MPI[@]}" "${SHORT[@]}" --steps 4
    line=$(step_line "$tmp/np2.out" 2)
    echo "    $line"
    check "np=2, overflow on rank 1 at step 2: rank 0 skips step 2 too" \
        grep -q '| FP16 overflow: step skipped | .* | scale 65536 -> 32768$' <<< "$line"
    check "np=2: the other steps update (3 norms)" \
        test "$(grep -c '^step *[134]/4 | loss .* | norm ' "$tmp/np2.out")" -eq 3
    check "np=2: parameters identical on all 2 ranks at the end" \
        grep -q '^check: the parameters are identical on all 2 ranks' "$tmp/np2.out"

    # sync = async on the "GPU": an overflow in the gradient of step 2 halves the scale
    # at step 2 and skips the update that applies that gradient, at step 3.
    GENTRAIN_FAKE_GPU_OVERFLOW=2 run_ok async "${MPI[@]}" "${SHORT[@]}" --steps 5 \
        --sync async --staleness 1
    n=$(grep -c '^offload: every layer on the GPU' "$tmp/async.out")
    check "np=2 async: the GPU trains ($n offload line)" test "$n" -eq 1
    line=$(step_line "$tmp/async.out" 2)
    echo "    $line"
    check "np=2 async: the gradient of step 2 overflows: scale 65536 -> 32768 at step 2" \
        grep -q '| norm [0-9.]* | .* | scale 65536 -> 32768$' <<< "$line"
    line=$(step_line "$tmp/async.out" 3)
    echo "    $line"
    check "np=2 async: step 3, which applies step 2's gradient, skips its update" \
        grep -q '| FP16 overflow in the gradient of step 2: update skipped | .* | scale 32768$' \
        <<< "$line"
    check "np=2 async: steps 2, 4 and 5 update (3 norms; step 1 is the warm-up)" \
        test "$(grep -c '^step *[245]/5 | loss .* | norm ' "$tmp/async.out")" -eq 3
    check "np=2 async: parameters identical on all 2 ranks at the end" \
        grep -q '^check: the parameters are identical on all 2 ranks' "$tmp/async.out"
else
    echo "skip: parts 4 and 6 on 2 ranks (no mpirun)"
fi

# ------------------------------------------------------------- 8. pipeline stages
if [ -n "${MPIEXEC:-}" ]; then
    gpu_pipeline_grids "$GENTRAIN_FAKEGPU"
    # An overflow on the second stage's rank alone: every rank skips that step.
    GENTRAIN_FAKE_GPU_OVERFLOW=3 GENTRAIN_FAKE_GPU_OVERFLOW_RANK=1 \
        run_ok ppover "${MPI[@]}" "${SHORT[@]}" --steps 3 --pp 2
    line=$(step_line "$tmp/ppover.out" 2)
    echo "    $line"
    check "pp 2, overflow on the last stage's GPU in step 2: both stages skip step 2" \
        grep -q '| FP16 overflow: step skipped | .* | scale 65536 -> 32768$' <<< "$line"
else
    echo "skip: part 8 (no mpirun)"
fi

# ------------------------------------------------------------- 9. tensor parallelism
if [ -n "${MPIEXEC:-}" ]; then
    # Every rank sees the one fake GPU (as under mpirun on a node with fewer GPUs than
    # ranks): the same device identity, so the ranks share it and NCCL is out.
    gpu_tp_grids "$GENTRAIN_FAKEGPU" \
        'through host memory over MPI \(ranks share a GPU; NCCL needs one a rank\)'
    # Each rank has its own fake GPU, shown to it as its only device 0 (as under srun
    # --gpus-per-task=1): one device counted by every rank, but their identities differ,
    # so they do not share; this build has no NCCL, which is then the reason.
    GENTRAIN_FAKE_GPU_PER_TASK=1 run_ok tptask "${MPI[@]}" "${SHORT[@]}" --steps 2 --tp 2
    check "tp 2, a GPU per task (each its device 0): not shared, the host path for want of NCCL" \
        grep -q "^offload: tp = 2: each rank's shard .*(rank 0: GPU 0 of 1 on its node, .* their tp all-reduces through host memory over MPI (this gentrain was built without NCCL); " \
        "$tmp/tptask.out"
    run_ok tpblk "${MPI[@]}" "${SHORT[@]}" --steps 2 --tp 2 --offload blocks
    check "tp 2, offload = blocks: the shard line, without the placement note" test \
        "$(grep -c "^offload: tp = 2: each rank's shard" "$tmp/tpblk.out")" -eq 1 -a \
        "$(grep -c 'placed as with offload = blocks' "$tmp/tpblk.out")" -eq 0
    run_ok tpreq "${MPI[@]}" "${SHORT[@]}" --steps 2 --tp 2 --offload required
    check "tp 2, offload = required: trains on the GPUs" \
        grep -q "^offload: tp = 2: each rank's shard" "$tmp/tpreq.out"
    GENTRAIN_FAKE_GPU_OVERFLOW=2 GENTRAIN_FAKE_GPU_OVERFLOW_RANK=1 \
        run_ok tpover "${MPI[@]}" "${SHORT[@]}" --steps 3 --tp 2
    line=$(step_line "$tmp/tpover.out" 2)
    echo "    $line"
    check "tp 2, overflow on tp rank 1's GPU in step 2: both shards skip step 2" \
        grep -q '| FP16 overflow: step skipped | .* | scale 65536 -> 32768$' <<< "$line"
else
    echo "skip: part 9 (no mpirun)"
fi

echo "$fails failed"
[ $fails -eq 0 ]
