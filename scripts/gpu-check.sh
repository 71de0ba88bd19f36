#!/bin/bash
# gpu-check.sh — the GPU checks of gentrain, for a machine with a GPU and the CUDA
# toolkit but nothing else of gentrain's build (no MPI, HDF5 or BLAS): run it from the
# source tree as it is. It builds the offload/ tests with nvcc alone and runs them.
#
# What it runs today:
#   offload/tests/test_ops   the FP16 kernels (matrix products on cuBLAS with bias,
#                            causal attention, encoder, LayerNorm, GELU, residual,
#                            cross-entropy; forward and backward) against an FP32
#                            reference on the CPU, with poisoned outputs
# Not built yet, and said so at the end (exit status 2 when the tests pass): the GPU
# training step, the throughput benchmark (GPT-2 124M shape, tokens/s and MFU) and the
# short Shakespeare run.
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), ARCH
# (default: sm_90, the H200; e.g. sm_80 for an A100).
# Exit status: 0 all built and passed, 1 a build or test failed, 2 the tests passed but
# parts of the check are still missing, 77 no GPU.
set -u
cd "$(dirname "$0")/.." || exit 1
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${ARCH:-sm_90}
out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

[ -x "$NVCC" ] || { echo "gpu-check: no nvcc (set NVCC)" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
    sed 's/^/gpu: /'
echo "gpu-check: building offload/tests/test_ops with $NVCC for $ARCH"
start=$(date +%s)
if ! "$NVCC" -O2 -arch="$ARCH" -Ioffload offload/tests/test_ops.cu offload/ops.cu \
    -lcublas -o "$out/test_ops"; then
    echo "gpu-check: build failed" >&2
    exit 1
fi
echo "gpu-check: built in $(( $(date +%s) - start )) s; running"
"$out/test_ops"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -ne 0 ] && { echo "gpu-check: test_ops failed (exit $rc)"; exit 1; }
echo "gpu-check: NOT BUILT YET: the GPU training step, the GPT-2 124M throughput"
echo "gpu-check: benchmark (tokens/s, MFU) and the Shakespeare run; this check is incomplete"
exit 2
