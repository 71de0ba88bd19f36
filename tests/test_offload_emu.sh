#!/usr/bin/env bash
# The trainer's GPU path with the real GPU engine (offload/gpu_model*.cu, ops.cu) run
# on the CPU by the CUDA emulation (offload/tests/emu): tests/gentrain_emugpu. Where
# test_offload_fake.sh checks the trainer against a test double of the GPU, this runs
# what a GPU would run, kernel for kernel, through src/engine/device_step.c (offload = all)
# and src/engine/gpu_stage.c (offload = blocks, stages, shards). Tiny model, a
# slice of the shipped corpus:
#  1. offload = all: one `offload:` line naming the emulated GPU; every step at scale
#     65536; losses and val_losses within 1e-2 relative of offload = none (FP16 against
#     FP32), the final val_loss within 2%.
#  2. offload = blocks (every layer on the GPU through src/engine/gpu_stage.c, one
#     stage): the same against offload = none and against offload = all, and the
#     parameters of offload = all's run bit for bit.
#  3. global_batch_size = 2 x batch_size (2 micro-batches summed on the device), for
#     all and blocks: losses within 1e-2 relative of offload = none.
#  4. Resume: a run resumed from its step-3 checkpoint ends with the straight run's
#     losses and parameters, bit for bit (the emulation is deterministic: this checks
#     that a checkpoint holds all the GPU path's state, the loss scale included).
#  5. 2 ranks, each with its own emulated GPU: the parameters identical on both ranks
#     at the end; losses within 1e-2 relative of 1 rank with 2 micro-batches.
#  6. Pipeline stages on emulated GPUs (src/engine/gpu_stage.c on the real stage code:
#     the first stage's embedding and the last stage's head and loss on the GPU too):
#     gpu_pipeline_grids (tests/lib.sh: pp 2, dp 2 x pp 2, pp 2 with accumulation
#     against the CPU's pp 2 within 1e-3; a pp 2 checkpoint resumed on one GPU).
#  7. Tensor-parallel shards on emulated GPUs (the real shard stage code, its
#     vocabulary-parallel embedding, head and loss included): with a GPU
#     per rank (CUDA_EMU_DEVICES=4) their all-reduces go over NCCL (the emulation's
#     stand-in over MPI, offload/tests/emu/nccl_emu.c) where the build has NCCL
#     (GENTRAIN_TEST_NCCL=yes): gpu_tp_grids (tests/lib.sh: tp 2, dp 2 x tp 2, tp 2 x pp 2
#     against the CPU at the same grid within 1e-3; a tp 2 checkpoint resumed on one
#     GPU); then the host path: 2 ranks sharing one GPU (NCCL wants a GPU a rank), and
#     GENTRAIN_NCCL=0 with a GPU each, both saying so and within 1e-3 of the CPU's tp 2.
# Every run is under `timeout`, so a hang fails the test instead of blocking it.
#
# Environment: GENTRAIN_EMUGPU (tests/gentrain_emugpu; the test skips without it),
# CMPMODEL, top_srcdir, MPIEXEC (part 5 is skipped without it).
set -u
: "${CMPMODEL:?CMPMODEL must point at the tests/cmpmodel tool}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
if [ -z "${GENTRAIN_EMUGPU:-}" ] || [ ! -x "$GENTRAIN_EMUGPU" ]; then
    echo "skip: no tests/gentrain_emugpu (configure --with-cuda builds it)"
    exit 77
fi

. "$top_srcdir/tests/lib.sh"
test_tmpdir offload_emu

prepare_slice

EMU=(timeout 300 "$GENTRAIN_EMUGPU" train)
tiny_gpt_args
ARGS=("${TINY[@]}")

# ------------------------------------------------------------- 1. offload = all
run_ok cpu "${EMU[@]}" "${ARGS[@]}" --steps 10 --warmup_steps 2 --lr 3e-3 --eval_every 5 \
    --out "$tmp/cpu" --offload none
run_ok gpu "${EMU[@]}" "${ARGS[@]}" --steps 10 --warmup_steps 2 --lr 3e-3 --eval_every 5 \
    --out "$tmp/gpu"
n=$(grep -c '^offload:' "$tmp/gpu.out")
check "all: one offload line ($n), every layer on the emulated GPU" test "$n" -eq 1 -a \
    "$(grep -c '^offload: every layer on the GPU (rank 0: GPU 0 of 1 on its node, CPU emulation of a GPU' \
       "$tmp/gpu.out")" -eq 1
n=$(grep -c '^step .*| loss .* | scale 65536$' "$tmp/gpu.out")
check "all: every step line ends with | scale 65536 ($n of 10)" test "$n" -eq 10
check "all: losses and val_losses within 1e-2 relative of offload = none" \
    compare_logs "$tmp/cpu/log.jsonl" "$tmp/gpu/log.jsonl" 1e-2 10
check_final_val "all, against offload = none" "$tmp/gpu.out" "$tmp/cpu.out"

# ------------------------------------------------------------- 2. offload = blocks
run_ok blk "${EMU[@]}" "${ARGS[@]}" --steps 10 --warmup_steps 2 --lr 3e-3 --eval_every 5 \
    --out "$tmp/blk" --offload blocks
check "blocks: one offload line, every layer on the emulated GPU as one pipeline stage" test \
    "$(grep -c '^offload: every layer on the GPU as one pipeline stage (rank 0: GPU 0 of 1 on its node, CPU emulation of a GPU' \
       "$tmp/blk.out")" -eq 1
