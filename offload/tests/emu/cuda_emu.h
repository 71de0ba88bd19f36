// cuda_emu — runs gentrain's CUDA sources on the CPU, for the machines that have the
// CUDA toolkit but no GPU (CI, development). It is a test harness, not a backend: it
// checks what the kernels and the host code around them compute, not how fast, and it
// says nothing about a real GPU's timing, memory model or tensor-core rounding.
//
// How: each .cu file is translated (translate.pl: a launch `k<<<grid, block, smem,
// stream>>>(args)` becomes emu::launch(...) with k's name and a lambda calling k(args),
// `extern __shared__` becomes the launch's dynamic shared buffer, a static `__shared__`
// declaration a reference into the launch's copy of it) and compiled by the host C++
// compiler with this header forced in first (-include). The real CUDA headers give the
// types and the prototypes of the runtime and cuBLAS; cuda_emu.cpp defines those
// functions. A launch runs its blocks one after another and a block's threads as
// fibers on one OS thread, switching only at __syncthreads and the warp shuffles.
// Shared memory, static and dynamic, is poisoned (0xff bytes) before each block.
//
// Thread orders (CUDA_EMU_ORDER): between two barriers a block's threads run one after
// another, so the order they run in is the one freedom the emulation has to show a
// missing barrier or a race on shared or global memory. forward (the default): blocks
// and threads first to last; reverse: last to first; shuffle[:SEED]: a seeded random
// order of the blocks and, at every barrier, of the threads; all: every launch runs in
// the three (forward, reverse, shuffle) from the same device memory, and any byte of
// device memory that comes out different is reported with the kernel's name (bits
// summed with atomicAdd may differ in rounding, as on a GPU: those are compared within
// 1e-5 of the sum of the magnitudes added there).
//
// What it checks that a plain CPU port would not: launch configurations against the
// hardware limits; barriers that not every live thread reaches (a deadlock is
// reported, not hung); warp shuffles with lanes that have exited; copies and cuBLAS
// calls given host pointers where device memory is required (and the reverse); the
// cuBLAS argument rules (leading dimensions, supported type combinations); device
// memory that is read before it is written shows up as NaN (allocations are filled
// with 0xff bytes, a NaN in FP16 and FP32). Under AddressSanitizer, an out-of-bounds
// access of device memory is reported where it happens.
//
// A node's devices: CUDA_EMU_DEVICES (default 1) of them, each process emulating the
// one it takes, so ranks of one node can each have their own (tensor-parallel peers
// over NCCL, which wants a GPU per rank: nccl_emu.c stands in for its calls over MPI).
//
// Not emulated: concurrency between streams (everything is synchronous, so a missing
// event wait cannot be seen), races between threads within one stretch between
// barriers other than by the orders above (a thread runs a whole stretch at once),
// __ldg and other intrinsics the sources do not use.
#ifndef GT_CUDA_EMU_H
#define GT_CUDA_EMU_H

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <utility>

// translate.pl rewrites every __shared__ declaration; one left over is an error.
#undef __shared__
#define __shared__ __shared___not_translated_by_translate_pl

namespace emu {

struct Config {
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
};

inline Config config(dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = 0)
{
    return Config{grid, block, shared_bytes, stream};
}

// Runs body(ctx) once per thread of every block of c (see the header comment); kernel
// names it in messages.
void run(const Config &c, const char *kernel, void (*body)(void *), void *ctx);

template <typename F> void launch(const Config &c, const char *kernel, F f)
{
    run(c, kernel, [](void *p) { (*static_cast<F *>(p))(); }, &f);
}

// The running thread's coordinates and the launch's shape.
const uint3 &thread_idx();
const uint3 &block_idx();
const dim3 &block_dim();
const dim3 &grid_dim();
void *dynamic_shared();
// The running block's copy of the static shared array declared at `site` (bytes long).
void *static_shared(const void *site, size_t bytes);
// atomicAdd: a plain add (the fibers never run at the same time) that, in the
// CUDA_EMU_ORDER=all runs, notes where it added and how much.
float atomic_add(float *p, float v);

void sync_threads();
// One warp's exchange: every live lane of the warp must call it (mask: the lanes that
// take part, all 32 in gentrain's kernels); returns the value of lane `src_lane`.
float warp_exchange(unsigned mask, float v, int src_lane);
int lane_id();

} // namespace emu

#define threadIdx (emu::thread_idx())
#define blockIdx (emu::block_idx())
#define blockDim (emu::block_dim())
#define gridDim (emu::grid_dim())

inline void __syncthreads() { emu::sync_threads(); }

inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask, int width = 32)
{
    (void)width;
    return emu::warp_exchange(mask, v, emu::lane_id() ^ lane_mask);
}

inline float atomicAdd(float *p, float v) { return emu::atomic_add(p, v); }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// CUDA's global integer min and max (device and host code alike).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

#endif
