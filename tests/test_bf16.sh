#!/usr/bin/env bash
# precision = bf16 end to end (BF16 matrix products, FP32 everything else):
#  - it trains: the line says which path runs, the loss falls, and the first step's
#    loss (no update yet) is within 1e-2 of the FP32 run's, the last within 5%;
#  - the default path and the portable one (GENTRAIN_BF16=portable) train to the same
#    losses within 1e-3, and so does the AVX512_BF16 path (GENTRAIN_BF16=avx512, which
#    the default picks only where the dot products are fast: the run says so) on a CPU
#    with AVX512_BF16; elsewhere that asks for it gets one warning and the portable path;
#  - the AMX path's emulated twin (GENTRAIN_BF16=amx-emulated, every CPU: the AMX
#    kernel on software tiles) trains to the portable path's losses within 1e-3;
#  - its timing mode (GENTRAIN_AMX_TIMING=1, the bench's) warns once and counts the same
#    tile instructions; on another path the variable is ignored, with one warning;
#    so does the AVX512_BF16 path's (GENTRAIN_DOT_TIMING=1), counting the same dot
#    products, whose losses leave the real path's;
#  - GENTRAIN_BF16=amx: on a CPU with AMX-BF16 tiles the amx-bf16 path, within 1e-3 of
#    the portable one; elsewhere one warning and the best path the CPU has;
#  - data parallel: 2 ranks with batch 4 take the 1-process run's path and match it
#    (batch 8) within 2e-5, tp 2 and pp 2 (4 micro-batches) within 1e-4;
#  - a run stopped after its step-10 checkpoint and resumed (resume = auto) logs the
#    losses of the straight run exactly and saves the same parameters;
#  - weights packed once per update (the default) against packing them in every
#    product (GENTRAIN_BF16_PREPACK=0): the same losses and final parameters, bit for
#    bit, with 2 micro-batches a step, on the AVX512_BF16 path (the default where the
#    CPU lacks it) and the emulated AMX twin;
#  - the activations that only products read in BF16 storage (GENTRAIN_BF16_ACTS=exact)
#    against FP32 storage (=0): the same losses and final parameters, bit for bit, on
#    the AVX512_BF16 (or default), portable and emulated AMX paths; the default (the MLP pre-activation
#    in BF16 too) within 1e-3 of the exact set's losses, and not identical to them;
#  - precision = fp16 is refused with one line naming the choices.
# Every run under `timeout`, so a hang fails instead of blocking.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${CMPMODEL:?CMPMODEL must point at tests/cmpmodel}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir bf16
prepare_slice

ARGS=(--data "$tmp/d.h5" --n_layer 2 --n_head 4 --n_embd 64 --block_size 32 --steps 20
      --warmup_steps 3 --lr 3e-3 --eval_every 10 --eval_batches 2 --threads 1 --seed 11)
train() { # NAME ARGS...: one process
    local name=$1
    shift
    run_ok "$name" timeout 300 "$GENTRAIN" train "${ARGS[@]}" --out "$tmp/$name" "$@"
}
loss_at() { sed -n "s/^{\"step\":$2,\"loss\":\([^,]*\),.*/\1/p" "$tmp/$1/log.jsonl" | tail -n 1; }

train fp32 --batch_size 8
train bf16 --batch_size 8 --precision bf16
check "bf16: the precision line names the path" \
    grep -q "^precision: bf16 matrix products (\(amx-bf16\|avx512-bf16\|portable\) path)" "$tmp/bf16.out"
sed -n 's/^precision: /    /p' "$tmp/bf16.out"
f1=$(loss_at fp32 1) b1=$(loss_at bf16 1) f20=$(loss_at fp32 20) b20=$(loss_at bf16 20)
echo "    step 1: fp32 $f1, bf16 $b1; step 20: fp32 $f20, bf16 $b20"
check "bf16: step-1 loss within 1e-2 of fp32" \
    awk -v a="$f1" -v b="$b1" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d / a < 1e-2) }'
check "bf16: step-20 loss within 5% of fp32" \
    awk -v a="$f20" -v b="$b20" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d / a < 0.05) }'
check "bf16: the loss falls by more than 1 (step 1: $b1, step 20: $b20)" \
    awk -v a="$b1" -v b="$b20" 'BEGIN { exit !(b < a - 1.0) }'

GENTRAIN_BF16=portable train portable --batch_size 8 --precision bf16
check "portable path: the line says so" grep -q "(portable path)" "$tmp/portable.out"
check "default and portable paths: same losses within 1e-3" \
    compare_logs "$tmp/bf16/log.jsonl" "$tmp/portable/log.jsonl" 1e-3 20
