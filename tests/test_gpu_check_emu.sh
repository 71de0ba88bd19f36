#!/usr/bin/env bash
# scripts/gpu-check.sh itself, run on the CPU emulation's programs (GPU_CHECK_BIN =
# offload/tests/emu of a --with-cuda build tree), so that its runs, its time budget, its
# table and the figures it reads from the programs' RESULT lines are known to work
# before a GPU's scarce minutes are spent on them. test_ops and `gpu_train test` run on
# the emulation in tests/test_emu_orders.sh, so this runs the three others:
#  1. GPU_CHECK_ONLY="grads bench shakespeare" GPU_CHECK_SMALL=1 (the --small shape):
#     exit 0; all three "passed" in the table (grads: one step's gradients, every tensor
#     within its tolerance of the CPU's in double, and that reference against finite
#     differences); the gradients' summary with its figures; every benchmark figure has
#     a value; the phase line names all 9 phases; the shakespeare line.
#  2. GPU_CHECK_BUDGET=0: nothing runs, the table says so for each check, exit 1 (and
#     grids, without GPU_CHECK_GENTRAIN, is skipped).
#  3. Bad settings (GPU_CHECK_BIN without the programs, an unknown GPU_CHECK_ONLY
#     word): one error line naming the problem, exit 1.
#  4. The benchmark at its real size, dry (CUDA_EMU_DRY=1 with a 140 GiB emulated
#     device, the H200's): gpu_train bench picks B = 128, allocates its ~93 GiB (as
#     address space) and gets through every step with every kernel launch and cuBLAS
#     call at the GPT-2 124M shape accepted; nothing is computed, so its only FAIL is
#     the first loss (0 instead of ~ln V) and its figures mean nothing.
#  5. The grids check (scripts/gpu-grids.sh) with GPU_CHECK_GENTRAIN = gentrain on the
#     emulated GPU, at its small shape, every rank sharing the one emulated GPU (host
#     path): "passed" in the table, its 4 grids ok on the RESULT line, each said to
#     all-reduce through host memory where it has tp.
# Environment: top_srcdir, top_builddir (the test skips without the emulation's
# programs there), MPIEXEC (part 5 is skipped without it).
set -u
: "${top_srcdir:?top_srcdir must point at the source tree}"
: "${top_builddir:?top_builddir must point at the build tree}"
BIN=$top_builddir/offload/tests/emu
if [ ! -x "$BIN/gpu_train" ] || [ ! -x "$BIN/test_ops" ]; then
    echo "skip: no $BIN/gpu_train and test_ops (configure --with-cuda builds them)"
    exit 77
fi

. "$top_srcdir/tests/lib.sh"
test_tmpdir gpu_check_emu
export TMPDIR=$tmp
CHECK=(timeout 600 bash "$top_srcdir/scripts/gpu-check.sh")

# row OUT LABEL: the result column of LABEL's row in the summary table of OUT.
row() { sed -n "s/^  $2  *\([^ ].*[^ ]\)  *[-0-9][0-9]*\$/\1/p" "$1"; }

# ------------------------------------------------------------- 1. a smoke run
GPU_CHECK_BIN=$BIN GPU_CHECK_SMALL=1 GPU_CHECK_ONLY="grads bench shakespeare" \
    run_ok smoke "${CHECK[@]}"
show "$tmp/smoke.out"
for label in "gpu_train grads" "gpu_train bench" "gpu_train shakespeare"; do
    r=$(row "$tmp/smoke.out" "$label")
    check "smoke: $label ${r:-missing} in the table" test "$r" = passed
done
check "smoke: test_ops and gpu_train test not run (GPU_CHECK_ONLY)" \
    test -z "$(row "$tmp/smoke.out" test_ops)$(row "$tmp/smoke.out" "gpu_train test")"
check "smoke: grads checked every tensor kind (16 ok lines) and its reference" test \
    "$(grep -c '^ok   grads: [a-z_.12]* *[0-9]* x *[0-9]*: ||g_gpu - g_ref|| / ||g_ref||' \
       "$tmp/smoke.out")" -eq 16 -a \
    "$(grep -c "^ok   grads: the reference's gradient . d vs central differences" \
       "$tmp/smoke.out")" -eq 1
check "smoke: the gradients' summary has its figures" grep -Eq \
    '^  B=2 T=64 scale=[0-9]+ loss_gpu=[0-9.]+ loss_ref=[0-9.]+ loss_rel=[0-9.e+-]+ worst_rel=[0-9.e+-]+ worst_tensor=[a-z_.0-9]+ all_rel=[0-9.e+-]+ tol=4.9e-03 ' \
    "$tmp/smoke.out"
empty=
for k in B T tokens_per_step gpu_ms gpu_tok_s gpu_mfu step_ms step_tok_s step_mfu \
    accum4_ms accum4_tok_s accum4_mfu square_gpu_ms mem_gib; do
    grep -q "^  $k  *[0-9][0-9.]*%*\$" "$tmp/smoke.out" || empty+=" $k"
done
check "smoke: every benchmark figure has a value (missing:${empty:- none})" test -z "$empty"
phases=$(grep '^gpu-check: GPU ms by phase' "$tmp/smoke.out")
n=0
for p in matmul attention layernorm gelu+residual embedding head loss other tp-allreduce; do
    [[ $phases == *" $p="[0-9]* ]] && n=$((n + 1))
