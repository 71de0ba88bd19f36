#!/usr/bin/env bash
# The CPU emulation's thread orders and shared-memory poison (offload/tests/emu/
# cuda_emu.h), on gentrain's kernels and on kernels made to fail:
#  1. offload/tests/emu/test_ops under CUDA_EMU_ORDER=all: every launch of every kernel
#     run forward, reverse and in a seeded shuffle from the same device memory: passes,
#     the emulation's summary counts the launches (at least 50) and finds no difference.
#     This is the only run of test_ops in `make check`.
#  2. offload/tests/emu/gpu_train test under CUDA_EMU_ORDER=shuffle:7: passes (the whole
#     step, its reductions and atomics, in another order than the forward one that
#     tests/test_gpu_check_emu.sh's gpu_train runs take; part 1 runs every kernel
#     reversed too). The only run of `gpu_train test` in `make check`: one order keeps
#     CI's time.
#  3. test_emu_orders barrier (a block sum through static shared memory with its
#     __syncthreads) under all: passes. test_emu_orders racy (the same kernel without
#     the barrier) under all: the emulation stops and names block_sum and the orders
#     that disagree; under forward alone the sums come out wrong (thread 0 reads the
#     poison of slots not yet written).
#  4. test_emu_orders stale: a block reads the poison, not the static shared values a
#     previous block left.
#  5. CUDA_EMU_ORDER=sideways: one error line naming it.
# Environment: top_srcdir, top_builddir.
set -u
: "${top_srcdir:?top_srcdir must point at the source tree}"
: "${top_builddir:?top_builddir must point at the build tree}"
EMU=$top_builddir/offload/tests/emu
for p in test_ops gpu_train test_emu_orders; do
    if [ ! -x "$EMU/$p" ]; then
        echo "skip: no $EMU/$p (configure --with-cuda builds the emulation)"
        exit 77
    fi
done

. "$top_srcdir/tests/lib.sh"
test_tmpdir emu_orders

# ------------------------------------------------------------- 1. test_ops, all orders
CUDA_EMU_ORDER=all run_ok ops timeout 900 "$EMU/test_ops"
show "$tmp/ops.out"
n=$(sed -n 's/^cuda_emu: \([0-9]*\) launches each run in 3 thread orders (forward, reverse, shuffle seed [0-9]*), results the same$/\1/p' \
    "$tmp/ops.err")
check "test_ops: ${n:-no} launches each in 3 orders, the same (at least 50)" test "${n:-0}" -ge 50
check "test_ops: all its checks passed" grep -q '^[0-9]* checks, 0 failed$' "$tmp/ops.out"

# ------------------------------------------------------------- 2. gpu_train, other orders
for order in shuffle:7; do
    CUDA_EMU_ORDER=$order run_ok "train-$order" timeout 900 "$EMU/gpu_train" test
    check "gpu_train test under $order: no FAIL line" \
        test "$(grep -c '^FAIL' "$tmp/train-$order.out")" -eq 0
done

# ------------------------------------------------------------- 3. a missing barrier
CUDA_EMU_ORDER=all run_ok barrier "$EMU/test_emu_orders" barrier
check "barrier: the sums are right" grep -q '^ok   barrier: 0 of 3 block sums wrong$' "$tmp/barrier.out"
CUDA_EMU_ORDER=all "$EMU/test_emu_orders" racy > "$tmp/racy.out" 2> "$tmp/racy.err"
rc=$?
show "$tmp/racy.err"
check "racy under all: stopped (rc $rc)" test $rc -ne 0
check "racy under all: block_sum named, its orders disagree" grep -q \
    '^cuda_emu: kernel block_sum: its results depend on the order its threads run in: run forward and \(reverse\|shuffle\)' \
    "$tmp/racy.err"
CUDA_EMU_ORDER=forward "$EMU/test_emu_orders" racy > "$tmp/racy-fwd.out" 2>&1
rc=$?
check "racy forward: wrong sums (rc $rc), read from the poison (NaN)" test $rc -eq 1 -a \
    "$(grep -c '^block [0-9]: sum -\?nan' "$tmp/racy-fwd.out")" -eq 3

# ------------------------------------------------------------- 4. per-block poison
run_ok stale "$EMU/test_emu_orders" stale
check "stale: later blocks read the poison" grep -q '^ok   stale:' "$tmp/stale.out"

# ------------------------------------------------------------- 5. a bad setting
CUDA_EMU_ORDER=sideways "$EMU/test_emu_orders" barrier > "$tmp/bad.out" 2>&1
rc=$?
check "CUDA_EMU_ORDER=sideways: refused (rc $rc) with one line naming it" test $rc -ne 0 -a \
    "$(grep -c '^cuda_emu: CUDA_EMU_ORDER=sideways: not forward, reverse, shuffle\[:SEED\] or all$' "$tmp/bad.out")" -eq 1

echo "$fails failed"
[ $fails -eq 0 ]