# the dot products, asked for: the default picks them only where they are fast
GENTRAIN_BF16=avx512 train avx512 --batch_size 8 --precision bf16
if grep -q "(avx512-bf16 path)" "$tmp/avx512.out"; then
    dot=avx512
    check "avx512-bf16 and portable paths: same losses within 1e-3" \
        compare_logs "$tmp/avx512/log.jsonl" "$tmp/portable/log.jsonl" 1e-3 20
    # the bench's prediction for faster dot products reads these counts: every step
    # runs the same products, so the same count, and only this path counts
    dots=$(sed -n 's/.*"vdpbf16ps":\[\([0-9,]*\)\].*/\1/p' "$tmp/avx512/log.jsonl" |
        awk -F, '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s }' | sort -u)
    echo "    VDPBF16PS a step (all threads): $dots"
    check "avx512-bf16: each of the 20 steps logs the same VDPBF16PS count, above 0" \
        test "$(grep -c '"vdpbf16ps":' "$tmp/avx512/log.jsonl")" -eq 20 \
        -a "$(echo "$dots" | wc -l)" -eq 1 -a "${dots:-0}" -gt 0
    check "portable: no VDPBF16PS counts in the log" \
        test "$(grep -c '"vdpbf16ps":' "$tmp/portable/log.jsonl")" -eq 0
    # the bench's timing twin: a multiply-add in place of each dot product, counted alike;
    # its results mean nothing, so its losses leave the real path's
    GENTRAIN_BF16=avx512 GENTRAIN_DOT_TIMING=1 train dot_timing --batch_size 8 --precision bf16
    dots_of() { sed -n 's/.*"vdpbf16ps":\[\([0-9,]*\)\].*/\1/p' "$1" | sort -u; }
    check "GENTRAIN_DOT_TIMING=1: one warning that the results are meaningless" \
        test "$(grep -c 'GENTRAIN_DOT_TIMING=1: each BF16 dot product runs as one FP32' \
            "$tmp/dot_timing.err")" -eq 1
    check "GENTRAIN_DOT_TIMING=1: the avx512-bf16 run's VDPBF16PS counts in every step" \
        test "$(dots_of "$tmp/dot_timing/log.jsonl")" = "$(dots_of "$tmp/avx512/log.jsonl")" \
        -a "$(grep -c '"vdpbf16ps":' "$tmp/dot_timing/log.jsonl")" -eq 20
    check "GENTRAIN_DOT_TIMING=1: the products really changed (step-20 loss $(loss_at \
        dot_timing 20) against $(loss_at avx512 20))" \
        test "$(loss_at dot_timing 20)" != "$(loss_at avx512 20)"
    if grep -q "(portable path)" "$tmp/bf16.out"; then
        check "the default passed the dot products over and says why" \
            grep -q "^precision: BF16 dot products measure 0\.[0-9]*x this CPU's FP32 multiply-adds" \
            "$tmp/bf16.out"
    fi
    check "a CPU with BF16 instructions is not told it has none" \
        test "$(grep -c 'has no BF16 instructions' "$tmp/bf16.out" "$tmp/portable.out" |
            awk -F: '{ s += $2 } END { print s }')" -eq 0
else
    dot=default
    check "GENTRAIN_BF16=avx512 without AVX512_BF16: one warning, then the portable path" \
        test "$(grep -c 'the avx512-bf16 BF16 products need a CPU' "$tmp/avx512.err")" -eq 1 \
        -a -n "$(grep '(portable path)' "$tmp/avx512.out")"
    check "no BF16 instructions: the run says fp32 trains faster here, once" \
        test "$(grep -c '^precision: this CPU has no BF16 instructions.*fp32 trains faster' \
            "$tmp/bf16.out")" -eq 1
fi

GENTRAIN_BF16=amx-emulated train emulated --batch_size 8 --precision bf16
check "amx-emulated path: the line says so" grep -q "(amx-emulated path)" "$tmp/emulated.out"
check "amx-emulated and portable paths: same losses within 1e-3" \
    compare_logs "$tmp/emulated/log.jsonl" "$tmp/portable/log.jsonl" 1e-3 20
