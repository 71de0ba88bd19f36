// ops_internal — what the files of the FP16 kernels (ops.cu, ops_attention.cu) share;
// internal to them (the rest of offload/ sees ops.cuh): the block size, 16-byte
// accesses of 8 halves, the warp reductions, and the choice of a kernel's form (8
// elements a thread or 1; 32- or 64-bit indices) at its launch. Everything here is
// inline or a template in an anonymous namespace, so each file gets its own copy.
#ifndef GT_OFFLOAD_OPS_INTERNAL_CUH
#define GT_OFFLOAD_OPS_INTERNAL_CUH

#include <math.h>
#include <stdint.h>

#include <initializer_list>
#include <type_traits>

#include "ops.cuh"

namespace {

constexpr int kThreads = 256;

inline int blocks_for(size_t n) { return (int)((n + kThreads - 1) / kThreads); }

// Whether every buffer is 16-byte aligned, for the elementwise kernels' V = 8 form.
inline bool ew_vec8(std::initializer_list<const void *> buffers)
{
    for (const void *p : buffers)
        if ((uintptr_t)p % 16 != 0) return false;
    return true;
}

inline __device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Two halves in a 32-bit word, the first (at the lower address) in the low bits. The
// 16-byte accesses below go through these, not through a uint4 cast to __half2: that
// breaks C++'s aliasing rules, and a host compiler that relies on them (cuda_emu's g++
// at -O2) computes garbage. nvcc makes them register moves.
inline __device__ float2 unpack_halves(unsigned w)
{
    return __half22float2(__halves2half2(__ushort_as_half((unsigned short)(w & 0xffffu)),
                                         __ushort_as_half((unsigned short)(w >> 16))));
}

inline __device__ unsigned pack_halves(float lo, float hi)
{
    const __half2 h = __floats2half2_rn(lo, hi);
    return (unsigned)__half_as_ushort(__low2half(h)) |
           ((unsigned)__half_as_ushort(__high2half(h)) << 16);
}

// V consecutive halves of a row as floats (V = 8: one 16-byte access, p aligned).
template <int V> __device__ void load_halves(float (&f)[V], const __half *p)
{
    if (V == 8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
        for (int i = 0; i < 4; i++) {
            const float2 x = unpack_halves(w[i]);
            f[2 * i] = x.x;
            f[2 * i + 1] = x.y;
        }
    } else {
        for (int i = 0; i < V; i++) f[i] = __half2float(p[i]);
    }
}

template <int V> __device__ void store_halves(__half *p, const float (&f)[V])
{
    if (V == 8) {
        const uint4 u = {pack_halves(f[0], f[1]), pack_halves(f[2], f[3]),
                         pack_halves(f[4], f[5]), pack_halves(f[6], f[7])};
        *reinterpret_cast<uint4 *>(p) = u;
    } else {
        for (int i = 0; i < V; i++) p[i] = __float2half(f[i]);
    }
}

// Combines the (running max, sum of exp(x - max)) pairs of a warp's lanes, a lane
// with no elements holding (-inf, 0); every lane gets the whole warp's pair.
inline __device__ void warp_max_sum(float &m, float &s)
{
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const float mm = fmaxf(m, m2);
        s = (m > -INFINITY ? s * expf(m - mm) : 0.0f) +
            (m2 > -INFINITY ? s2 * expf(m2 - mm) : 0.0f);
        m = mm;
    }
}

// Index arithmetic: a 64-bit division costs the GPU tens of instructions, so the
// kernels that turn a flat index into coordinates do it once per V elements, in I =
// uint32_t whenever the count fits (fits_u32 decides), uint64_t otherwise.

// A failed launch as OL_CUDA_ERROR + its cudaError_t (ops.cuh), 0 when none.
inline int launch_status()
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : OL_CUDA_ERROR + (int)e;
}

// Whether a flat count of work items (and a grid over them) fits 32-bit indices.
inline bool fits_u32(size_t items) { return items < ((size_t)1 << 32) - 1024; }

// Calls launch(V, I) with the kernel form to use: V = 8 elements per thread (v8) or 1
// as a std::integral_constant, and a value of I = uint32_t when `items` fits 32-bit
// indices (fits_u32), uint64_t otherwise; launch instantiates kernel<V, I> from them.
template <typename Launch> void launch_form(bool v8, size_t items, Launch launch)
{
    using V8 = std::integral_constant<int, 8>;
    using V1 = std::integral_constant<int, 1>;
    const bool small = fits_u32(items);
    if (v8 && small)
        launch(V8(), uint32_t());
    else if (v8)
        launch(V8(), uint64_t());
    else if (small)
        launch(V1(), uint32_t());
    else
        launch(V1(), uint64_t());
}

} // namespace

#endif
