#!/usr/bin/env bash
# `gentrain --build-info` against what the build and the machine say by other means:
#  - the first line is `gentrain VERSION`, and each key (compiler, MPI, HDF5, BLAS,
#    CUDA, NCCL, GPUs, CPU, kernels, bf16 products) stands on exactly one line;
#  - MPI: the version mpirun --version reports; HDF5: the one pkg-config gives for the
#    library gentrain was built on (where pkg-config knows it), and "parallel: yes" as
#    the MPI-IO driver the build requires; BLAS: the core a training run reports;
#  - CUDA: "built with CUDA" exactly where the build compiled the CUDA side
#    (offload/cuda_device.o), else "not built"; NCCL likewise (GENTRAIN_TEST_NCCL);
#  - GPUs: as many as nvidia-smi lists where the build has CUDA, else none with the
#    reason; the tests' fake GPU build shows its one GPU;
#  - CPU: taskset to one CPU gives "1 of N CPUs"; kernels: GENTRAIN_SIMD=portable gives
#    portable, as a training run's threads line does;
#  - it starts no MPI: no Open MPI session folder appears; an extra argument is a
#    usage error (exit 2, one line); a full standard output exits 1.
set -u
: "${GENTRAIN:?GENTRAIN must point at the gentrain binary}"
: "${top_srcdir:?top_srcdir must point at the source tree}"
: "${top_builddir:?top_builddir must point at the build tree}"
. "$top_srcdir/tests/lib.sh"
test_tmpdir build_info

run_ok info "$GENTRAIN" --build-info
out=$tmp/info.out
show "$out"
val() { sed -n "s/^$1: //p" "$out"; }

version=$("$GENTRAIN" --version)
check "first line: $version" test "$(head -n 1 "$out")" = "$version"
for key in compiler MPI HDF5 BLAS CUDA NCCL GPUs CPU kernels "bf16 products"; do
    check "one '$key:' line" test "$(grep -c "^$key: " "$out")" -eq 1
done

# MPI: the library's own version, as its launcher reports it
mpi_version=$(mpirun --version 2>/dev/null | sed -n 's/^mpirun (Open MPI) \([0-9.]*\).*/\1/p')
if [ -n "$mpi_version" ]; then
    check "MPI: Open MPI $mpi_version, as mpirun --version says" \
        grep -q "^MPI: Open MPI v$mpi_version\b.*(MPI [0-9]\.[0-9])$" "$out"
else
    echo "note: no Open MPI mpirun here; the MPI line is not compared"
fi
# HDF5: the version pkg-config has for the library linked, and parallel
h5_version=$(pkg-config --modversion hdf5 2>/dev/null)
if [ -n "$h5_version" ]; then
    check "HDF5: $h5_version, as pkg-config says" grep -q "^HDF5: $h5_version, " "$out"
else
    echo "note: pkg-config knows no hdf5; the HDF5 version is not compared"
fi
check "HDF5: parallel (gentrain needs the MPI-IO driver)" \
    grep -q '^HDF5: .*parallel (MPI-IO driver): yes$' "$out"

# CUDA and NCCL as the build compiled them
if [ -e "$top_builddir/offload/cuda_device.o" ]; then
    check "CUDA: built with CUDA (the build compiled offload/cuda_device.cu)" \
        grep -q '^CUDA: built with CUDA [0-9]*\.[0-9]*, cuBLAS [0-9.]*$' "$out"
else
    check "CUDA: not built (no offload/cuda_device.o)" \
        test "$(val CUDA)" = "not built (configure --with-cuda)"
fi
if [ "${GENTRAIN_TEST_NCCL:-no}" = yes ]; then
    check "NCCL: a version (the build found NCCL)" grep -q '^NCCL: [0-9]*\.[0-9]*\.[0-9]*$' "$out"
else
    check "NCCL: not built" test "$(val NCCL)" = "not built"
fi
# GPUs: what nvidia-smi lists (all of the node's; CUDA_VISIBLE_DEVICES may show fewer)
n_gpus=0
if command -v nvidia-smi > /dev/null; then
    n_gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU [0-9]')
fi
if [ "$n_gpus" -gt 0 ] && [ -e "$top_builddir/offload/cuda_device.o" ]; then
    if [ -z "${CUDA_VISIBLE_DEVICES+set}" ]; then
        check "GPUs: $n_gpus, as nvidia-smi -L lists" grep -q "^GPUs: $n_gpus: 0: " "$out"
    else
        check "GPUs: some listed (CUDA_VISIBLE_DEVICES is set)" grep -q '^GPUs: [0-9]' "$out"
    fi
else
    check "GPUs: none here, with the reason" grep -q '^GPUs: none (..*)$' "$out"
fi
if [ -x "${GENTRAIN_FAKEGPU:-}" ]; then
    run_ok fake "$GENTRAIN_FAKEGPU" --build-info
    check "fake GPU build: CUDA names it" grep -q "^CUDA: the tests' fake GPU$" "$tmp/fake.out"
    check "fake GPU build: its one GPU listed" grep -q '^GPUs: 1: 0: ..*' "$tmp/fake.out"
fi

# BLAS and kernels as a training run reports them
prepare_slice
run_ok train timeout 120 env GENTRAIN_SIMD=portable "$GENTRAIN" train --data "$tmp/d.h5" \
    --n_layer 1 --n_head 2 --n_embd 32 --block_size 16 --batch_size 2 --steps 1 \
    --eval_every 0 --val_dataset none --out none --threads 1
core=$(sed -n 's/^BLAS: OpenBLAS core \([A-Za-z0-9]*\) .*/\1/p' "$tmp/train.out")
check "BLAS: core ${core:-?}, as the training run reports" \
    grep -q "^BLAS: .*; core ${core:-?}\$" "$out"
check "training run: kernels portable under GENTRAIN_SIMD=portable" \
    grep -q '^threads: .*, kernels portable,' "$tmp/train.out"
run_ok portable env GENTRAIN_SIMD=portable "$GENTRAIN" --build-info
check "kernels: portable under GENTRAIN_SIMD=portable" \
    grep -q '^kernels: portable (built: ' "$tmp/portable.out"
online=$(getconf _NPROCESSORS_ONLN)
if command -v taskset > /dev/null && taskset -c 0 true 2> /dev/null; then
    run_ok one_cpu taskset -c 0 "$GENTRAIN" --build-info
    check "CPU: taskset -c 0 gives 1 of $online CPUs" \
        grep -q "^CPU: .*; 1 of $online CPUs available to this process\$" "$tmp/one_cpu.out"
fi

# no MPI started: Open MPI would make a session folder under its tmpdir base
before=$(find "$mpi_session" -mindepth 1 2> /dev/null | wc -l)
run_ok again "$GENTRAIN" --build-info
after=$(find "$mpi_session" -mindepth 1 2> /dev/null | wc -l)
check "no MPI started (no Open MPI session files: $before before, $after after)" \
    test "$after" -eq "$before"

"$GENTRAIN" --build-info extra > "$tmp/extra.out" 2> "$tmp/extra.err"
rc=$?
check "an extra argument: exit 2 (rc $rc)" test $rc -eq 2
check "an extra argument: one error line" test "$(grep -c '^gentrain: error: ' "$tmp/extra.err")" -eq 1
if [ -w /dev/full ]; then
    "$GENTRAIN" --build-info > /dev/full 2> "$tmp/full.err"
    rc=$?
    check "standard output full: exit 1 (rc $rc)" test $rc -eq 1
    check "standard output full: said" grep -q '^gentrain: error: cannot write standard output' \
        "$tmp/full.err"
fi

[ "$fails" -eq 0 ]