# the counts scripts/bench.sh predicts the real tile path from: in every step of the
# emulated run (the same each step: the same products), in no step of another path
tiles_of() { grep '^{"step"' "$1" | sed -n 's/.*"tdpbf16ps":\[\([0-9,]*\)\].*/\1/p'; }
check "amx-emulated path: each of the 20 step records counts the same tile instructions" \
    test "$(tiles_of "$tmp/emulated/log.jsonl" | sort -u | grep -c '[1-9]')" = 1 -a \
    "$(tiles_of "$tmp/emulated/log.jsonl" | wc -l)" = 20
check "portable and default bf16 paths: no tile counts in their logs" \
    test -z "$(tiles_of "$tmp/portable/log.jsonl")$(tiles_of "$tmp/bf16/log.jsonl")"
# the twin's timing mode (the bench's second prediction): said once, the same counts
GENTRAIN_BF16=amx-emulated GENTRAIN_AMX_TIMING=1 train timing --batch_size 8 --precision bf16
check "GENTRAIN_AMX_TIMING=1: one warning that the products are not computed" \
    test "$(grep -c 'GENTRAIN_AMX_TIMING=1: the emulated tile products are counted' \
        "$tmp/timing.err")" -eq 1
check "GENTRAIN_AMX_TIMING=1: the emulated run's tile counts in every step" \
    test "$(tiles_of "$tmp/timing/log.jsonl" | sort -u)" = \
    "$(tiles_of "$tmp/emulated/log.jsonl" | sort -u)"
GENTRAIN_BF16=portable GENTRAIN_AMX_TIMING=1 train timing_portable --steps 3 --batch_size 8 \
    --precision bf16
check "GENTRAIN_AMX_TIMING=1 on another path: one warning that it is ignored" \
    test "$(grep -c 'GENTRAIN_AMX_TIMING=1 ignored' "$tmp/timing_portable.err")" -eq 1

GENTRAIN_BF16=portable GENTRAIN_DOT_TIMING=1 train dot_timing_portable --steps 3 \
    --batch_size 8 --precision bf16
check "GENTRAIN_DOT_TIMING=1 on another path: one warning that it is ignored" \
    test "$(grep -c 'GENTRAIN_DOT_TIMING=1 ignored' "$tmp/dot_timing_portable.err")" -eq 1

GENTRAIN_BF16=amx train amx --batch_size 8 --precision bf16
if grep -q "(amx-bf16 path)" "$tmp/amx.out"; then
    check "amx-bf16 (AMX tiles on this CPU) and portable paths: same losses within 1e-3" \
        compare_logs "$tmp/amx/log.jsonl" "$tmp/portable/log.jsonl" 1e-3 20
else
    check "GENTRAIN_BF16=amx without AMX tiles: one warning, then the best path" \
        test "$(grep -c 'the amx-bf16 BF16 products need a CPU' "$tmp/amx.err")" -eq 1 \
        -a -n "$(grep '(\(avx512-bf16\|portable\) path)' "$tmp/amx.out")"
    show "$tmp/amx.err"
fi

# packed once per update or in every product: the same bits (global batch 16 of batch 8:
# two micro-batches read each packed copy)
for path in "$dot" amx-emulated; do
    if [ "$path" = default ]; then unset GENTRAIN_BF16; else export GENTRAIN_BF16=$path; fi
    GENTRAIN_BF16_PREPACK=0 \
        train "pack-$path" --batch_size 8 --global_batch_size 16 --steps 6 --precision bf16
    train "once-$path" --batch_size 8 --global_batch_size 16 --steps 6 --precision bf16
    check "$path path: the run says its weights are packed once per update" \
        grep -q "^bf16 weights: packed once per update" "$tmp/once-$path.out"
    check "$path path: packed once or in every product, the same losses" \
        compare_logs "$tmp/once-$path/log.jsonl" "$tmp/pack-$path/log.jsonl" 0 6
    "$CMPMODEL" "$tmp/once-$path/model.h5" "$tmp/pack-$path/model.h5" 0 > "$tmp/$path.cmp" 2>&1
    check "$path path: packed once or in every product, the same final parameters" \
        test $? -eq 0