done
check "smoke: the phase line names all 9 phases ($n)" test $n -eq 9
check "smoke: the shakespeare line has its figures" \
    grep -q '^gpu-check: shakespeare: steps=[0-9]* val_start=[0-9.]* val_end=[0-9.]*' \
    "$tmp/smoke.out"
check "smoke: says the figures mean nothing" grep -q 'the figures mean nothing' "$tmp/smoke.out"
check "smoke: all passed" grep -q '^gpu-check: all passed$' "$tmp/smoke.out"

# ------------------------------------------------------------- 2. no time left
# (the six checks that run programs of GPU_CHECK_BIN; sanitizer's rows depend on
# whether compute-sanitizer is installed, nccl's on whether NCCL was built)
GPU_CHECK_BIN=$BIN GPU_CHECK_BUDGET=0 \
    GPU_CHECK_ONLY="test_ops test grads bench shakespeare grids" \
    "${CHECK[@]}" > "$tmp/budget.out" 2>&1
rc=$?
check "budget 0: exit 1 (rc $rc)" test $rc -eq 1
n=$(grep -c 'NOT RUN (time budget spent)' "$tmp/budget.out")
check "budget 0: all 5 checks NOT RUN in the table ($n)" test "$n" -eq 5
check "budget 0: FAILED" grep -q '^gpu-check: FAILED$' "$tmp/budget.out"
check "budget 0: grids skipped without GPU_CHECK_GENTRAIN" \
    test "$(row "$tmp/budget.out" grids)" = "SKIPPED (no GPU_CHECK_GENTRAIN)"

# ------------------------------------------------------------- 3. bad settings
GPU_CHECK_BIN=$tmp/nowhere "${CHECK[@]}" > "$tmp/nobin.out" 2>&1
rc=$?
check "GPU_CHECK_BIN without programs: exit 1 (rc $rc), names the missing program" \
    test $rc -eq 1 -a "$(grep -c "^gpu-check: no $tmp/nowhere/test_ops\$" "$tmp/nobin.out")" -eq 1
GPU_CHECK_BIN=$BIN GPU_CHECK_ONLY="bench typo" "${CHECK[@]}" > "$tmp/only.out" 2>&1
rc=$?
check "GPU_CHECK_ONLY=\"bench typo\": exit 1 (rc $rc), names 'typo'" \
    test $rc -eq 1 -a "$(grep -c "unknown check 'typo'" "$tmp/only.out")" -eq 1

# ------------------------------------------------------------- 4. full size, dry
CUDA_EMU_DRY=1 CUDA_EMU_DEVICE_BYTES=$((140 << 30)) timeout 600 "$BIN/gpu_train" bench \
    --steps 2 > "$tmp/dry.out" 2>&1
rc=$?
show "$tmp/dry.out"
check "dry bench: ends with its verdict, not an abort (rc $rc)" test $rc -eq 0 -o $rc -eq 1
check "dry bench: no emulator or engine error" \
    test "$(grep -c 'cuda_emu:\|error\|gpu_model_[a-z_]*:' "$tmp/dry.out")" -eq 0
check "dry bench: the only FAIL is the first loss" test \
    "$(grep '^FAIL' "$tmp/dry.out" | grep -vc '^FAIL bench: first loss 0.0000 is near ln V')" -eq 0
check "dry bench: B = 128 x T = 1024 at the GPT-2 124M shape, ~93 GiB" grep -q \
    '^RESULT bench B=128 T=1024 .* mem_gib=9[0-9]\.' "$tmp/dry.out"

# ------------------------------------------------------------- 5. grids
EMU_G=$top_builddir/tests/gentrain_emugpu
if [ -n "${MPIEXEC:-}" ] && [ -x "$EMU_G" ]; then
    # TMPDIR back to /tmp for mpirun's session folder: under the build tree's long path,
    # Open MPI's 2-rank jobs built with the sanitizers end with LeakSanitizer's "Tracer
    # caught signal 11" (gentrain's own CPU runs too). gpu-check and gpu-grids clean up
    # their folders there themselves.
    TMPDIR=/tmp GPU_CHECK_BIN=$BIN GPU_CHECK_SMALL=1 GPU_CHECK_ONLY=grids \
        GPU_CHECK_GENTRAIN=$EMU_G CUDA_EMU_DEVICES=1 run_ok grids "${CHECK[@]}"
    show "$tmp/grids.out"
    r=$(row "$tmp/grids.out" grids)
    check "grids: ${r:-missing} in the table" test "$r" = passed
    check "grids: the summary has all 4 grids ok" grep -Eq \
        '^gpu-check: grids \(result:GPU ms/step\): tp2=ok:[0-9.]+ pp2=ok:[0-9.]+ dp2tp2=ok:[0-9.]+ tp2pp2=ok:[0-9.]+$' \
        "$tmp/grids.out"
    check "grids: the 3 grids with tp all-reduce through host memory (one shared GPU)" test \
        "$(grep -c 'their tp all-reduces through host memory over MPI (ranks share a GPU' \
           "$tmp/grids.out")" -eq 3
else
    echo "skip: part 5 (no mpirun or no tests/gentrain_emugpu)"
fi

echo "$fails failed"
[ $fails -eq 0 ]
