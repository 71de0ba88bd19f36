// cuda_emu — runs gentrain's CUDA sources on the CPU, for the machines that have the
// CUDA toolkit but no GPU (CI, development). It is a test harness, not a backend: it
// checks what the kernels and the host code around them compute, not how fast, and it
// says nothing about a real GPU's timing, memory model or tensor-core rounding.
//
// How: each .cu file is translated (translate.pl: a launch `k<<<grid, block, smem,
// stream>>>(args)` becomes emu::launch(...) with a lambda calling k(args), `extern
// __shared__` becomes the launch's dynamic shared buffer) and compiled by the host C++
// compiler with this header forced in first (-include). The real CUDA headers give the
// types and the prototypes of the runtime and cuBLAS; cuda_emu.cpp defines those
// functions. A launch runs its blocks one after another and a block's threads as
// fibers (ucontext) on one OS thread, switching only at __syncthreads and the warp
// shuffles, so `__shared__` can simply be a function-local static.
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
// event wait cannot be seen), data races between threads (the fibers interleave only
// at barriers), __ldg and other intrinsics the sources do not use.
#ifndef GT_CUDA_EMU_H
#define GT_CUDA_EMU_H

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <utility>

// Host compilers see __shared__ as nothing; one block runs at a time, so a static
// local is exactly "one per block".
#undef __shared__
#define __shared__ static

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

// Runs body(ctx) once per thread of every block of c (see the header comment).
void run(const Config &c, void (*body)(void *), void *ctx);

template <typename F> void launch(const Config &c, F f)
{
    run(c, [](void *p) { (*static_cast<F *>(p))(); }, &f);
}

// The running thread's coordinates and the launch's shape.
const uint3 &thread_idx();
const uint3 &block_idx();
const dim3 &block_dim();
const dim3 &grid_dim();
void *dynamic_shared();

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

// The fibers of a launch never run at the same time: a plain add is atomic here.
inline float atomicAdd(float *p, float v)
{
    const float old = *p;
    *p = old + v;
    return old;
}

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// CUDA's global integer min and max (device and host code alike).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

#endif