done
# activations that only products read in BF16 storage (GENTRAIN_BF16_ACTS=exact) or as
# floats (=0): the same bits, on every path; the default stores the MLP pre-activation
# too, which GELU then sees in BF16: close, not equal
for path in "$dot" portable amx-emulated; do
    if [ "$path" = default ]; then unset GENTRAIN_BF16; else export GENTRAIN_BF16=$path; fi
    GENTRAIN_BF16_ACTS=0 \
        train "f32acts-$path" --batch_size 8 --global_batch_size 16 --steps 6 --precision bf16
    GENTRAIN_BF16_ACTS=exact \
        train "exact-$path" --batch_size 8 --global_batch_size 16 --steps 6 --precision bf16
    [ -d "$tmp/once-$path" ] ||
        train "once-$path" --batch_size 8 --global_batch_size 16 --steps 6 --precision bf16
    check "$path path: the run says which activations it keeps in BF16" \
        grep -q "^bf16 activations: ln_1, ln_2, q|k|v, attention output and GELU output stored in BF16.*; the MLP pre-activation too" \
        "$tmp/once-$path.out"
    check "$path path: the exact set in BF16 storage or as floats, the same losses" \
        compare_logs "$tmp/exact-$path/log.jsonl" "$tmp/f32acts-$path/log.jsonl" 0 6
    "$CMPMODEL" "$tmp/exact-$path/model.h5" "$tmp/f32acts-$path/model.h5" 0 > "$tmp/$path.acmp" 2>&1
    check "$path path: the exact set in BF16 storage or as floats, the same final parameters" \
        test $? -eq 0
    check "$path path: with the MLP pre-activation in BF16 too, losses within 1e-3" \
        compare_logs "$tmp/once-$path/log.jsonl" "$tmp/exact-$path/log.jsonl" 1e-3 6
    check "$path path: ... but not the same run (the pre-activation really is stored)" \
        bash -c "! cmp -s <(grep -o '\"loss\":[^,]*' '$tmp/once-$path/log.jsonl') \
                        <(grep -o '\"loss\":[^,]*' '$tmp/exact-$path/log.jsonl')"
done
unset GENTRAIN_BF16

# resume from the straight run's step-3 checkpoint (constant learning rate)
tiny_gpt_args
run_ok straight timeout 300 "$GENTRAIN" train "${TINY[@]}" "${CONST[@]}" --precision bf16 \
    --steps 5 --ckpt_every 3 --out "$tmp/straight"
run_ok resumed timeout 300 "$GENTRAIN" train "${TINY[@]}" "${CONST[@]}" --precision bf16 \
    --steps 5 --ckpt_every 3 --out "$tmp/resumed" \
    --resume "$tmp/straight/checkpoints/ckpt_00000003.h5"
check_resumed "$tmp/straight" "$tmp/resumed"

if [ -n "${MPIEXEC:-}" ]; then
    MPI=(timeout 300 "$MPIEXEC" --oversubscribe --bind-to none)
    run_ok dp2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 4 \
        --precision bf16 --out "$tmp/dp2"
    # 2e-5 (FP32 grids: 1e-5): the dot products add pairs of terms, so another split of
    # the batch moves more roundings
    # the automatic choice between the portable and avx512-bf16 paths is measured at
    # start-up: a run that chose another path than its reference would differ in its
    # roundings, so say so first (the line sits far from both CPU kinds for this)
    check "bf16, 2 ranks: the same path as the 1-process run" \
        test "$(grep '^precision: bf16' "$tmp/dp2.out")" = "$(grep '^precision: bf16' "$tmp/bf16.out")"
    check "bf16, 2 ranks x batch 4: losses within 2e-5 of 1 process x batch 8" \
        compare_logs "$tmp/bf16/log.jsonl" "$tmp/dp2/log.jsonl" 2e-5 20
    run_ok tp2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 \
        --precision bf16 --tp 2 --out "$tmp/tp2"
    check "bf16, tp 2: losses within 1e-4 of 1 process" \
        compare_logs "$tmp/bf16/log.jsonl" "$tmp/tp2/log.jsonl" 1e-4 20
    run_ok pp2 "${MPI[@]}" -np 2 "$GENTRAIN" train "${ARGS[@]}" --batch_size 8 \
        --precision bf16 --pp 2 --micro_batches 4 --out "$tmp/pp2"
    check "bf16, pp 2 (4 micro-batches): losses within 1e-4 of 1 process" \
        compare_logs "$tmp/bf16/log.jsonl" "$tmp/pp2/log.jsonl" 1e-4 20
else
    echo "    (no MPIEXEC: the data, tensor and pipeline parallel runs are skipped)"
fi

timeout 60 "$GENTRAIN" train "${ARGS[@]}" --precision fp16 --out "$tmp/bad" \
    > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
check "precision = fp16: exit 2 (rc $rc)" test $rc -eq 2
check "precision = fp16: one line naming the choices" \
    test "$(wc -l < "$tmp/bad.err")" -eq 1 -a -n "$(grep 'precision.*fp32|bf16' "$tmp/bad.err")"
show "$tmp/bad.err"
[ "$fails" -eq 0 ]