check "blocks: losses and val_losses within 1e-2 relative of offload = none" \
    compare_logs "$tmp/cpu/log.jsonl" "$tmp/blk/log.jsonl" 1e-2 10
check "blocks: losses and val_losses within 1e-2 relative of offload = all" \
    compare_logs "$tmp/gpu/log.jsonl" "$tmp/blk/log.jsonl" 1e-2 10
# The stage engine queues the same kernels as offload = all's one step, the embedding
# and the head included (and the emulation is deterministic): the same parameters.
"$CMPMODEL" "$tmp/gpu/model.h5" "$tmp/blk/model.h5" 0 > "$tmp/blk_all.cmp" 2>&1
rc=$?
sed -e 's/^/    /' "$tmp/blk_all.cmp"
check "blocks: the parameters of offload = all, bit for bit" test $rc -eq 0

# ------------------------------------------------------------- 3. accumulation
ACC=(--steps 6 --warmup_steps 2 --lr 3e-3 --eval_every 3 --global_batch_size 8)
run_ok acc_cpu "${EMU[@]}" "${ARGS[@]}" "${ACC[@]}" --out "$tmp/acc_cpu" --offload none
for placement in all blocks; do
    run_ok "acc_$placement" "${EMU[@]}" "${ARGS[@]}" "${ACC[@]}" --out "$tmp/acc_$placement" \
        --offload "$placement"
    check "$placement, 2 micro-batches: losses within 1e-2 relative of offload = none" \
        compare_logs "$tmp/acc_cpu/log.jsonl" "$tmp/acc_$placement/log.jsonl" 1e-2 6
done

# ------------------------------------------------------------- 4. resume
run_ok straight "${EMU[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 5 --ckpt_every 3 \
    --out "$tmp/straight"
run_ok resumed "${EMU[@]}" "${ARGS[@]}" "${CONST[@]}" --steps 5 --ckpt_every 3 \
    --out "$tmp/resumed" --resume "$tmp/straight/checkpoints/ckpt_00000003.h5"
check_resumed "$tmp/straight" "$tmp/resumed"

# ------------------------------------------------------------- 5. 2 ranks
if [ -n "${MPIEXEC:-}" ]; then
    run_ok np2 timeout 300 "$MPIEXEC" --oversubscribe --bind-to none -np 2 \
        "$GENTRAIN_EMUGPU" train "${ARGS[@]}" --steps 6 --warmup_steps 2 --lr 3e-3 \
        --eval_every 3 --out "$tmp/np2"
    check "np=2: every rank on its emulated GPU" \
        test "$(grep -c '^offload: every layer on the GPU (rank 0: GPU 0 of 1 on its node' \
                "$tmp/np2.out")" -eq 1
    check "np=2: parameters identical on all 2 ranks at the end" \
        grep -q '^check: the parameters are identical on all 2 ranks' "$tmp/np2.out"
    check "np=2: losses within 1e-2 relative of 1 rank with 2 micro-batches (CPU)" \
        compare_logs "$tmp/acc_cpu/log.jsonl" "$tmp/np2/log.jsonl" 1e-2 6
    # ------------------------------------------------------------- 6. pipeline stages
    gpu_pipeline_grids "$GENTRAIN_EMUGPU"
    # ------------------------------------------------------------- 7. tensor parallelism
    if [ "${GENTRAIN_TEST_NCCL:-no}" = yes ]; then
        path='over NCCL [0-9.]+ on the GPUs'
    else
        path='through host memory over MPI \(this gentrain was built without NCCL\)'
    fi
    CUDA_EMU_DEVICES=4 gpu_tp_grids "$GENTRAIN_EMUGPU" "$path"
    TP2=(timeout 300 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$GENTRAIN_EMUGPU" train
         "${ARGS[@]}" --steps 6 --warmup_steps 2 --lr 3e-3 --eval_every 3 --tp 2)
    # host_path NAME WHY: the tp 2 run NAME (its environment set by the caller) took the
    # host path for WHY (a pattern) and trained like the CPU's tp 2.
    host_path() {
        check "$1: the shards all-reduce through host memory ($2)" grep -Eq \
            "^offload: tp = 2: .* their tp all-reduces through host memory over MPI \($2\); " \
            "$tmp/$1.out"
        check "$1: losses and val_losses within 1e-3 relative of the CPU's tp 2" \
            compare_logs "$tmp/tpcpu/log.jsonl" "$tmp/$1/log.jsonl" 1e-3 6
    }
    CUDA_EMU_DEVICES=1 run_ok tpshared "${TP2[@]}" --out "$tmp/tpshared"
    # One emulated GPU on the node: every rank takes the same device (its identity
    # the same), so they share it, NCCL built or not.
    host_path tpshared 'ranks share a GPU; NCCL needs one a rank'
    if [ "${GENTRAIN_TEST_NCCL:-no}" = yes ]; then
        CUDA_EMU_DEVICES=2 GENTRAIN_NCCL=0 run_ok tphost "${TP2[@]}" --out "$tmp/tphost"
        host_path tphost 'GENTRAIN_NCCL=0'
    fi
else
    echo "skip: parts 5 to 7 on several ranks (no mpirun)"
fi

echo "$fails failed"
[ $fails -eq 0 ]
